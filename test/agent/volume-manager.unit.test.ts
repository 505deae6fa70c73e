import assert from 'node:assert/strict';
import { test } from 'node:test';
import { VolumeManager, WaitForAttachAndMountError } from '../../src/agent/volume-manager.js';
import { VirtualClock } from '../../src/clock.js';
import { FakePlugin, type FakeCallRecord, type FaultScript } from '../../src/plugins/fake.js';
import { caps } from '../../src/plugins/types.js';
import { MemorySink } from '../../src/engine/sink.js';
import { claim, diskObjects, pod } from '../support/builders.js';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

async function advance(clock: VirtualClock, ms: number) {
  const target = clock.nowMs() + ms;
  for (let i = 0; i < 20; i++) await turn();
  while (clock.fireNext(target)) for (let i = 0; i < 20; i++) await turn();
  clock.moveTo(target);
  for (let i = 0; i < 20; i++) await turn();
}

function setup(opts: { faults?: FaultScript; controllerAttachDetach?: boolean } = {}) {
  const clock = new VirtualClock(0);
  const journal: FakeCallRecord[] = [];
  const diskPlugin = new FakePlugin({
    caps: caps('fake.disk', { attachable: true }),
    clock,
    journal,
    ...(opts.faults ? { faults: opts.faults } : {}),
  });
  const emptyDir = new FakePlugin({ caps: caps('kubernetes.io/empty-dir'), clock, journal });
  const vm = VolumeManager.create({
    node: 'node-1',
    plugins: [diskPlugin, emptyDir],
    clock,
    controllerAttachDetach: opts.controllerAttachDetach ?? false,
  });
  vm.start();
  for (const e of diskObjects('disk-1'))
    if (e.type === 'ObjectUpserted') vm.inputs.upsertObject(e.object);
  vm.inputs.markSourcesReady();
  return { vm, clock, journal };
}

test('agent: waitForAttachAndMount resolves once every volume is mounted', async () => {
  const { vm } = setup();
  vm.inputs.addPod(pod('uid-a', [claim('disk-1'), { name: 'scratch', emptyDir: {} }]));
  await vm.waitForAttachAndMount('uid-a');
  assert.deepEqual([...vm.status.getMountedVolumesForPod('uid-a').keys()].sort(), [
    'data',
    'scratch',
  ]);
  assert.deepEqual(vm.status.getVolumesInUse(), ['fake.disk/disk-1']);
  assert.equal(vm.status.volumeIsAttached('fake.disk/disk-1'), true);
  assert.equal(vm.status.reconcilerStatesHasBeenSynced(), true);
  await vm.drainAndStop();
});

test('agent: waitForAttachAndMount times out with the kubelet message and the last error', async () => {
  const { vm, clock } = setup({
    faults: { setUp: [{ outcome: 'final', delayMs: 0, times: Infinity }] },
  });
  vm.inputs.addPod(pod('uid-a', [claim('disk-1')]));
  const waiting = vm.waitForAttachAndMount('uid-a', { timeoutMs: 5_000 });
  const settled = waiting.then(
    () => null,
    (e: unknown) => e,
  );
  await advance(clock, 6_000);
  const error = await settled;
  assert.ok(error instanceof WaitForAttachAndMountError);
  assert.match(
    error.message,
    /^unmounted volumes=\[data\], unattached volumes=\[\], failed to process volumes=\[\]: timed out waiting for the condition; last error: MountVolume\.SetUp failed: fake setUp/,
  );
  vm.stop();
});

test('agent: waitForAttachAndMount fails at once for a claim that does not exist', async () => {
  const { vm } = setup();
  vm.inputs.addPod(
    pod('uid-b', [{ name: 'data', persistentVolumeClaim: { claimName: 'missing' } }]),
  );
  await assert.rejects(vm.waitForAttachAndMount('uid-b'), (e: Error) => {
    assert.match(
      e.message,
      /failed to process volumes=\[data\]: error processing PVC default\/missing: failed to fetch PVC from API server: persistentvolumeclaims "missing" not found/,
    );
    return true;
  });
  await assert.rejects(vm.waitForAttachAndMount('nobody'), /not known to the volume manager/);
  vm.stop();
});

