/**
 * The node agent's ConfigMap and Secret watches (src/kube/content-watches.ts) in front of
 * the real volume manager, with content plugins that read the agent's contents store as
 * the real ones do, and an API server played by a map of objects: a watch lists what the
 * map holds, and sees a deletion only while it runs.
 *
 * The case found on a real cluster: pod A reads Secret s and ConfigMap c; A is deleted,
 * then s and c; pod B, created after, names both. B must not be set up with the deleted
 * data: its setUp fails with the kubelet's `secret "s" not found` until they exist again.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { VolumeManager } from '../../src/agent/volume-manager.js';
import { VirtualClock } from '../../src/clock.js';
import type { VoleEvent } from '../../src/events/index.js';
import type { ManifestObject, Pod } from '../../src/events/k8s.js';
import type { ApiObject, InformerHandlers } from '../../src/kube/informer.js';
import { ContentWatches } from '../../src/kube/content-watches.js';
import { podEventOf, type StartedOperation } from '../../src/kube/pod-events.js';
import { type ContentRef, contentRefKey, contentRefsOf } from '../../src/kube/references.js';
import { FakePlugin, type FakeCallRecord } from '../../src/plugins/fake.js';
import { caps } from '../../src/plugins/types.js';
import { why, whyText } from '../../src/postmortem/index.js';
import { ObjectContents } from '../../src/sources/contents.js';
import { checkSetUpContents } from '../../src/kubelet/content-invariant.js';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

async function advance(clock: VirtualClock, ms: number) {
  const target = clock.nowMs() + ms;
  for (let i = 0; i < 20; i++) await turn();
  while (clock.fireNext(target)) for (let i = 0; i < 20; i++) await turn();
  clock.moveTo(target);
  for (let i = 0; i < 20; i++) await turn();
}

const secret = (password: string): ApiObject => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name: 's', namespace: 'default' },
  stringData: { password },
});
const configMap = (mode: string): ApiObject => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'c', namespace: 'default' },
  data: { mode },
});

const podReading = (uid: string): Pod => ({
  metadata: { name: uid, namespace: 'default', uid },
  spec: {
    volumes: [
      { name: 'sec', secret: { secretName: 's' } },
      { name: 'cfg', configMap: { name: 'c' } },
    ],
  },
});

/** The API server's objects, and the watches running on them (by ContentRef key). */
class FakeApi {
  readonly objects = new Map<string, ApiObject>();
  readonly watching = new Map<string, Omit<InformerHandlers, 'trouble'>>();
  started = 0;

  private static key(o: ApiObject): string {
    const kind = o.kind as ContentRef['kind'];
    return contentRefKey({
      kind,
      namespace: o.metadata.namespace ?? 'default',
      name: o.metadata.name,
    });
  }

  put(o: ApiObject): void {
    this.objects.set(FakeApi.key(o), o);
    this.watching.get(FakeApi.key(o))?.upsert(o);
  }

  delete(o: ApiObject): void {
    this.objects.delete(FakeApi.key(o));
    this.watching.get(FakeApi.key(o))?.remove(o);
  }

  /** A list+watch of one object: the list now, then its changes until stopped. */
  start(ref: ContentRef, handlers: Omit<InformerHandlers, 'trouble'>) {
    this.started++;
    const key = contentRefKey(ref);
    const listed = this.objects.get(key);
    if (listed !== undefined) handlers.upsert(listed);
    handlers.listed?.(listed === undefined ? [] : [listed]);
    this.watching.set(key, handlers);
    return {
      synced: Promise.resolve(),
      stop: async () => {
        if (this.watching.get(key) === handlers) this.watching.delete(key);
      },
    };
  }
}

function setup() {
  const clock = new VirtualClock(0);
  const journal: FakeCallRecord[] = [];
  const contents = new ObjectContents();
  const reader = (name: string) =>
    new FakePlugin({ caps: caps(name, { requiresRemount: true }), clock, journal, contents });
  const vm = VolumeManager.create({
    node: 'node-1',
    plugins: [reader('kubernetes.io/secret'), reader('kubernetes.io/configmap')],
    clock,
    contents,
    controllerAttachDetach: false,
  });
  vm.start();
  vm.inputs.markSourcesReady();
  const api = new FakeApi();
  // As KubeAgent wires them: upserts into the log (data into contents), forgets out of both.
  const watches = new ContentWatches({
    start: (ref, handlers) => api.start(ref, handlers),
    upsert: (o) => vm.inputs.upsertObject(o as unknown as ManifestObject),
    forget: (ref) => {
      if (vm.world.objects.lookup(ref.kind, ref.name, ref.namespace) !== undefined)
        vm.inputs.removeObject(ref);
    },
  });
  const log: { event: VoleEvent; violations: number }[] = [];
  const operations = new Map<string, StartedOperation>();
  const podEvents: string[] = [];
  vm.subscribe((event, world) => {
    log.push({ event, violations: checkSetUpContents(world, event).length });
    if (event.type === 'OperationStarted')
      operations.set(event.opId, { pod: event.pod, volume: event.volume });
    const podEvent = podEventOf(event, world, operations);
    if (podEvent !== undefined) podEvents.push(`${podEvent.reason}: ${podEvent.message}`);
  });
  /** What KubeAgent.onPod does: watch its objects, add the pod once they are listed. */
  const addPod = async (pod: Pod) => {
    await Promise.all(watches.follow(pod.metadata.uid!, contentRefsOf(pod)).map((w) => w.synced));
    vm.inputs.addPod(pod);
  };
  /** What KubeAgent.podGone does: the pod out, then its objects' watches. */
  const podGone = (uid: string) => {
    vm.inputs.removePod(uid);
    watches.follow(uid, []);
  };
  return { vm, clock, journal, contents, api, watches, log, podEvents, addPod, podGone };
}

