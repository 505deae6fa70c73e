/**
 * The controller's (volume, node) pairs through its fold (src/controller/fold-pairs.ts):
 * one record a pair whose desire and attachment come and go apart — desired before it is
 * attached, attached after no pod wants it, gone when neither — with the indexes, the
 * detach timer and the Multi-Attach report as the two records kept them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { managedAnnotation } from '../../src/controller/index.js';
import { checkControllerVolume } from '../../src/controller/invariants.js';
import {
  attachmentAt,
  type ControllerWorld,
  desiredAt,
  volumesOf,
} from '../../src/controller/types.js';
import { controllerCore } from '../../src/engine/cores.js';
import { valuesOf } from '../../src/desired/one-or-many.js';
import type { NewEvent, VoleEvent } from '../../src/events/index.js';
import type { Node } from '../../src/events/k8s.js';
import { UniquePodName, type UniqueVolumeName } from '../../src/ids.js';
import { claim, controllerStarted, diskObjects, pod } from '../support/builders.js';

function append(world: ControllerWorld, event: NewEvent): void {
  controllerCore.fold(world, { ...event, seq: world.seq + 1 } as VoleEvent);
  for (const v of world.nodesByVolume.keys())
    assert.deepEqual(checkControllerVolume(world, v), [], `invariants after seq ${world.seq}`);
}

/** Plans and carries out the dirty volumes' operations (every call succeeds); their names. */
function settle(world: ControllerWorld, tsMs = 0): string[] {
  const planned: string[] = [];
  while (world.dirty.size > 0) {
    const volumes = world.dirty;
    world.dirty = new Set();
    const plan = controllerCore.plan(world, tsMs, { volumes });
    for (const event of plan.events ?? []) {
      planned.push(event.type);
      append(world, event);
    }
    for (const op of plan.operations) {
      planned.push(`${op.op}@${op.node}`);
      const opId = `op-${world.seq + 1}`;
      const call = op.op === 'provision' ? 'createVolume' : op.op;
      append(world, { type: 'OperationStarted', tsMs, opId, ...controllerCore.decision(op) });
      append(world, { type: 'CallStarted', tsMs, opId, call });
      append(world, { type: 'CallSucceeded', tsMs, opId, call, devicePath: '/dev/x' });
      append(world, { type: 'OperationFinished', tsMs, opId, outcome: 'ok' });
    }
  }
  return planned;
}

function node(name: string, volumesInUse: string[] = []): NewEvent {
  const object: Node = {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, annotations: { [managedAnnotation]: 'true' } },
    status: { conditions: [{ type: 'Ready', status: 'True' }], volumesInUse },
  };
  return { type: 'ObjectUpserted', tsMs: 0, object };
}

function podOn(uid: string, nodeName: string, tsMs = 0): NewEvent {
  const p = pod(uid, [claim('disk-0')]);
  return { type: 'PodUpserted', tsMs, pod: { ...p, spec: { ...p.spec, nodeName } } };
}

/** A controller over node-0 and node-1 with one ReadWriteOnce disk, no pod yet. */
function world(): ControllerWorld {
  const w = controllerCore.initialWorld();
  append(w, controllerStarted);
  for (const event of [node('node-0'), node('node-1'), ...diskObjects('disk-0')]) append(w, event);
  return w;
}

const volumeOf = (w: ControllerWorld, uid: string): UniqueVolumeName =>
  volumesOf(w.pods.get(UniquePodName(uid))!.volumes)[0]!.volume;

test('pairs: desired before attached, attached after no pod wants it, gone when neither', () => {
  const w = world();
  append(w, podOn('uid-a', 'node-0'));
  const volume = volumeOf(w, 'uid-a');
  const key = `${volume}@node-0`;
  assert.equal(w.pairs.size, 1, 'one record for the pair');
  assert.ok(desiredAt(w, key) !== undefined && attachmentAt(w, key) === undefined);
  assert.equal(w.pairs.get(key)!.value, 'detached', 'not attached: the initial state');
  assert.deepEqual([...valuesOf(w.nodesByVolume.get(volume))], ['node-0']);
  assert.equal(w.volumesByNode.get('node-0' as never), undefined, 'nothing attached there');

  assert.deepEqual(settle(w), ['attach@node-0']);
  const attached = w.pairs.get(key)!;
  assert.equal(w.pairs.size, 1, 'still one record: desired and attached');
  assert.ok(attached.value.startsWith('attached') && attached.pods === 'uid-a');
  assert.equal(attached.attachedSpec, attached.desiredSpec, 'one spec, the pod resolved it');
  assert.deepEqual([...w.volumesByNode.get(attached.node)!], [volume]);
  assert.deepEqual([...w.reported.get(attached.node)!], [volume]);

  // The pod goes while its node still uses the volume: the attachment waits, undesired.
  append(w, node('node-0', [volume]));
  append(w, { type: 'PodRemoved', tsMs: 5, uid: 'uid-a' });
  assert.deepEqual(settle(w, 5), [], 'the node still uses it: no detach yet');
  const waiting = w.pairs.get(key)!;
  assert.ok(desiredAt(w, key) === undefined && attachmentAt(w, key) !== undefined);
  assert.equal(waiting.desiredSpec, null);
  assert.equal(waiting.detachRequestedAtMs, 5, 'the detach timer runs from the removal');

  // Wanted again before the detach: desired with its new resolution, attached as it was.
  append(w, podOn('uid-a', 'node-0', 6));
  const again = w.pairs.get(key)!;
  assert.equal(again.attachedSpec, attached.attachedSpec, 'the spec it was attached with');
  assert.notEqual(again.desiredSpec, attached.desiredSpec, "its pod's new resolution");
  assert.equal(again.detachRequestedAtMs, null, 'desired and attached: the timer reset');
  assert.deepEqual(settle(w, 6), [], 'already attached');

  append(w, { type: 'PodRemoved', tsMs: 7, uid: 'uid-a' });
  append(w, node('node-0'));
  assert.deepEqual(settle(w, 7), ['detach@node-0']);
  assert.equal(w.pairs.size, 0, 'neither desired nor attached: the record goes');
  assert.equal(w.nodesByVolume.size, 0);
  assert.equal(w.volumesByNode.size, 0);
});

test('pairs: a Multi-Attach error is reported once a desire, and again for a new one', () => {
  const w = world();
  append(w, podOn('uid-a', 'node-0'));
  settle(w);
  append(w, podOn('uid-b', 'node-1'));
  const volume = volumeOf(w, 'uid-b');
  const key = `${volume}@node-1`;
  assert.deepEqual(settle(w), ['ReportRaised'], 'refused: attached to node-0');
  assert.equal(desiredAt(w, key)?.multiAttachErrorReported, true);
  append(w, node('node-0')); // node-0's volumes planned again
  assert.ok(w.dirty.has(volume));
  assert.deepEqual(settle(w), [], 'reported once');
  append(w, { type: 'PodRemoved', tsMs: 0, uid: 'uid-b' });
  assert.equal(w.pairs.get(key), undefined, 'neither desired nor attached on node-1: gone');
  append(w, podOn('uid-b', 'node-1'));
  assert.equal(desiredAt(w, key)?.multiAttachErrorReported, false, 'a new desire');
  assert.deepEqual(settle(w), ['ReportRaised']);
});
