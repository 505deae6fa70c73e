/**
 * The PersistentVolume controller's part left to Kubernetes' external-provisioner
 * (src/controller/external-provisioning.ts), through a controller manager: a claim of a
 * class no plugin here provisions is annotated for the provisioner (a WaitForFirstConsumer
 * one once a pod scheduled to a node uses it, that node selected); the PV the provisioner
 * makes pre-bound to it is bound; the claim deleted, its PV is Released and nothing here
 * deletes it; a PV pre-bound without a uid to a claim not made yet stays as it is.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ControllerManager } from '../../src/agent/controller-manager.js';
import { VirtualClock } from '../../src/clock.js';
import type { VoleEvent } from '../../src/events/index.js';
import type { PersistentVolume } from '../../src/events/k8s.js';
import { objectKey } from '../../src/events/k8s.js';
import { controllerClaimViews } from '../../src/controller/provisioning.js';
import { verify } from '../../src/postmortem/index.js';
import { pendingClaim, storageClass as classOf } from '../support/builders.js';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
async function settle() {
  for (let i = 0; i < 30; i++) await turn();
}

const driver = 'disk.csi.example';
const storageClass = (name: string, mode: 'Immediate' | 'WaitForFirstConsumer') =>
  classOf(name, mode, driver);
const pvc = pendingClaim;
const provisionedPv = (claim: string): PersistentVolume => ({
  apiVersion: 'v1',
  kind: 'PersistentVolume',
  metadata: {
    name: `pvc-uid-${claim}`,
    annotations: { 'pv.kubernetes.io/provisioned-by': driver },
  },
  spec: {
    capacity: { storage: '1Gi' },
    accessModes: ['ReadWriteOnce'],
    storageClassName: 'fast',
    persistentVolumeReclaimPolicy: 'Delete',
    csi: { driver, volumeHandle: `pvc-uid-${claim}` },
    claimRef: { name: claim, namespace: 'default', uid: `uid-${claim}` },
  },
  status: { phase: 'Pending' },
});

function manager(externalProvisioning: boolean) {
  const cm = ControllerManager.create({
    plugins: [],
    clock: new VirtualClock(0),
    verifyAttachments: false,
    externalProvisioning,
  });
  const events: VoleEvent[] = [];
  cm.subscribe((event) => void events.push(event));
  cm.start();
  return { cm, events };
}

const of = <T extends VoleEvent['type']>(events: VoleEvent[], type: T) =>
  events.filter((e): e is Extract<VoleEvent, { type: T }> => e.type === type);

test('external provisioning: claims annotated for the provisioner, WaitForFirstConsumer once used', async () => {
  const { cm, events } = manager(true);
  cm.inputs.upsertObject(storageClass('fast', 'Immediate'));
  cm.inputs.upsertObject(storageClass('late', 'WaitForFirstConsumer'));
  cm.inputs.upsertObject(pvc('early', 'fast'));
  cm.inputs.upsertObject(pvc('wait', 'late'));
  await settle();
  const first = of(events, 'ExternalProvisioningRequested');
  assert.deepEqual(
    first.map((e) => [e.claim, e.provisioner, e.selectedNode]),
    [['early', driver, undefined]],
  );
  const early = cm.world.objects.get(objectKey('PersistentVolumeClaim', 'early', 'default'));
  assert.equal(early?.metadata.annotations?.['volume.kubernetes.io/storage-provisioner'], driver);
  assert.equal(
    early?.metadata.annotations?.['volume.beta.kubernetes.io/storage-provisioner'],
    driver,
  );
  // vole why / get pvcs: left to the provisioner, or not yet.
  const views = new Map(controllerClaimViews(cm.world).map((v) => [v.claim, v]));
  assert.equal(views.get('default/early')?.state, 'ExternalProvisioning');
  assert.match(
    views.get('default/early')?.detail ?? '',
    /external provisioner "disk\.csi\.example"/,
  );
  assert.equal(views.get('default/wait')?.state, 'WaitingForProvisioner');
  assert.match(views.get('default/wait')?.detail ?? '', /not yet annotated/);
  // A pod scheduled to node-1 uses the WaitForFirstConsumer claim: node-1 is selected.
  cm.inputs.addPod({
    metadata: { name: 'app', namespace: 'default', uid: 'uid-app' },
    spec: {
      nodeName: 'node-1',
      volumes: [{ name: 'v', persistentVolumeClaim: { claimName: 'wait' } }],
    },
  });
  await settle();
  const all = of(events, 'ExternalProvisioningRequested');
  assert.deepEqual(
    all.map((e) => [e.claim, e.selectedNode]),
    [
      ['early', undefined],
      ['wait', 'node-1'],
    ],
    'each claim is requested once',
  );
  const wait = controllerClaimViews(cm.world).find((v) => v.claim === 'default/wait');
  assert.match(wait?.detail ?? '', /\(selected node node-1\)/);
  assert.deepEqual(verify(events).divergences, []);
  cm.stop();
});

test('external provisioning: the provisioned PV bound, then Released when its claim goes, not deleted here', async () => {
  const { cm, events } = manager(true);
  cm.inputs.upsertObject(storageClass('fast', 'Immediate'));
  cm.inputs.upsertObject(pvc('early', 'fast'));
  // Pre-bound without a uid to a claim not made yet: Available in Kubernetes, not Released.
  const reserved = provisionedPv('later');
  cm.inputs.upsertObject({
    ...reserved,
    metadata: { name: 'reserved' },
    spec: { ...reserved.spec, claimRef: { name: 'later', namespace: 'default' } },
  });
  cm.inputs.upsertObject(provisionedPv('early'));
  await settle();
  assert.deepEqual(
    of(events, 'ClaimBound').map((e) => [e.claim, e.volume]),
    [['early', 'pvc-uid-early']],
  );
  cm.inputs.removeObject({ kind: 'PersistentVolumeClaim', name: 'early', namespace: 'default' });
  await settle();
  assert.deepEqual(
    of(events, 'VolumeReleased').map((e) => e.pv),
    ['pvc-uid-early'],
  );
  const pv = cm.world.objects.get(objectKey('PersistentVolume', 'pvc-uid-early'));
  assert.equal(pv?.kind === 'PersistentVolume' ? pv.status?.phase : undefined, 'Released');
  assert.deepEqual(
    of(events, 'OperationStarted').map((e) => e.op),
    [],
    'the external provisioner deletes it: no DeleteVolume here',
  );
  assert.deepEqual(verify(events).divergences, []);
  cm.stop();
});

test('external provisioning: off (cluster mode), nothing of it is decided', async () => {
  const { cm, events } = manager(false);
  cm.inputs.upsertObject(storageClass('fast', 'Immediate'));
  cm.inputs.upsertObject(pvc('early', 'fast'));
  cm.inputs.upsertObject(provisionedPv('early'));
  await settle();
  cm.inputs.removeObject({ kind: 'PersistentVolumeClaim', name: 'early', namespace: 'default' });
  await settle();
  assert.deepEqual(of(events, 'ExternalProvisioningRequested'), []);
  assert.deepEqual(of(events, 'VolumeReleased'), []);
  cm.stop();
});
