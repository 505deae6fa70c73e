/**
 * The controller's snapshots written in slices (src/engine/snapshot.ts): the same bytes
 * in one call or in slices, the world it started at whatever is folded meanwhile, specs
 * read back shared, the fold's indexes built again, and the event loop turning between
 * slices. The time a slice takes is in the bench (failover rows), not asserted here.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serialize } from 'node:v8';
import { isDeepStrictEqual } from 'node:util';
import { managedAnnotation } from '../../src/controller/index.js';
import {
  allAttachments,
  type ControllerWorld,
  isAttached,
  isDesired,
  volumesOf,
} from '../../src/controller/types.js';
import { attachmentState, startingDevice } from '../../src/controller/attachment-record.js';
import { controllerCore } from '../../src/engine/cores.js';
import { valuesOf } from '../../src/desired/one-or-many.js';
import { UniquePodName } from '../../src/ids.js';
import { type SlicedFields, sliceEntries, slicedCloneCodec } from '../../src/engine/snapshot.js';
import type { NewEvent, VoleEvent } from '../../src/events/index.js';
import type { Node } from '../../src/events/k8s.js';
import { claim, controllerStarted, diskObjects, pod } from '../support/builders.js';
import { heapUsedAfterGc } from '../../scripts/bench/util.js';
import { flatSpecCount, flattenSpecs } from '../support/flat-specs.js';

const codec = controllerCore.snapshot;

function append(world: ControllerWorld, event: NewEvent): void {
  controllerCore.fold(world, { ...event, seq: world.seq + 1 } as VoleEvent);
}

/**
 * Plans and carries out every dirty volume's operations at once (every call succeeds);
 * returns what it planned.
 */
function settle(world: ControllerWorld): string[] {
  const planned: string[] = [];
  while (world.dirty.size > 0) {
    const volumes = world.dirty;
    world.dirty = new Set();
    for (const op of controllerCore.plan(world, 0, { volumes }).operations) {
      planned.push(`${op.op} ${op.volume}@${op.node}`);
      const opId = `op-${world.seq + 1}`;
      const call = op.op === 'provision' ? 'createVolume' : op.op;
      append(world, { type: 'OperationStarted', tsMs: 0, opId, ...controllerCore.decision(op) });
      append(world, { type: 'CallStarted', tsMs: 0, opId, call });
      append(world, { type: 'CallSucceeded', tsMs: 0, opId, call, devicePath: '/dev/x' });
      append(world, { type: 'OperationFinished', tsMs: 0, opId, outcome: 'ok' });
    }
  }
  return planned;
}

function podOn(i: number, nodeName: string): NewEvent {
  const p = pod(`uid-${i}`, [claim(`disk-${i}`)]);
  return { type: 'PodUpserted', tsMs: 0, pod: { ...p, spec: { ...p.spec, nodeName } } };
}

/** Node `n`, ready, its attachments managed by the controller, no volume in use. */
function node(n: number): Node {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: `node-${n}`, annotations: { [managedAnnotation]: 'true' } },
    status: { conditions: [{ type: 'Ready', status: 'True' }], volumesInUse: [] },
  };
}

/** `pods` pods over 10 nodes, each with its attached disk. */
function controllerWorld(pods: number): ControllerWorld {
  const world = controllerCore.initialWorld();
  append(world, controllerStarted);
  for (let n = 0; n < 10; n++) append(world, { type: 'ObjectUpserted', tsMs: 0, object: node(n) });
  for (let i = 0; i < pods; i++) {
    for (const event of diskObjects(`disk-${i}`)) append(world, event);
    append(world, podOn(i, `node-${i % 10}`));
  }
  settle(world);
  return world;
}

const withoutDirty = (w: ControllerWorld) => ({ ...w, dirty: new Set() });

/**
 * The world as snapshots before format 5 held it: a pair's desire and its attachment in two
 * maps keyed alike (`dsw`, whose entries held their key, and `attachments`).
 */
