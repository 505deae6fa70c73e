/** Claim bindings written to etcd by the leader: fenced on its term, never over another binding. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Etcd3 } from 'etcd3';
import type { Compare } from '../../src/cluster/store.js';
import type { ControllerManager } from '../../src/agent/controller-manager.js';
import { ClaimBindingWriter } from '../../src/cluster/bindings.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { RealClock } from '../../src/clock.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import { Leadership } from '../../src/cluster/leadership.js';
import type { ClaimBinding } from '../../src/binding/claims.js';
import { type EtcdCluster, useEtcdCluster } from '../support/etcd-cluster.js';
import { eventually } from '../support/vole-procs.js';

const realClock = new RealClock();

let etcd: EtcdCluster;
let client: Etcd3;
const skip = useEtcdCluster((e, c) => ((etcd = e), (client = c)));

const pv = (name: string) => ({
  apiVersion: 'v1',
  kind: 'PersistentVolume',
  metadata: { name },
  spec: {
    capacity: { storage: '1Gi' },
    accessModes: ['ReadWriteOnce'],
    hostPath: { path: `/srv/${name}` },
  },
});
const pvc = (name: string, extra: object = {}) => ({
  apiVersion: 'v1',
  kind: 'PersistentVolumeClaim',
  metadata: { name, namespace: 'default' },
  spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } }, ...extra },
});

/** A controller whose world holds these bindings and the objects they bind, as applied (unbound). */
function controllerWith(bindings: Map<string, ClaimBinding>) {
  const objects = new Map<string, unknown>();
  for (const [key, binding] of bindings) {
    objects.set(key, pvc(key.split('/')[2]!));
    objects.set(`PersistentVolume//${binding.volume}`, pv(binding.volume));
  }
  return { world: { bindings, objects }, subscribe: () => () => undefined } as unknown as Pick<
    ControllerManager,
    'world' | 'subscribe'
  >;
}

async function json(
  key: string,
): Promise<{ spec: Record<string, unknown>; status?: { phase?: string } }> {
  return JSON.parse((await client.get(key).string()) ?? 'null') as never;
}

test(
  'the leader writes a binding to the claim and its PV; a deposed leader is refused by etcd and loses',
  { skip },
  async () => {
    const keys = new ClusterKeys('/b1/');
    for (const name of ['pv-1', 'pv-2'])
      await client.put(keys.object('PersistentVolume', name)).value(JSON.stringify(pv(name)));
    for (const name of ['c1', 'c2'])
      await client
        .put(keys.object('PersistentVolumeClaim', name, 'default'))
        .value(JSON.stringify(pvc(name)));
    const a = await Leadership.campaign(new EtcdStore(client), keys, {
      identity: 'a',
      ttlS: 3,
      clock: realClock,
    });
    const said: string[] = [];
    const bindings = new Map([
      ['PersistentVolumeClaim/default/c1', { volume: 'pv-1', capacityBytes: 2 ** 30 }],
    ]);
    const durable = { durable: () => Promise.resolve() };
    const writer = new ClaimBindingWriter(
      new EtcdStore(client),
      keys,
      a,
      durable,
      controllerWith(bindings),
      (l) => said.push(l),
      realClock,
    );
    writer.start();
    await eventually(
      () => writer.written === 1,
      'the binding written',
      10_000,
      () => said.join('\n'),
    );
    const claim = await json(keys.object('PersistentVolumeClaim', 'c1', 'default'));
    assert.equal(claim.spec.volumeName, 'pv-1');
    assert.deepEqual(claim.status, { phase: 'Bound', capacity: { storage: '1Gi' } });
    const volume = await json(keys.object('PersistentVolume', 'pv-1'));
    assert.deepEqual(volume.spec.claimRef, {
      kind: 'PersistentVolumeClaim',
      namespace: 'default',
      name: 'c1',
    });
    assert.equal(volume.status?.phase, 'Bound');
    await writer.stop();

    // A is deposed behind its back; its writer, still holding the old term, must not write.
    const lost: string[] = [];
    const stale = {
      term: a.term,
      isLost: false,
      fence: (): Compare[] => [{ key: keys.leader, createRevision: a.term }],
      lose: (why: string) => lost.push(why),
    };
    etcd.etcdctl('del', keys.leader);
    const b = await Leadership.campaign(new EtcdStore(client), keys, {
      identity: 'b',
      ttlS: 3,
      clock: realClock,
    });
    const more = new Map([
      ['PersistentVolumeClaim/default/c2', { volume: 'pv-2', capacityBytes: 2 ** 30 }],
    ]);
    const deposed = new ClaimBindingWriter(
      new EtcdStore(client),
      keys,
      stale as unknown as Leadership,
      durable,
      controllerWith(more),
      () => undefined,
      realClock,
    );
    deposed.start();
    await eventually(() => lost.length > 0, 'the deposed writer to learn it lost', 10_000);
    await deposed.stop();
    assert.match(lost[0]!, /fenced/);
    assert.equal(
      (await json(keys.object('PersistentVolumeClaim', 'c2', 'default'))).status,
      undefined,
    );
    assert.equal((await json(keys.object('PersistentVolume', 'pv-2'))).spec.claimRef, undefined);
    await a.resign().catch(() => undefined);
    await b.resign();
  },
);

