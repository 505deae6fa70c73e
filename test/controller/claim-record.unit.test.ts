/**
 * A claim as the controller keeps it (src/controller/claim-record.ts): bound to a known PV,
 * it holds the PV's own name string, so a PV's name is held once.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { keptBytesEach } from '../support/heap.js';
import { withVolumeNameShared } from '../../src/controller/claim-record.js';
import { ClusterObjects } from '../../src/desired/objects.js';
import type { ClusterObject } from '../../src/events/k8s.js';

const count = 5_000;
// Long names (a provisioned PV is `pvc-<uid>`): what is shared stands out of the noise.
const pvName = (i: number) => `pvc-${'0123456789'.repeat(20)}-${i}`;
const parsed = (object: ClusterObject): ClusterObject =>
  JSON.parse(JSON.stringify(object)) as ClusterObject;

function claim(i: number): ClusterObject {
  return parsed({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: `claim-${i}`, namespace: 'default', uid: `u-${i}` },
    spec: { volumeName: pvName(i), accessModes: ['ReadWriteOnce'] },
    status: { phase: 'Bound' },
  });
}

const pvs = ClusterObjects.of(
  Array.from({ length: count }, (_, i) =>
    parsed({
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: pvName(i) },
      spec: { csi: { driver: 'fake.disk', volumeHandle: `disk-${i}` } },
    }),
  ),
);

test('a claim bound to a known PV holds an equal claim; any other object is kept as it is', () => {
  const bound = claim(7);
  const kept = withVolumeNameShared(bound, pvs);
  assert.notEqual(kept, bound, 'rebuilt');
  assert.deepEqual(kept, bound);
  const unknown = claim(count + 1);
  assert.equal(withVolumeNameShared(unknown, pvs), unknown, 'its PV unknown: the claim itself');
  const pv = pvs.lookup('PersistentVolume', pvName(3))!;
  assert.equal(withVolumeNameShared(pv, pvs), pv, 'a PV: itself');
});

test("claims bound to known PVs do not keep a copy of the PV's name", () => {
  const keptBytes = (known: ClusterObjects) =>
    keptBytesEach(() =>
      Array.from({ length: count }, (_, i) => withVolumeNameShared(claim(i), known)),
    );
  keptBytes(pvs); // a first round grows what the measured ones would be charged for
  const own = keptBytes(new ClusterObjects());
  const shared = keptBytes(pvs);
  // Each claim kept its own copy of its PV's name (232 bytes) before; rounds differ by ~20.
  assert.ok(
    shared <= own - 150,
    `claims with the PV's name shared: ${Math.round(shared)} bytes a claim, with their own: ${Math.round(own)}`,
  );
});