test('kube content watches: a Secret and ConfigMap deleted after their last pod never reach the next one', async () => {
  const { vm, clock, contents, api, log, podEvents, addPod, podGone } = setup();
  api.put(secret('old'));
  api.put(configMap('old'));
  await addPod(podReading('uid-a'));
  await advance(clock, 1_000);
  assert.deepEqual([...vm.status.getMountedVolumesForPod('uid-a').keys()].sort(), ['cfg', 'sec']);

  podGone('uid-a');
  // The last reader went: the watches stopped, and the objects went from the world with them.
  assert.equal(api.watching.size, 0);
  assert.equal(vm.world.objects.lookup('Secret', 's', 'default'), undefined);
  assert.equal(contents.get('Secret', 'default', 's'), undefined);
  // Deleted while nothing watches them.
  api.delete(secret('old'));
  api.delete(configMap('old'));
  await advance(clock, 3_000);

  await addPod(podReading('uid-b'));
  await advance(clock, 30_000);
  assert.deepEqual([...vm.status.getMountedVolumesForPod('uid-b').keys()], []);
  assert.ok(
    podEvents.some((e) =>
      e.startsWith('FailedMount: MountVolume.SetUp failed for volume "sec" : secret "s" not found'),
    ),
    podEvents.join('\n'),
  );
  assert.ok(
    podEvents.some((e) =>
      e.startsWith(
        'FailedMount: MountVolume.SetUp failed for volume "cfg" : configmap "c" not found',
      ),
    ),
    podEvents.join('\n'),
  );
  const answer = whyText(why(vm.world, 'uid-b')!);
  assert.match(answer, /2 of 2 volume\(s\) not ready/);
  assert.match(answer, /waits on Secret default\/s since seq \d+ — secret "s" not found/);
  assert.match(answer, /waits on ConfigMap default\/c since seq \d+ — configmap "c" not found/);

  // Created again: the next retry mounts the new data.
  api.put(secret('new'));
  api.put(configMap('new'));
  await advance(clock, 60_000);
  assert.deepEqual([...vm.status.getMountedVolumesForPod('uid-b').keys()].sort(), ['cfg', 'sec']);
  assert.equal(contents.get('Secret', 'default', 's')?.get('password')?.toString(), 'new');
  assert.equal(log.filter((l) => l.violations > 0).length, 0, 'no setUp with an object missing');
  await vm.drainAndStop();
});

test('kube content watches: a list without the object forgets it (deleted while no watch ran)', async () => {
  const { vm, api, watches } = setup();
  api.put(secret('old'));
  await Promise.all(
    watches.follow('uid-a', contentRefsOf(podReading('uid-a'))).map((w) => w.synced),
  );
  assert.ok(vm.world.objects.lookup('Secret', 's', 'default') !== undefined);
  // A relist (after 410 Gone, or a broken watch) no longer has it.
  api.watching.get('Secret/default/s')!.listed!([]);
  assert.equal(vm.world.objects.lookup('Secret', 's', 'default'), undefined);
  // A stopped watch's late event brings nothing back.
  const late = api.watching.get('Secret/default/s')!;
  watches.follow('uid-a', []);
  late.upsert(secret('late'));
  assert.equal(vm.world.objects.lookup('Secret', 's', 'default'), undefined);
  await vm.drainAndStop();
});

test('kube content watches: one watch per object however many pods read it, stopped with the last', async () => {
  const { vm, api, watches } = setup();
  api.put(secret('old'));
  api.put(configMap('old'));
  watches.follow('uid-a', contentRefsOf(podReading('uid-a')));
  watches.follow('uid-b', contentRefsOf(podReading('uid-b')));
  assert.equal(api.started, 2);
  watches.follow('uid-a', []);
  assert.equal(api.watching.size, 2, 'uid-b still reads both');
  assert.ok(vm.world.objects.lookup('Secret', 's', 'default') !== undefined);
  watches.follow('uid-b', []);
  assert.equal(api.watching.size, 0);
  assert.equal(vm.world.objects.lookup('ConfigMap', 'c', 'default'), undefined);
  await vm.drainAndStop();
});
