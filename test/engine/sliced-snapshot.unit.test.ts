/**
 * The controller's snapshots written in slices (src/engine/snapshot.ts): the same bytes
 * in one call or in slices, the world it started at whatever is folded meanwhile, specs
 * read back shared, the fold's indexes built again, and the event loop turning between
 * slices. The time a slice takes is in the bench (failover rows), not asserted here.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { managedAnnotation } from '../../src/controller/index.js';
import { allAttachments, type ControllerWorld, volumesOf } from '../../src/controller/types.js';
import { startingDevice } from '../../src/controller/attachment-record.js';
import { controllerCore } from '../../src/engine/cores.js';
import { sliceEntries } from '../../src/engine/snapshot.js';
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

test('sliced snapshot: one of another format, or of a former shape under this one, is not read', async () => {
  const world = controllerWorld(20);
  assert.equal(codec.format, 6);
  const data = codec.encode(world);
  assert.ok(codec.decode(data, 6) !== undefined, 'this format is read');
  for (const format of [5, 4, 3]) {
    assert.equal(codec.decode(data, format), undefined, `format ${format} is not read`);
    assert.equal(await codec.decodeSliced(data, format), undefined);
  }
  assert.equal(codec.decode(Buffer.from('not a snapshot'), codec.format), undefined);
  // Worlds written before operator requests, or before the controller provisioned.
  const { operator: _operator, ...noOperator } = world;
  const { provisioning: _provisioning, ...noProvisioning } = world;
  for (const old of [noOperator, noProvisioning])
    assert.equal(codec.decode(codec.encode(old as unknown as ControllerWorld), 6), undefined);
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

test('sliced snapshot: specs read back hold the shared traits; specs written flat are not read', async () => {
  const world = worldWithOneRunning();
  assert.equal(world.running.size, 1, 'an operation under way holds a spec too');
  const decoded = codec.decode(codec.encode(world), codec.format);
  assert.ok(decoded !== undefined, 'decodes');
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
  // 21 specs, each held by a pod record and its pair (one running), made flat.
  const old = worldWithOneRunning();
  assert.equal(flattenSpecs(old), 21);
  const data = codec.encode(old);
  assert.equal(codec.decode(data, codec.format), undefined, 'a flat spec: replay instead');
  assert.equal(await codec.decodeSliced(data, codec.format), undefined);
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