function formerWorld(world: ControllerWorld) {
  const { dirty: _dirty, pairs, ...rest } = world;
  const dsw = new Map<string, Record<string, unknown>>();
  const attachments = new Map<string, Record<string, unknown>>();
  for (const [key, p] of pairs) {
    const { volume, node } = p;
    if (isDesired(p)) {
      const { pods, multiAttachErrorReported } = p;
      dsw.set(key, { key, volume, node, spec: p.desiredSpec, pods, multiAttachErrorReported });
    }
    if (!isAttached(p)) continue;
    const { value, devicePath, callFrom, device, detachRequestedAtMs, seq } = p;
    const spec = p.attachedSpec;
    attachments.set(key, {
      volume,
      node,
      spec,
      value,
      devicePath,
      callFrom,
      device,
      ...{ detachRequestedAtMs, seq },
    });
  }
  return { ...rest, dsw, attachments };
}

/** Format 4 as it was written: the two maps, a pod's entries of both beside it. */
const formerCodec = slicedCloneCodec<ControllerWorld>(
  4,
  {
    maps: ['pods', 'objects', 'bindings', 'nodes', 'dsw', 'attachments', 'causes'],
    sets: ['reported'],
    derived: ['podsByObject', 'nodesByVolume', 'volumesByNode'],
    shared: ['dsw', 'attachments'],
    *companions(name: string, value: unknown) {
      const record = value as ControllerWorld['pods'] extends Map<string, infer P> ? P : never;
      if (name !== 'pods' || record.node === null) return;
      for (const v of volumesOf(record.volumes)) {
        yield ['dsw', `${v.volume}@${record.node}`];
        yield ['attachments', `${v.volume}@${record.node}`];
      }
    },
  } as unknown as SlicedFields<ControllerWorld>,
  (world) => world as ControllerWorld,
);

const encodeFormer = (former: ReturnType<typeof formerWorld>) =>
  formerCodec.encode(former as unknown as ControllerWorld);

test('sliced snapshot: more slices than one, the same bytes as one call, read back equal', async () => {
  const world = controllerWorld(sliceEntries + 500);
  assert.equal([...allAttachments(world)].length, sliceEntries + 500);
  let turns = 0;
  const { data, stats } = await codec.encodeSliced(world, async () => {
    turns++;
    await new Promise<void>((resolve) => setImmediate(resolve));
  });
  // pods, objects (PVs, claims, nodes), causes and the remaining maps: each ≥ 2 slices for the large ones
  assert.ok(stats.slices >= 6, `${stats.slices} slices`);
  assert.equal(turns, stats.slices - 1, 'a turn of the event loop between two slices');
  assert.ok(codec.encode(world).equals(data), 'encoded in one call: the same bytes');
  for (const decoded of [
    codec.decode(data, codec.format),
    await codec.decodeSliced(data, codec.format),
  ]) {
    assert.ok(decoded !== undefined, 'decodes');
    assert.ok(isDeepStrictEqual(withoutDirty(decoded), withoutDirty(world)), 'the same world');
    assert.deepEqual(decoded.podsByObject, world.podsByObject, 'the pod index built again');
    assert.deepEqual(decoded.nodesByVolume, world.nodesByVolume);
    assert.deepEqual(decoded.volumesByNode, world.volumesByNode);
    for (const record of decoded.pods.values()) {
      const spec = volumesOf(record.volumes)[0]!;
      const key = `${spec.volume}@${record.node}`;
      const pair = decoded.pairs.get(key);
      assert.equal(pair?.desiredSpec, spec, `${key}: the desired spec is the pod's`);
      assert.equal(pair?.attachedSpec, spec, `${key}: the attachment's too`);
      assert.equal(pair?.device, startingDevice, `${key}: device shared`);
    }
  }
});

test('sliced snapshot: the world at the seq it started at, whatever is folded between slices', async () => {
  const world = controllerWorld(sliceEntries + 10);
  const before = codec.encode(world);
  const seq = world.seq;
  let turns = 0;
  const { data } = await codec.encodeSliced(world, async () => {
    // The engine goes on between slices: pods come and go, the node reports volumes in use.
    const i = sliceEntries + 10 + turns++;
    for (const event of diskObjects(`disk-${i}`)) append(world, event);
    append(world, podOn(i, 'node-1'));
    append(world, { type: 'PodRemoved', tsMs: 0, uid: `uid-${turns}` });
    settle(world);
  });
  assert.ok(world.seq > seq && turns > 0, 'the world changed during the encode');
  assert.ok(data.equals(before), 'the snapshot is the world as it was when the encode began');
  assert.equal(codec.decode(data, codec.format)?.seq, seq);
});

