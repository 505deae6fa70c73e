import assert from 'node:assert/strict';
import { test } from 'node:test';
import { internKnownStrings } from '../../src/cluster/interned.js';

test('interning well-known strings leaves every value as it was', () => {
  const text = JSON.stringify({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: {
      name: 'a-claim-with-a-long-name',
      finalizers: ['kubernetes.io/pvc-protection'],
      annotations: { 'volume.kubernetes.io/selected-node': 'node-with-a-long-name' },
    },
    spec: {
      accessModes: ['ReadWriteOnce', 'ReadWriteOncePod', 'SomethingElseEntirely'],
      resources: { requests: { storage: '1Gi' } },
      volumeName: null,
      nested: [[{ kind: 'PersistentVolume' }], 3, true, ''],
    },
  });
  const parsed = JSON.parse(text) as unknown;
  assert.equal(internKnownStrings(parsed), parsed, 'interned in place');
  assert.deepEqual(parsed, JSON.parse(text));
  assert.equal(internKnownStrings('ReadWriteOnce'), 'ReadWriteOnce');
  assert.equal(internKnownStrings(null), null);
});

test('PVs with the same access modes share one frozen list; other lists stay their own', () => {
  const pv = (modes: unknown[]) =>
    internKnownStrings(
      JSON.parse(JSON.stringify({ kind: 'PersistentVolume', spec: { accessModes: modes } })) as {
        spec: { accessModes: string[] };
      },
    );
  const a = pv(['ReadWriteOnce']);
  const b = pv(['ReadWriteOnce']);
  assert.equal(a.spec.accessModes, b.spec.accessModes, 'one array for the two PVs');
  assert.ok(Object.isFrozen(a.spec.accessModes));
  assert.deepEqual(a.spec.accessModes, ['ReadWriteOnce']);
  assert.notEqual(pv(['ReadWriteMany']).spec.accessModes, a.spec.accessModes);
  const odd = pv(['ReadWriteOnce', 'NotAMode']);
  assert.notEqual(odd.spec.accessModes, pv(['ReadWriteOnce', 'NotAMode']).spec.accessModes);
  assert.ok(!Object.isFrozen(odd.spec.accessModes));
});
