/**
 * Binding as the simulation reports it (docs/scenarios.md "Claims"): `state.bindings` lists every
 * bound claim with its PV; a claim that cannot bind leaves its pod's wait failing with an
 * error that names the claim and says why; the binding is a ClaimBound event in the log,
 * caused by the object change that allowed it.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemorySink } from '../../src/engine/sink.js';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';

const scenario = `
name: bindings and the waits of claims that cannot bind
controllerAttachDetach: false
plugins: [{name: fake.disk, attachable: true}]
objects:
  - {kind: PersistentVolume, metadata: {name: pv-manual}, spec: {storageClassName: manual, capacity: {storage: 10Gi}, accessModes: [ReadWriteOnce], csi: {driver: fake.disk, volumeHandle: manual}}}
  - {kind: PersistentVolume, metadata: {name: pv-spare}, spec: {storageClassName: manual, capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], csi: {driver: fake.disk, volumeHandle: spare}}}
  - {kind: PersistentVolume, metadata: {name: pv-held}, spec: {capacity: {storage: 10Gi}, accessModes: [ReadWriteOnce], claimRef: {name: someone-else, namespace: default}, csi: {driver: fake.disk, volumeHandle: held}}}
  - {kind: PersistentVolumeClaim, metadata: {name: good, namespace: default}, spec: {storageClassName: manual, accessModes: [ReadWriteOnce], resources: {requests: {storage: 3Gi}}}}
  - {kind: PersistentVolumeClaim, metadata: {name: fast, namespace: default}, spec: {storageClassName: fast, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}
  - {kind: PersistentVolumeClaim, metadata: {name: wants-held, namespace: default}, spec: {volumeName: pv-held, accessModes: [ReadWriteOnce]}}
steps:
  - addPod: {metadata: {name: a, uid: uid-good}, spec: {volumes: [{name: data, persistentVolumeClaim: {claimName: good}}]}}
  - addPod: {metadata: {name: b, uid: uid-fast}, spec: {volumes: [{name: data, persistentVolumeClaim: {claimName: fast}}]}}
  - addPod: {metadata: {name: c, uid: uid-held}, spec: {volumes: [{name: data, persistentVolumeClaim: {claimName: wants-held}}]}}
  - waitForPod: {pod: uid-good, timeout: 10s}
  - waitForPod: {pod: uid-fast, timeout: 10s}
  - waitForPod: {pod: uid-held, timeout: 10s}
  - addObject: {kind: PersistentVolume, metadata: {name: pv-fast}, spec: {storageClassName: fast, capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], csi: {driver: fake.disk, volumeHandle: fast}}}
  - waitForPod: {pod: uid-fast, timeout: 10s}
`;

test('simulate: state.bindings, the waits of unbound claims, ClaimBound in the log', async () => {
  const sink = new MemorySink();
  const result = await simulate(parseScenario(scenario), {
    log: { sink, readAll: () => sink.events },
  });
  assert.deepEqual(result.failures, []);
  const waits = result.waits;
  assert.deepEqual(waits[0], { pod: 'uid-good', ok: true });
  assert.equal(waits[1]!.ok, false);
  assert.match(
    waits[1]!.error!,
    /PVC default\/fast is not bound \(it cannot bind: no Available PersistentVolume satisfies it \(PersistentVolume "pv-spare": its storageClassName "manual" is not "fast"\)\)/,
  );
  assert.equal(waits[2]!.ok, false);
  assert.match(
    waits[2]!.error!,
    /PVC default\/wants-held is not bound \(it cannot bind: PersistentVolume "pv-held" is bound to another claim/,
  );
  assert.deepEqual(waits[3], { pod: 'uid-fast', ok: true }, 'a PV that fits, added later, binds');
  assert.deepEqual((result.state as { bindings: unknown }).bindings, [
    { claim: 'default/fast', volume: 'pv-fast' },
    { claim: 'default/good', volume: 'pv-manual' },
  ]);
  const bound = sink.events.filter((e) => e.type === 'ClaimBound');
  assert.deepEqual(
    bound.map((e) => e.type === 'ClaimBound' && `${e.namespace}/${e.claim}->${e.volume}`),
    ['default/good->pv-manual', 'default/fast->pv-fast'],
  );
  const fast = bound[1]!;
  assert.ok(fast.type === 'ClaimBound');
  const cause = sink.events.find((e) => e.seq === fast.cause);
  assert.ok(
    cause?.type === 'ObjectUpserted' && cause.object.metadata.name === 'pv-fast',
    'caused by the new PV',
  );
});

test('simulate: a serviceAccountToken projection fails the wait with "no token issuer"', async () => {
  const file = join(
    import.meta.dirname,
    '../scenarios/projected-service-account-token-refused.yaml',
  );
  const result = await simulate(parseScenario(readFileSync(file, 'utf8'), file));
  assert.deepEqual(result.failures, []);
  assert.equal(result.waits.length, 1);
  assert.equal(result.waits[0]!.ok, false);
  assert.match(
    result.waits[0]!.error!,
    /failed to process volumes=\[token\]: volume "token": serviceAccountToken projection needs a token issuer, and vole has no token issuer/,
  );
});
