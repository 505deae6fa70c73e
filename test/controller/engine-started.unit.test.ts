/**
 * The controller's EngineStarted (src/controller/fold.ts): pods resolve again only when
 * the plugins changed; with the same plugins their records and desired attachments stand,
 * and every volume of the desired state is touched, so the first plan looks at each.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { managedAnnotation } from '../../src/controller/index.js';
import { allDesired, attachmentAt, type ControllerWorld } from '../../src/controller/types.js';
import { controllerCore } from '../../src/engine/cores.js';
import type { NewEvent, PluginCaps, VoleEvent } from '../../src/events/index.js';
import { NodeName, UniqueVolumeName } from '../../src/ids.js';
import { caps } from '../../src/plugins/types.js';
import { claim, diskObjects, pod } from '../support/builders.js';

const desiredCount = (world: ControllerWorld) => [...allDesired(world)].length;

function append(world: ControllerWorld, event: NewEvent): void {
  controllerCore.fold(world, { ...event, seq: world.seq + 1 } as VoleEvent);
}

function started(plugins: PluginCaps[]): NewEvent {
  return {
    type: 'EngineStarted',
    tsMs: 0,
    node: 'controller',
    controllerAttachDetach: true,
    plugins,
    version: 'test',
    mode: 'controller',
    controller: { maxWaitForUnmountMs: 360_000, disableForceDetachOnTimeout: false },
  };
}

/** Three pods on node-0, each with its disk, folded after an EngineStarted with `plugins`. */
function worldWith(plugins: PluginCaps[]): ControllerWorld {
  const world = controllerCore.initialWorld();
  append(world, started(plugins));
  append(world, {
    type: 'ObjectUpserted',
    tsMs: 0,
    object: {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'node-0', annotations: { [managedAnnotation]: 'true' } },
    },
  });
  for (let i = 0; i < 3; i++) {
    for (const event of diskObjects(`disk-${i}`)) append(world, event);
    const p = pod(`uid-${i}`, [claim(`disk-${i}`)]);
    append(world, {
      type: 'PodUpserted',
      tsMs: 0,
      pod: { ...p, spec: { ...p.spec, nodeName: 'node-0' } },
    });
  }
  world.dirty = new Set();
  return world;
}

const attachable = [caps('fake.disk', { attachable: true })];

test('EngineStarted with the same plugins: records and desired state stand, every desired volume touched', () => {
  const world = worldWith(attachable);
  assert.equal(desiredCount(world), 3);
  const pods = [...world.pods.values()];
  const pairs = structuredClone(world.pairs);
  append(world, started(attachable));
  assert.ok(isDeepStrictEqual(world.pairs, pairs), 'the same desired attachments');
  for (const record of pods) assert.equal(world.pods.get(record.uid), record, 'the record itself');
  const volumes = [...allDesired(world)].map((e) => e.volume).sort();
  assert.deepEqual([...world.dirty].filter((v) => volumes.includes(v)).sort(), volumes);
  for (const v of volumes)
    assert.equal(world.causes.get(v), world.seq, `${v}: caused by the start`);
});

test('EngineStarted with other plugins: every pod resolves again', () => {
  const world = worldWith([caps('fake.disk', { attachable: false })]);
  assert.equal(desiredCount(world), 0, 'not attachable: nothing for the controller');
  append(world, started(attachable));
  assert.equal(desiredCount(world), 3, 'attachable now: each disk desired on node-0');
  append(world, started([caps('fake.disk', { attachable: false })]));
  assert.equal(desiredCount(world), 0, 'and gone again with the plugin that does not attach');
});

test('EngineStarted: a detach cut off before its call leaves its volume attached, and reported again', () => {
  const world = worldWith(attachable);
  const volume = 'fake.disk/disk-0';
  const key = { volume, pod: '', node: '' };
  const reported = () => world.reported.get(NodeName('node-0'))?.has(UniqueVolumeName(volume));
  const opEvents = (opId: string, op: 'attach' | 'detach'): NewEvent[] => [
    { type: 'OperationStarted', tsMs: 0, opId, op, key, volume, node: 'node-0', cause: 1 },
  ];
  for (const event of [
    ...opEvents('op-attach', 'attach'),
    { type: 'CallStarted', tsMs: 0, opId: 'op-attach', call: 'attach' },
    { type: 'CallSucceeded', tsMs: 0, opId: 'op-attach', call: 'attach', devicePath: '/dev/x' },
    { type: 'OperationFinished', tsMs: 0, opId: 'op-attach', outcome: 'ok' },
  ] satisfies NewEvent[])
    append(world, event);
  assert.equal(reported(), true, 'attached: in the node report');
  append(world, { type: 'PodRemoved', tsMs: 0, uid: 'uid-0' });
  for (const event of opEvents('op-detach', 'detach')) append(world, event);
  assert.equal(reported(), false, 'a detach starts: out of the report');
  // The controller stops before the detach's call: no call ran, the disk is attached still.
  append(world, started(attachable));
  assert.equal(world.running.size, 0);
  assert.match(attachmentAt(world, `${volume}@node-0`)?.value ?? 'detached', /^attached/);
  assert.equal(reported(), true, 'the node can read it in volumesAttached again');
  assert.deepEqual(controllerCore.invariants(world, UniqueVolumeName(volume)), []);
});