test(
  'a binding is never written over a claim or PV that etcd binds elsewhere',
  { skip },
  async () => {
    const keys = new ClusterKeys('/b2/');
    await client.put(keys.object('PersistentVolume', 'pv-1')).value(JSON.stringify(pv('pv-1')));
    await client
      .put(keys.object('PersistentVolumeClaim', 'c1', 'default'))
      .value(JSON.stringify(pvc('c1', { volumeName: 'pv-9' })));
    const leader = await Leadership.campaign(new EtcdStore(client), keys, {
      identity: 'a',
      ttlS: 3,
      clock: realClock,
    });
    const said: string[] = [];
    const bindings = new Map([
      ['PersistentVolumeClaim/default/c1', { volume: 'pv-1', capacityBytes: 2 ** 30 }],
    ]);
    const writer = new ClaimBindingWriter(
      new EtcdStore(client),
      keys,
      leader,
      { durable: () => Promise.resolve() },
      controllerWith(bindings),
      (l) => said.push(l),
      realClock,
    );
    writer.start();
    await eventually(() => said.length > 0, 'the writer to say why it does not write', 10_000);
    await writer.stop();
    assert.match(
      said[0]!,
      /not writing claim .*c1's binding to PersistentVolume pv-1: the claim names volumeName pv-9/,
    );
    assert.equal(writer.written, 0);
    assert.equal((await json(keys.object('PersistentVolume', 'pv-1'))).spec.claimRef, undefined);
    await leader.resign();
  },
);

test(
  'a claim written again without its binding (etcdctl, a manifest with a status) gets it back',
  { skip },
  async () => {
    const keys = new ClusterKeys('/b3/');
    const claimKey = keys.object('PersistentVolumeClaim', 'c1', 'default');
    await client.put(keys.object('PersistentVolume', 'pv-1')).value(JSON.stringify(pv('pv-1')));
    await client.put(claimKey).value(JSON.stringify(pvc('c1')));
    const leader = await Leadership.campaign(new EtcdStore(client), keys, {
      identity: 'a',
      ttlS: 3,
      clock: realClock,
    });
    const bindings = new Map([
      ['PersistentVolumeClaim/default/c1', { volume: 'pv-1', capacityBytes: 2 ** 30 }],
    ]);
    const controller = controllerWith(bindings);
    let listener: ((event: unknown, world: unknown) => void) | undefined;
    (controller as { subscribe: unknown }).subscribe = (l: typeof listener) => (
      (listener = l),
      () => undefined
    );
    const writer = new ClaimBindingWriter(
      new EtcdStore(client),
      keys,
      leader,
      { durable: () => Promise.resolve() },
      controller,
      () => undefined,
      realClock,
    );
    writer.start();
    await eventually(() => writer.written === 1, 'the binding written', 10_000);
    // Overwritten behind the controller's back; its informer brings the claim in as it is now.
    const overwritten = pvc('c1', { volumeName: 'pv-1' });
    await client
      .put(claimKey)
      .value(JSON.stringify({ ...overwritten, status: { phase: 'Pending' } }));
    listener!(
      { type: 'ObjectUpserted', object: { ...overwritten, status: { phase: 'Pending' } } },
      controller.world,
    );
    await eventually(() => writer.written === 2, 'the binding written again', 10_000);
    assert.equal((await json(claimKey)).status?.phase, 'Bound');
    await writer.stop();
    await leader.resign();
  },
);

