/**
 * The Kubernetes-mode controller's pure parts: which CSI drivers its engine gets (and
 * whether they attach), and when a deleted pod counts as terminated.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { csiDrivers, deletedAndStopped } from '../../src/kube/controller.js';
import type { ApiObject } from '../../src/kube/informer.js';

const object = (kind: string, name: string, rest: object = {}): ApiObject => ({
  kind,
  apiVersion: 'v1',
  metadata: { name },
  ...rest,
});

test('drivers: a CSIDriver decides attachRequired; a PV-only driver attaches', () => {
  const drivers = csiDrivers([
    object('PersistentVolume', 'a', { spec: { csi: { driver: 'plain.csi', volumeHandle: 'h' } } }),
    object('PersistentVolume', 'b', {
      spec: { csi: { driver: 'pv-only.csi', volumeHandle: 'h' } },
    }),
    object('PersistentVolume', 'c', { spec: { hostPath: { path: '/x' } } }),
    object('CSIDriver', 'plain.csi', { spec: { attachRequired: false } }),
    object('CSIDriver', 'default.csi', { spec: {} }),
  ]);
  assert.deepEqual([...drivers].sort(), [
    ['default.csi', true],
    ['plain.csi', false],
    ['pv-only.csi', true],
  ]);
});

test('drivers: the CSIDriver wins whichever comes first', () => {
  const pv = object('PersistentVolume', 'a', { spec: { csi: { driver: 'd', volumeHandle: 'h' } } });
  const driver = object('CSIDriver', 'd', { spec: { attachRequired: false } });
  assert.equal(csiDrivers([pv, driver]).get('d'), false);
  assert.equal(csiDrivers([driver, pv]).get('d'), false);
});

test('a deleted pod is terminated once none of its containers runs', () => {
  const deleting = { deletionTimestamp: '2026-01-01T00:00:00Z' };
  const pod = (metadata: object, status: object) => ({
    ...object('Pod', 'p', { status }),
    metadata: { name: 'p', ...metadata },
  });
  assert.equal(deletedAndStopped(pod({}, {})), false, 'not deleted');
  assert.equal(deletedAndStopped(pod(deleting, {})), true, 'no container status at all');
  const running = { containerStatuses: [{ name: 'c', state: { running: { startedAt: 'x' } } }] };
  assert.equal(deletedAndStopped(pod(deleting, running)), false, 'a container still runs');
  const done = { containerStatuses: [{ name: 'c', state: { terminated: { exitCode: 0 } } }] };
  assert.equal(deletedAndStopped(pod(deleting, done)), true);
});