test('sliced snapshot: a format-3 snapshot (one structured-clone value) is still read', () => {
  const world = controllerWorld(20);
  const old = serialize({ v8: process.versions.v8, world: formerWorld(world) });
  const decoded = codec.decode(old, 3);
  assert.ok(decoded !== undefined && isDeepStrictEqual(withoutDirty(decoded), withoutDirty(world)));
  assert.equal(codec.decode(old, 2), undefined, 'another format is not read');
  assert.equal(codec.decode(Buffer.from('not a snapshot'), codec.format), undefined);
});

test('sliced snapshot: one written before the shared intake (objects in a Map, pods read keys) is read and indexed', () => {
  const world = controllerWorld(20);
  // Before src/desired: a pod's record held the keys its resolution read, without its node.
  const keyed = new Map(
    [...world.pods].map(([uid, record]) => {
      const keys: string[] = [];
      for (let i = 0; i < record.references.length; i += 2) {
        const kind = record.references[i]!;
        const namespace = kind === 'PersistentVolume' ? '' : 'default';
        keys.push(`${kind}/${namespace}/${record.references[i + 1]}`);
      }
      return [uid, { ...record, references: keys }];
    }),
  );
  const old = { ...world, pods: keyed, objects: new Map(world.objects) };
  const decoded = codec.decode(codec.encode(old as unknown as ControllerWorld), codec.format);
  assert.ok(decoded !== undefined, 'decodes');
  assert.ok(isDeepStrictEqual(withoutDirty(decoded), withoutDirty(world)), 'the same world');
  assert.equal(decoded.objects.lookup('Node', 'node-1')?.metadata.name, 'node-1');
});

test('sliced snapshot: pod records written holding their node among their references are read without it', () => {
  const world = controllerWorld(20);
  for (const record of world.pods.values())
    assert.ok(!record.references.includes('Node'), 'a record holds no Node reference');
  const withNode = new Map(
    [...world.pods].map(([uid, record]) => [
      uid,
      { ...record, references: [...record.references, 'Node', record.node ?? ''] },
    ]),
  );
  const old = { ...world, pods: withNode };
  const decoded = codec.decode(codec.encode(old), codec.format);
  assert.ok(decoded !== undefined, 'decodes');
  assert.ok(isDeepStrictEqual(withoutDirty(decoded), withoutDirty(world)), 'the same world');
  const onNode3 = (w: ControllerWorld) =>
    [...valuesOf(w.podsByObject.get('Node')?.get('')?.get('node-3'))].sort();
  assert.deepEqual(
    onNode3(decoded),
    ['uid-13', 'uid-3'],
    "a node's pods indexed from their records",
  );
  assert.deepEqual(onNode3(world), ['uid-13', 'uid-3']);
});

test('sliced snapshot: desired attachments written with a Map of pod names are read with their pods bare', () => {
  const world = controllerWorld(20);
  // Two pods want disk-0 on node-0: one entry with two pods, the rest with one.
  const second = podOn(0, 'node-0');
  if (second.type !== 'PodUpserted') throw new Error('a pod event');
  const twin = {
    ...second.pod,
    metadata: { ...second.pod.metadata, name: 'twin', uid: 'uid-twin' },
  };
  append(world, { ...second, pod: twin });
  settle(world);
  const named = (uid: string) => {
    const p = world.pods.get(UniquePodName(uid))!.pod.metadata;
    return [uid, { namespace: p.namespace ?? 'default', name: p.name }] as const;
  };
  const former = formerWorld(world);
  const oldDsw = new Map(
    [...former.dsw].map(([key, entry]) => [
      key,
      { ...entry, pods: new Map([...valuesOf(entry.pods as string)].map(named)) },
    ]),
  );
  const old = serialize({ v8: process.versions.v8, world: { ...former, dsw: oldDsw } });
  const decoded = codec.decode(old, 3);
  assert.ok(decoded !== undefined, 'decodes');
  assert.ok(isDeepStrictEqual(withoutDirty(decoded), withoutDirty(world)), 'the same world');
  const both = [...decoded.pairs.values()].find((e) => e.pods instanceof Set);
  assert.deepEqual(both?.pods === undefined ? [] : [...valuesOf(both.pods)].sort(), [
    'uid-0',
    'uid-twin',
  ]);
});