/** A PV as the provisioner records it (provisionClaimOperation): in the leader's log only. */
const provisionedPv = (name: string, claim: string) => ({
  apiVersion: 'v1',
  kind: 'PersistentVolume',
  metadata: { name, annotations: { 'pv.kubernetes.io/provisioned-by': 'disk.csi.vole.dev' } },
  spec: {
    capacity: { storage: '1Gi' },
    accessModes: ['ReadWriteOnce'],
    persistentVolumeReclaimPolicy: 'Delete',
    storageClassName: 'fast',
    claimRef: {
      kind: 'PersistentVolumeClaim',
      namespace: 'default',
      name: claim,
      uid: `u-${claim}`,
    },
    csi: { driver: 'disk.csi.vole.dev', volumeHandle: name },
  },
});

test(
  'a PV the leader provisioned is created with its binding in one fenced transaction; ' +
    'a deposed leader creates none',
  { skip },
  async () => {
    const keys = new ClusterKeys('/b4/');
    for (const name of ['c1', 'c2'])
      await client
        .put(keys.object('PersistentVolumeClaim', name, 'default'))
        .value(JSON.stringify(pvc(name, { storageClassName: 'fast' })));
    const controllerOf = (claim: string) => {
      const volume = `pvc-u-${claim}`;
      const key = `PersistentVolumeClaim/default/${claim}`;
      const objects = new Map<string, unknown>([
        [key, pvc(claim, { storageClassName: 'fast' })],
        [`PersistentVolume//${volume}`, provisionedPv(volume, claim)],
      ]);
      const bindings = new Map([[key, { volume, capacityBytes: 2 ** 30 }]]);
      return { world: { bindings, objects }, subscribe: () => () => undefined } as unknown as Pick<
        ControllerManager,
        'world' | 'subscribe'
      >;
    };
    const a = await Leadership.campaign(new EtcdStore(client), keys, {
      identity: 'a',
      ttlS: 3,
      clock: realClock,
    });
    const said: string[] = [];
    const durable = { durable: () => Promise.resolve() };
    const store = new EtcdStore(client);
    const writer = new ClaimBindingWriter(
      store,
      keys,
      a,
      durable,
      controllerOf('c1'),
      (l) => said.push(l),
      realClock,
    );
    writer.start();
    await eventually(
      () => writer.written === 1,
      'the PV created',
      10_000,
      () => said.join('\n'),
    );
    await writer.stop();
    const volume = await json(keys.object('PersistentVolume', 'pvc-u-c1'));
    assert.equal(volume.status?.phase, 'Bound');
    assert.deepEqual(volume.spec.csi, { driver: 'disk.csi.vole.dev', volumeHandle: 'pvc-u-c1' });
    assert.equal((volume.spec.claimRef as { name?: string }).name, 'c1');
    const claim = await json(keys.object('PersistentVolumeClaim', 'c1', 'default'));
    assert.equal(claim.spec.volumeName, 'pvc-u-c1');
    assert.equal(claim.status?.phase, 'Bound');

    const lost: string[] = [];
    const stale = {
      term: a.term,
      isLost: false,
      fence: (): Compare[] => [{ key: keys.leader, createRevision: a.term }],
      lose: (why: string) => lost.push(why),
    };
    etcd.etcdctl('del', keys.leader);
    const b = await Leadership.campaign(store, keys, { identity: 'b', ttlS: 3, clock: realClock });
    const deposed = new ClaimBindingWriter(
      store,
      keys,
      stale as unknown as Leadership,
      durable,
      controllerOf('c2'),
      () => undefined,
      realClock,
    );
    deposed.start();
    await eventually(() => lost.length > 0, 'the deposed writer to learn it lost', 10_000);
    await deposed.stop();
    assert.match(lost[0]!, /fenced/);
    assert.equal(await client.get(keys.object('PersistentVolume', 'pvc-u-c2')).string(), null);
    assert.equal(
      (await json(keys.object('PersistentVolumeClaim', 'c2', 'default'))).spec.volumeName,
      undefined,
    );
    await a.resign().catch(() => undefined);
    await b.resign();
  },
);
