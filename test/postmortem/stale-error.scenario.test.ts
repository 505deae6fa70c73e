/**
 * A last error is news only while an operation on the volume still fails: once a retry
 * got past it, waits and `vole why` no longer print it (issue: a stale "last error" after
 * a later remount succeeded). Pod a's attach fails once, is retried and mounts; pod b then
 * uses the same volume and waits on a slow setUp: its wait must not blame the old attach.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';

const scenario = `
name: a last error is dropped once a retry succeeds
controllerAttachDetach: false
plugins:
  - name: fake.disk
    attachable: true
    faults:
      attach: [transient]
      setUp: [ok, {delay: 10s}]
objects:
  - {apiVersion: v1, kind: PersistentVolume, metadata: {name: pv-1},
     spec: {accessModes: [ReadWriteMany], csi: {driver: fake.disk, volumeHandle: disk-1}}}
  - {apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: claim-1, namespace: default},
     spec: {volumeName: pv-1}}
steps:
  - addPod: {metadata: {name: a, namespace: default, uid: uid-a},
             spec: {volumes: [{name: data, persistentVolumeClaim: {claimName: claim-1}}]}}
  - advance: 2s
  - expect: {mounts: {uid-a/data: mounted}, counts: {fake.disk: {attach: 2}}}
  - addPod: {metadata: {name: b, namespace: default, uid: uid-b},
             spec: {volumes: [{name: data, persistentVolumeClaim: {claimName: claim-1}}]}}
  - waitForPod: {pod: uid-b, timeout: 2s}
`;

test('why: a last error is not printed after a later retry of the volume succeeded', async () => {
  const result = await simulate(parseScenario(scenario, 'inline.yaml'));
  assert.deepEqual(result.failures, []);
  const wait = result.waits.find((w) => w.pod === 'uid-b');
  assert.ok(wait !== undefined && !wait.ok, 'b still waits on its slow setUp');
  assert.match(wait.error ?? '', /unmounted volumes=\[data\]/);
  assert.doesNotMatch(wait.error ?? '', /last error/, 'the attach failure was overcome');
});