test('sliced snapshot: desired attachments written without their key are read', () => {
  const world = controllerWorld(20);
  const former = formerWorld(world);
  const keyless = new Map([...former.dsw].map(([key, { key: _key, ...entry }]) => [key, entry]));
  const decoded = codec.decode(encodeFormer({ ...former, dsw: keyless }), 4);
  assert.ok(decoded !== undefined, 'decodes');
  assert.ok(isDeepStrictEqual(withoutDirty(decoded), withoutDirty(world)), 'the same world');
});

test('sliced snapshot: a format-4 snapshot (desire and attachment in two maps) is read as one record a pair', async () => {
  const world = controllerWorld(sliceEntries + 20);
  // Pairs of each kind: desired and attached (most), attached and no longer desired (a pod
  // gone, its detach not planned yet), desired and not attached yet (a new pod).
  append(world, { type: 'PodRemoved', tsMs: 1, uid: 'uid-3' });
  for (const event of diskObjects('disk-new')) append(world, event);
  const p = pod('uid-new', [claim('disk-new')]);
  append(world, {
    type: 'PodUpserted',
    tsMs: 1,
    pod: { ...p, spec: { ...p.spec, nodeName: 'node-2' } },
  });
  const kinds = (w: ControllerWorld) =>
    [...w.pairs.values()].map((e) => `${isDesired(e)}/${isAttached(e)}`);
  assert.deepEqual(
    new Set(kinds(world)),
    new Set(['true/true', 'false/true', 'true/false']),
    'each kind of pair',
  );
  const data = encodeFormer(formerWorld(world));
  assert.equal(codec.decode(data, 5), undefined, 'not read as format 5');
  for (const decoded of [codec.decode(data, 4), await codec.decodeSliced(data, 4)]) {
    assert.ok(decoded !== undefined, 'decodes');
    assert.ok(isDeepStrictEqual(withoutDirty(decoded), withoutDirty(world)), 'the same world');
    assert.ok(!('dsw' in decoded) && !('attachments' in decoded), 'no former map kept');
    assert.deepEqual(decoded.nodesByVolume, world.nodesByVolume, 'the indexes built again');
    assert.deepEqual(decoded.volumesByNode, world.volumesByNode);
    for (const record of decoded.pods.values()) {
      const spec = volumesOf(record.volumes)[0]!;
      const pair = decoded.pairs.get(`${spec.volume}@${record.node}`);
      assert.equal(pair?.desiredSpec, spec, `${spec.volume}: one spec, read back shared`);
      if (record.uid !== 'uid-new') assert.equal(pair?.attachedSpec, spec);
      assert.equal(pair?.device, startingDevice, `${spec.volume}: device shared`);
    }
  }
});

test('sliced snapshot: attachments written with a state of their own are read as one record', () => {
  const world = controllerWorld(20);
  const stateful = new Map(
    [...allAttachments(world)].map((a) => [
      `${a.volume}@${a.node}`,
      {
        volume: a.volume,
        node: a.node,
        pluginName: a.attachedSpec.traits.pluginName,
        spec: a.attachedSpec,
        state: attachmentState(a),
        detachRequestedAtMs: a.detachRequestedAtMs,
        seq: a.seq,
      },
    ]),
  );
  const old = serialize({
    v8: process.versions.v8,
    world: { ...formerWorld(world), attachments: stateful },
  });
  const decoded = codec.decode(old, 3);
  assert.ok(decoded !== undefined, 'decodes');
  assert.ok(isDeepStrictEqual(withoutDirty(decoded), withoutDirty(world)), 'the same world');
  assert.equal([...allAttachments(decoded)].length, 20);
  for (const a of allAttachments(decoded))
    assert.equal(a.device, startingDevice, `${a.volume}: the starting device fields, shared`);
});

/** `controllerWorld(20)` with a 21st pod whose attach has started, not finished. */
function worldWithOneRunning(): ControllerWorld {
  const world = controllerWorld(20);
  for (const event of diskObjects('disk-20')) append(world, event);
  append(world, podOn(20, 'node-0'));
  const volumes = world.dirty;
  world.dirty = new Set();
  const [op] = controllerCore.plan(world, 0, { volumes }).operations;
  assert.ok(op !== undefined, "the 21st pod's attach is planned");
  const opId = `op-${world.seq + 1}`;
  append(world, { type: 'OperationStarted', tsMs: 0, opId, ...controllerCore.decision(op) });
  return world;
}

