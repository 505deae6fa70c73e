/**
 * A claim as the controller keeps it (src/controller/claim-record.ts): bound to a known PV,
 * it holds the PV's own name string, so a PV's name is held once; its status is the one
 * shared object of that status.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { keptBytesEach } from '../support/heap.js';
import { claimAsKept } from '../../src/controller/claim-record.js';
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
  const kept = claimAsKept(bound, pvs);
  assert.notEqual(kept, bound, 'rebuilt');
  assert.deepEqual(kept, bound);
  const unknown = claim(count + 1);
  const unknownKept = claimAsKept(unknown, pvs);
  assert.deepEqual(unknownKept, unknown, 'its PV unknown: an equal claim');
  assert.equal(
    unknownKept.kind === 'PersistentVolumeClaim' && unknownKept.spec,
    unknown.kind === 'PersistentVolumeClaim' && unknown.spec,
    'its spec kept',
  );
  const { status: _status, ...statusless } = unknown as ClusterObject & { status?: unknown };
  const bare = statusless as ClusterObject;
  assert.equal(claimAsKept(bare, pvs), bare, 'no status, its PV unknown: the claim itself');
  const pv = pvs.lookup('PersistentVolume', pvName(3))!;
  assert.equal(claimAsKept(pv, pvs), pv, 'a PV: itself');
});

test("claims bound to known PVs do not keep a copy of the PV's name", () => {
  const keptBytes = (known: ClusterObjects) =>
    keptBytesEach(() => Array.from({ length: count }, (_, i) => claimAsKept(claim(i), known)));
  keptBytes(pvs); // a first round grows what the measured ones would be charged for
  const own = keptBytes(new ClusterObjects());
  const shared = keptBytes(pvs);
  // Each claim kept its own copy of its PV's name (232 bytes) before; rounds differ by ~20.
  assert.ok(
    shared <= own - 150,
    `claims with the PV's name shared: ${Math.round(shared)} bytes a claim, with their own: ${Math.round(own)}`,
  );
});

const boundStatus = (i: number) =>
  parsed({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: `claim-${i}`, namespace: 'default' },
    spec: {},
    // As the API server writes a bound claim's status.
    status: { phase: 'Bound', accessModes: ['ReadWriteOnce'], capacity: { storage: '10Gi' } },
  });

test('bound claims hold one shared status, frozen', () => {
  const none = new ClusterObjects();
  const [a, b] = [claimAsKept(boundStatus(1), none), claimAsKept(boundStatus(2), none)];
  assert.ok(a.kind === 'PersistentVolumeClaim' && b.kind === 'PersistentVolumeClaim');
  assert.deepEqual(a, boundStatus(1));
  assert.equal(a.status, b.status, 'one status object for both');
  assert.throws(() => {
    (a.status as { phase: string }).phase = 'Lost';
  }, TypeError);
  const bytes = (keep: (o: ClusterObject) => ClusterObject) =>
    keptBytesEach(() => Array.from({ length: count }, (_, i) => keep(boundStatus(i))));
  bytes((o) => claimAsKept(o, none));
  const own = bytes((o) => o);
  const shared = bytes((o) => claimAsKept(o, none));
  // A status of phase, modes and capacity is ~140 bytes of its own; the claim's copy ~40.
  assert.ok(
    shared <= own - 80,
    `claims with their status shared: ${Math.round(shared)} bytes a claim, with their own: ${Math.round(own)}`,
  );
});
