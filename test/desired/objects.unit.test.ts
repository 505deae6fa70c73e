/**
 * The world's cluster objects (src/desired/objects.ts): kept per kind and namespace under their
 * own names, read back by objectKey as the Map they replace was, and revived from a snapshot.
 */
import assert from 'node:assert/strict';
import test from 'node:test';
import type { ClusterObject } from '../../src/events/k8s.js';
import { objectKey } from '../../src/events/k8s.js';
import { ClusterObjects } from '../../src/desired/objects.js';

const pv = (name: string): ClusterObject =>
  ({ apiVersion: 'v1', kind: 'PersistentVolume', metadata: { name }, spec: {} }) as ClusterObject;
const pvc = (name: string, namespace?: string): ClusterObject =>
  ({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name, ...(namespace === undefined ? {} : { namespace }) },
    spec: {},
  }) as ClusterObject;

test('objects: kept per kind and namespace, read back by objectKey as a Map would', () => {
  const objects = new ClusterObjects();
  assert.equal(objects.put(pv('pv-1')), undefined);
  objects.put(pvc('data'));
  objects.put(pvc('data', 'other'));
  const replaced = pv('pv-1');
  assert.ok(objects.put(replaced));
  assert.equal(objects.size, 3);
  assert.equal(objects.get(objectKey('PersistentVolume', 'pv-1')), replaced);
  assert.equal(objects.lookup('PersistentVolume', 'pv-1', 'ignored'), replaced);
  // A claim without a namespace is the default namespace's, as objectKey names it.
  const inDefault = objects.lookup('PersistentVolumeClaim', 'data', 'default');
  assert.equal(inDefault?.metadata.namespace, undefined);
  assert.equal(objects.get('PersistentVolumeClaim/other/data')?.metadata.namespace, 'other');
  assert.equal(objects.get('PersistentVolumeClaim/nowhere/data'), undefined);
  assert.equal(objects.get('PersistentVolume/x/pv-1'), undefined, 'cluster-scoped: no namespace');
  assert.equal(objects.get('no-slashes'), undefined);
  assert.deepEqual(
    [...objects.keys()],
    [
      'PersistentVolume//pv-1',
      'PersistentVolumeClaim/default/data',
      'PersistentVolumeClaim/other/data',
    ],
  );
  assert.deepEqual(new Map(objects).size, 3);
  assert.deepEqual([...objects.ofKind('PersistentVolumeClaim')].length, 2);
  assert.equal(objects.remove('PersistentVolumeClaim', 'data', 'other'), true);
  assert.equal(objects.remove('PersistentVolumeClaim', 'data', 'other'), false);
  assert.equal(objects.remove('PersistentVolume', 'pv-1'), true);
  assert.equal(objects.size, 1);
  assert.equal(objects.has('PersistentVolume//pv-1'), false);
});

test('objects: a structured clone revives as the store (what a snapshot keeps)', () => {
  const objects = new ClusterObjects();
  objects.put(pv('pv-1'));
  objects.put(pvc('data'));
  const revived = ClusterObjects.revive(structuredClone(objects));
  assert.ok(revived instanceof ClusterObjects);
  assert.equal(revived.size, 2);
  assert.deepEqual([...revived.keys()], [...objects.keys()]);
  assert.equal(ClusterObjects.revive(new Map()), undefined);
  assert.equal(ClusterObjects.revive(null), undefined);
});