test('sliced snapshot: specs written flat (their traits in themselves) are read with the traits shared', () => {
  const world = worldWithOneRunning();
  const old = worldWithOneRunning();
  assert.equal(old.running.size, 1, 'an operation under way holds a spec too');
  // 21 specs, each held by a pod record and its pair (one running).
  assert.equal(flattenSpecs(old), 21);
  for (const [data, format] of [
    [serialize({ v8: process.versions.v8, world: formerWorld(old) }), 3],
    [encodeFormer(formerWorld(old)), 4],
    [codec.encode(old), codec.format],
  ] as const) {
    const decoded = codec.decode(data, format);
    assert.ok(decoded !== undefined, `format ${format} decodes`);
    assert.equal(flatSpecCount(decoded), 0, 'no spec is left flat');
    assert.ok(isDeepStrictEqual(withoutDirty(decoded), withoutDirty(world)), 'the same world');
    const traits = volumesOf(world.pods.values().next().value!.volumes)[0]!.traits;
    for (const record of decoded.pods.values()) {
      const spec = volumesOf(record.volumes)[0]!;
      const key = `${spec.volume}@${record.node}`;
      assert.equal(spec.traits, traits, `${key}: the traits are the live world's`);
      const pair = decoded.pairs.get(key);
      assert.equal(pair?.desiredSpec, spec, `${key}: the desired spec is the pod's`);
      if (key.includes('disk-20')) continue; // attaching: no attachment yet
      assert.equal(pair?.attachedSpec, spec, `${key}: the attachment's too`);
    }
    const [running] = decoded.running.values();
    assert.equal(running?.spec?.traits, traits, "the running operation's spec too");
  }
});

test('sliced snapshot: the world read back folds on as the world written', async () => {
  const world = controllerWorld(sliceEntries + 100);
  const decoded = await codec.decodeSliced(codec.encode(world), codec.format);
  assert.ok(decoded !== undefined, 'decodes');
  const plans = [world, decoded].map((w) => {
    const planned: string[] = [];
    // Pods go (their disks wait for the node to stop using them), then new pods come.
    for (let i = 0; i < 40; i++) append(w, { type: 'PodRemoved', tsMs: 1, uid: `uid-${i * 7}` });
    // Each node reports none of its volumes in use any more.
    for (let n = 0; n < 10; n++) append(w, { type: 'ObjectUpserted', tsMs: 1, object: node(n) });
    planned.push(...settle(w));
    for (let i = 0; i < 40; i++) {
      for (const event of diskObjects(`disk-${10_000 + i}`)) append(w, event);
      append(w, podOn(10_000 + i, `node-${i % 10}`));
    }
    planned.push(...settle(w));
    return planned;
  });
  const detaches = plans[0]!.filter((op) => op.startsWith('detach')).length;
  assert.equal(detaches, 40, "the removed pods' disks detached");
  assert.equal(plans[0]!.length, 80, "and the new pods' attached");
  assert.deepEqual(plans[1], plans[0], 'the same operations planned');
  assert.ok(isDeepStrictEqual(withoutDirty(decoded), withoutDirty(world)), 'the same world after');
});

test('sliced snapshot: the world read back takes no more heap than the world written', async () => {
  // A first, small read compiles the revivers and fills the module caches a read keeps
  // (code and feedback the measured read would otherwise be charged for).
  assert.ok(
    (await codec.decodeSliced(codec.encode(controllerWorld(50)), codec.format)) !== undefined,
  );
  const pods = 5_000;
  const empty = heapUsedAfterGc();
  let world: ControllerWorld | undefined = controllerWorld(pods);
  const written = heapUsedAfterGc() - empty;
  const data = codec.encode(world);
  world = undefined;
  const before = heapUsedAfterGc();
  const decoded = await codec.decodeSliced(data, codec.format);
  const read = heapUsedAfterGc() - before;
  assert.equal(decoded?.pods.size, pods);
  // Read back as the deserializer builds it, the world took 1.75x (a string per occurrence,
  // every object with a property array of its own); rebuilt, 0.93-0.97x of what was
  // written. The bound leaves room for the collector's noise, not for a lost rebuild.
  assert.ok(
    read <= written * 1.15,
    `read back ${Math.round(read / pods)} bytes a pod, written ${Math.round(written / pods)}`,
  );
});
