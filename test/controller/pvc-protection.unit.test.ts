/**
 * pvc-protection through a controller manager: a claim being deleted that holds the
 * kubernetes.io/pvc-protection finalizer stays while a scheduled pod names it, and is
 * released (ClaimFinalizerRemoved, once) when the pod goes — only where this controller is
 * the pvc-protection controller (cluster mode: `pvcProtection`); in Kubernetes mode
 * kube-controller-manager is, and vole decides nothing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ControllerManager } from '../../src/agent/controller-manager.js';
import { pvcProtectionFinalizer } from '../../src/binding/claim-protection.js';
import { VirtualClock } from '../../src/clock.js';
import type { VoleEvent } from '../../src/events/index.js';
import { objectKey, type ManifestObject } from '../../src/events/k8s.js';

const settle = async () => {
  for (let i = 0; i < 30; i++) await new Promise<void>((resolve) => setImmediate(resolve));
};

const claim = (deleting: boolean): ManifestObject => ({
  apiVersion: 'v1',
  kind: 'PersistentVolumeClaim',
  metadata: {
    name: 'data',
    namespace: 'default',
    uid: 'uid-data',
    finalizers: [pvcProtectionFinalizer],
    ...(deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}),
  },
  spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
});

async function run(pvcProtection: boolean) {
  const cm = ControllerManager.create({
    plugins: [],
    clock: new VirtualClock(0),
    verifyAttachments: false,
    pvcProtection,
  });
  const events: VoleEvent[] = [];
  cm.subscribe((event) => void events.push(event));
  cm.start();
  cm.inputs.upsertObject(claim(false));
  cm.inputs.addPod({
    metadata: { name: 'app', namespace: 'default', uid: 'uid-app' },
    spec: {
      nodeName: 'node-1',
      volumes: [{ name: 'v', persistentVolumeClaim: { claimName: 'data' } }],
    },
  });
  await settle();
  cm.inputs.upsertObject(claim(true));
  await settle();
  const whileUsed = events.filter((e) => e.type === 'ClaimFinalizerRemoved').length;
  cm.inputs.removePod('uid-app');
  await settle();
  const released = events.filter((e) => e.type === 'ClaimFinalizerRemoved');
  const held = cm.world.objects.has(objectKey('PersistentVolumeClaim', 'data', 'default'));
  return { whileUsed, released, held };
}

test('pvc-protection (cluster mode): kept while a scheduled pod names the claim, released once it goes', async () => {
  const { whileUsed, released, held } = await run(true);
  assert.equal(whileUsed, 0);
  assert.equal(released.length, 1, 'decided once');
  assert.equal(held, false, 'the claim left the world');
});

test('pvc-protection (Kubernetes mode): kube-controller-manager decides, vole does not', async () => {
  const { released, held } = await run(false);
  assert.equal(released.length, 0);
  assert.equal(held, true, 'the claim stays until the API server deletes it');
});
