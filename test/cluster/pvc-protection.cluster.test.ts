/**
 * pvc-protection on a real etcd: `vole apply` gives a claim the kubernetes.io/pvc-protection
 * finalizer (admission), `vole delete` only marks it deleted, and the leader's bindings
 * writer removes the finalizer on the planner's ClaimFinalizerRemoved, fenced on its term,
 * which removes the claim; a deposed leader's removal is refused.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Etcd3 } from 'etcd3';
import type { ControllerManager } from '../../src/agent/controller-manager.js';
import { pvcProtectionFinalizer } from '../../src/binding/claim-protection.js';
import { ClaimBindingWriter } from '../../src/cluster/bindings.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { Leadership } from '../../src/cluster/leadership.js';
import { applyManifestSet, deleteManifestSet } from '../../src/cluster/objects.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import type { Compare } from '../../src/cluster/store.js';
import { RealClock } from '../../src/clock.js';
import type { VoleEvent } from '../../src/events/index.js';
import { manifestObject } from '../../src/events/k8s.js';
import type { ManifestSet } from '../../src/sources/manifests.js';
import { useEtcdCluster } from '../support/etcd-cluster.js';
import { eventually } from '../support/vole-procs.js';

const realClock = new RealClock();
let client: Etcd3;
const skip = useEtcdCluster((_e, c) => (client = c));

function claimSet(...names: string[]): ManifestSet {
  const objects = new Map();
  for (const name of names) {
    const object = manifestObject.parse({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name, namespace: 'default', uid: `uid-${name}` },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    });
    objects.set(`PersistentVolumeClaim/default/${name}`, object);
  }
  return { pods: new Map(), objects, problems: [], assignedUids: new Set() };
}

/** A controller whose log hands the writer these events (as its subscribers see them). */
function controllerFeeding() {
  let listener: ((event: VoleEvent, world: unknown) => void) | undefined;
  const world = { bindings: new Map(), objects: new Map() };
  const cm = {
    world,
    subscribe: (f: typeof listener) => ((listener = f), () => undefined),
  } as unknown as Pick<ControllerManager, 'world' | 'subscribe'>;
  const released = (claim: string, seq: number) =>
    listener!(
      { type: 'ClaimFinalizerRemoved', seq, tsMs: 0, namespace: 'default', claim, cause: 1 },
      world,
    );
  return { cm, released };
}

async function stored(key: string) {
  const text = await client.get(key).string();
  return text === null
    ? null
    : (JSON.parse(text) as { metadata: { finalizers?: string[]; deletionTimestamp?: string } });
}

test(
  'a claim applied gets the pvc-protection finalizer; deleted, it stays until the leader removes the finalizer',
  { skip },
  async () => {
    const keys = new ClusterKeys('/p1/');
    const store = new EtcdStore(client);
    const keyOf = (name: string) => keys.object('PersistentVolumeClaim', name, 'default');
    await applyManifestSet(store, keys, claimSet('data', 'other'));
    assert.deepEqual((await stored(keyOf('data')))?.metadata.finalizers, [pvcProtectionFinalizer]);
    // Applied again: one finalizer still, no deletion.
    await applyManifestSet(store, keys, claimSet('data'));
    assert.deepEqual((await stored(keyOf('data')))?.metadata.finalizers, [pvcProtectionFinalizer]);

    const at = new Date('2026-01-02T03:04:05.678Z');
    const result = await deleteManifestSet(store, keys, claimSet('data', 'other'), () => at);
    assert.equal(result.deleted.length, 2);
    const marked = await stored(keyOf('data'));
    assert.equal(marked?.metadata.deletionTimestamp, '2026-01-02T03:04:05Z');
    assert.deepEqual(marked?.metadata.finalizers, [pvcProtectionFinalizer]);
    // Applied again while being deleted: the deletion stays.
    await applyManifestSet(store, keys, claimSet('data'));
    assert.equal((await stored(keyOf('data')))?.metadata.deletionTimestamp, '2026-01-02T03:04:05Z');

    // A deposed leader's writer (an old term) is refused by etcd and learns it lost.
    const leader = await Leadership.campaign(store, keys, {
      identity: 'a',
      ttlS: 3,
      clock: realClock,
    });
    const lost: string[] = [];
    const stale = {
      term: leader.term - 1,
      isLost: false,
      fence: (): Compare[] => [{ key: keys.leader, createRevision: leader.term - 1 }],
      lose: (why: string) => lost.push(why),
    } as unknown as Leadership;
    const durable = { durable: () => Promise.resolve() };
    const old = controllerFeeding();
    const deposed = new ClaimBindingWriter(
      store,
      keys,
      stale,
      durable,
      old.cm,
      () => {},
      realClock,
    );
    deposed.start();
    old.released('data', 10);
    await eventually(() => lost.length > 0, 'the deposed writer to learn it lost', 10_000);
    await deposed.stop();
    assert.match(lost[0]!, /finalizer removal was refused \(fenced\)/);
    assert.notEqual(await stored(keyOf('data')), null);

    const said: string[] = [];
    const fed = controllerFeeding();
    const writer = new ClaimBindingWriter(
      store,
      keys,
      leader,
      durable,
      fed.cm,
      (l) => said.push(l),
      realClock,
    );
    writer.start();
    fed.released('data', 11);
    fed.released('other', 12);
    await eventually(
      async () => (await stored(keyOf('data'))) === null && (await stored(keyOf('other'))) === null,
      'both claims removed',
      10_000,
      () => said.join('\n'),
    );
    await writer.stop();
    await leader.resign();
  },
);
