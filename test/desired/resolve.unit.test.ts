/**
 * Pod resolution and the object index, as the fold keeps them: duplicated pod volume names,
 * pods sharing a claim (the index holds a bare name for one pod, a Set for several), and
 * re-resolution when a shared object changes.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { NewEvent, VoleEvent } from '../../src/events/index.js';
import { fold, initialWorld } from '../../src/kubelet/index.js';
import { referenceKeys } from '../../src/desired/references.js';
import { resolvePod } from '../../src/desired/resolve.js';
import type { World } from '../../src/kubelet/types.js';
import {
  claim,
  diskObjects,
  emptyDir,
  engineStarted,
  pod,
  podUpserted,
  sourcesReady,
} from '../support/builders.js';

function worldOf(events: NewEvent[]): World {
  const world = initialWorld();
  for (const event of events) fold(world, { ...event, seq: world.seq + 1 } as VoleEvent);
  return world;
}

test('resolve: a duplicated pod volume name resolves once, with its last definition', () => {
  const world = worldOf([engineStarted(), ...diskObjects('d1')]);
  const duplicated = pod('p1', [emptyDir('data'), claim('d1', 'data')]);
  const resolution = resolvePod(duplicated, world);
  assert.deepEqual(
    resolution.volumes.map((v) => v.volume),
    ['fake.disk/d1'],
  );
  assert.match(resolution.errors.get('data') ?? '', /used twice/);
  // The objects it read, as kind and name (the claim in the pod's namespace): the
  // duplicated name reads its claim once.
  assert.deepEqual(resolution.references, [
    'PersistentVolumeClaim',
    'claim-d1',
    'PersistentVolume',
    'pv-d1',
  ]);
  // The controller indexes them by object key.
  assert.deepEqual(referenceKeys(resolution.references, 'default'), [
    'PersistentVolumeClaim/default/claim-d1',
    'PersistentVolume//pv-d1',
  ]);
});

test('resolve: the object index holds one pod by name, several in a Set, and re-resolves them all', () => {
  const world = worldOf([
    engineStarted(),
    sourcesReady,
    ...diskObjects('d1'),
    podUpserted('a', [claim('d1')]),
  ]);
  const claimPods = (w: World) =>
    w.podsByObject.get('PersistentVolumeClaim')?.get('default')?.get('claim-d1');
  assert.equal(claimPods(world), 'a');
  assert.equal(world.podsByObject.get('PersistentVolume')?.get('')?.get('pv-d1'), 'a');
  const more = worldOf([
    engineStarted(),
    sourcesReady,
    ...diskObjects('d1'),
    podUpserted('a', [claim('d1')]),
    podUpserted('b', [claim('d1')]),
    podUpserted('c', [claim('d1')]),
  ]);
  assert.deepEqual([...(claimPods(more) as ReadonlySet<string>)].sort(), ['a', 'b', 'c']);
  // The claim is deleted: pvc-protection keeps it, being deleted, while pods use it; every
  // pod that used it is resolved again and now has an error, and keeps its volume desired
  // while it exists (behaviour K2.6).
  fold(more, {
    type: 'ObjectRemoved',
    tsMs: 0,
    kind: 'PersistentVolumeClaim',
    name: 'claim-d1',
    namespace: 'default',
    seq: more.seq + 1,
  } as VoleEvent);
  for (const uid of ['a', 'b', 'c'])
    assert.match(more.pods.get(uid as never)!.errors.get('data') ?? '', /is being deleted/);
  assert.equal(more.dsw.size, 1);
  // Pods leave: the Set shrinks to a bare name, then the key goes.
  for (const uid of ['b', 'c'])
    fold(more, { type: 'PodRemoved', tsMs: 0, uid, seq: more.seq + 1 } as VoleEvent);
  assert.equal(claimPods(more), 'a');
  fold(more, { type: 'PodRemoved', tsMs: 0, uid: 'a', seq: more.seq + 1 } as VoleEvent);
  // Nothing is left of the index: no empty maps per kind or namespace either.
  assert.equal(more.podsByObject.size, 0);
  assert.equal(more.dsw.size, 0);
});