test('agent: supplemental groups come from the gid annotation of mounted volumes', async () => {
  const { vm } = setup();
  vm.inputs.upsertObject({
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name: 'pv-g', annotations: { 'pv.beta.kubernetes.io/gid': '1234' } },
    spec: { accessModes: ['ReadWriteOnce'], csi: { driver: 'fake.disk', volumeHandle: 'g' } },
  });
  vm.inputs.upsertObject({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'claim-g', namespace: 'default' },
    spec: { volumeName: 'pv-g' },
  });
  vm.inputs.addPod({
    ...pod('uid-g', [claim('g')]),
    spec: { volumes: [claim('g')], securityContext: { supplementalGroups: [5] } },
  });
  await vm.waitForAttachAndMount('uid-g');
  assert.deepEqual(vm.status.getExtraSupplementalGroupsForPod('uid-g'), [1234]);
  await vm.drainAndStop();
});

test('agent: a removed pod is torn down and its volume detached', async () => {
  const { vm, journal } = setup();
  vm.inputs.addPod(pod('uid-a', [claim('disk-1')]));
  await vm.waitForAttachAndMount('uid-a');
  vm.inputs.removePod('uid-a');
  await vm.waitForUnmount('uid-a');
  for (let i = 0; i < 20; i++) await turn();
  assert.deepEqual(
    journal.map((c) => c.call),
    ['attach', 'waitForAttach', 'mountDevice', 'setUp', 'tearDown', 'unmountDevice', 'detach'],
  );
  assert.deepEqual(vm.status.getVolumesInUse(), []);
  assert.equal(vm.status.hasPossiblyMountedVolumes('uid-a'), false);
  await vm.drainAndStop();
});

test('agent: events reach subscribers in order, with the world after each', async () => {
  const { vm } = setup();
  const seen: number[] = [];
  const from = vm.world.seq;
  const unsubscribe = vm.subscribe((event, world) => {
    assert.equal(world.seq, event.seq);
    seen.push(event.seq);
  });
  vm.inputs.addPod(pod('uid-a', [claim('disk-1')]));
  await vm.waitForAttachAndMount('uid-a');
  unsubscribe();
  assert.ok(seen.length > 5);
  // Every event after the subscription, each once, in order: a missing one leaves a gap.
  assert.deepEqual(
    seen,
    Array.from({ length: vm.world.seq - from }, (_, i) => from + 1 + i),
  );
  await vm.drainAndStop();
});

test('agent: every event reaches a sink that writes only when flushed, the last ones too (a call outcome that dirties nothing)', async () => {
  const clock = new VirtualClock(0);
  /** A sink whose events are durable only once flushed (as etcd's controller log). */
  class FlushOnlySink extends MemorySink {
    durable = 0;
    override flush(): void {
      this.durable = this.events.length;
    }
  }
  const sink = new FlushOnlySink();
  const emptyDir = new FakePlugin({ caps: caps('kubernetes.io/empty-dir'), clock, journal: [] });
  const vm = VolumeManager.create({
    node: 'node-1',
    plugins: [emptyDir],
    clock,
    log: { sink, history: [] },
  });
  vm.start();
  vm.inputs.markSourcesReady();
  vm.inputs.addPod(pod('uid-a', [{ name: 'scratch', emptyDir: {} }]));
  await vm.waitForAttachAndMount('uid-a');
  vm.inputs.removePod('uid-a');
  await advance(clock, 1_000);
  assert.equal(sink.events.at(-1)?.type, 'OperationFinished');
  assert.equal(sink.durable, sink.events.length, 'the events after the last plan were flushed too');
  await vm.drainAndStop();
});

test('agent: a claim without a UID gets a fresh one, kept; made again, a new one', async () => {
  const { vm } = setup();
  const data = {
    kind: 'PersistentVolumeClaim' as const,
    metadata: { name: 'data', namespace: 'default' },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
  };
  const uidNow = () =>
    vm.world.objects.lookup('PersistentVolumeClaim', 'data', 'default')?.metadata.uid;
  vm.inputs.upsertObject(data);
  const uid = uidNow();
  assert.match(uid ?? '', /^[0-9a-f-]{36}$/, 'the log records a fresh random UID');
  vm.inputs.upsertObject({
    ...data,
    spec: { ...data.spec, resources: { requests: { storage: '2Gi' } } },
  });
  assert.equal(uidNow(), uid, 'an update keeps it');
  vm.inputs.removeObject({ kind: 'PersistentVolumeClaim', name: 'data', namespace: 'default' });
  vm.inputs.upsertObject(data);
  assert.notEqual(uidNow(), uid, 'a claim created again is a new claim');
  await vm.drainAndStop();
});
