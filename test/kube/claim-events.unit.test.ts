/**
 * The Events on claims that `vole controller --controllers …,persistentvolume-binder`
 * records as Kubernetes' PersistentVolume controller does (src/kube/claim-events.ts): given
 * the leading controller's world, when a claim waits, then the Event upstream's
 * syncUnboundClaim / provisionClaim records for it; none for a bound claim or one a PV fits.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ControllerManager } from '../../src/agent/controller-manager.js';
import { RealClock, VirtualClock } from '../../src/clock.js';
import type { ManifestObject, PersistentVolumeClaim } from '../../src/events/k8s.js';
import { ClaimEvents, claimEventOf } from '../../src/kube/claim-events.js';
import type { KubeEvent } from '../../src/kube/pod-events.js';
import { pendingClaim, storageClass as classOf } from '../support/builders.js';

const settle = async () => {
  for (let i = 0; i < 30; i++) await new Promise<void>((resolve) => setImmediate(resolve));
};
const driver = 'disk.csi.example';
const storageClass = (name: string, mode: 'Immediate' | 'WaitForFirstConsumer') =>
  classOf(name, mode, driver);
const pvc = pendingClaim;
const staticPv = (name: string, storage: string): ManifestObject => ({
  apiVersion: 'v1',
  kind: 'PersistentVolume',
  metadata: { name },
  spec: {
    capacity: { storage },
    accessModes: ['ReadWriteOnce'],
    storageClassName: '',
    hostPath: { path: `/srv/${name}` },
  },
});
const pod = (name: string, claim: string, nodeName?: string) => ({
  metadata: { name, namespace: 'default', uid: `uid-${name}` },
  spec: {
    ...(nodeName === undefined ? {} : { nodeName }),
    volumes: [{ name: 'v', persistentVolumeClaim: { claimName: claim } }],
  },
});

function manager() {
  const cm = ControllerManager.create({
    plugins: [],
    clock: new VirtualClock(0),
    verifyAttachments: false,
    externalProvisioning: true,
  });
  cm.start();
  return cm;
}

const eventOf = (cm: ControllerManager, name: string) => {
  const object = cm.world.objects.get(`PersistentVolumeClaim/default/${name}`);
  assert.equal(object?.kind, 'PersistentVolumeClaim', `claim ${name} in the world`);
  const event = claimEventOf(cm.world, object as PersistentVolumeClaim);
  return event === undefined ? undefined : [event.type, event.reason, event.message];
};

test('claim Events: each waiting claim gets the reason and message the PV controller records', async () => {
  const cm = manager();
  cm.upsertObject(storageClass('fast', 'Immediate'));
  cm.upsertObject(storageClass('late', 'WaitForFirstConsumer'));
  cm.upsertObject(staticPv('small', '2Gi'));
  cm.upsertObject(pvc('classless', '', '10Gi'));
  cm.upsertObject(pvc('fits', '', '1Gi'));
  cm.upsertObject(pvc('missing', 'gone'));
  cm.upsertObject(pvc('wffc', 'late'));
  cm.upsertObject(pvc('unscheduled', 'late'));
  cm.upsertObject(pvc('early', 'fast'));
  cm.upsertPod(pod('app', 'unscheduled'));
  await settle();
  assert.deepEqual(eventOf(cm, 'classless'), [
    'Normal',
    'FailedBinding',
    'no persistent volumes available for this claim and no storage class is set',
  ]);
  assert.equal(eventOf(cm, 'fits'), undefined, 'bound to the 2Gi PV: no Event');
  assert.deepEqual(eventOf(cm, 'missing'), [
    'Warning',
    'ProvisioningFailed',
    'storageclass.storage.k8s.io "gone" not found',
  ]);
  assert.deepEqual(eventOf(cm, 'wffc'), [
    'Normal',
    'WaitForFirstConsumer',
    'waiting for first consumer to be created before binding',
  ]);
  assert.deepEqual(eventOf(cm, 'unscheduled'), [
    'Normal',
    'WaitForPodScheduled',
    'waiting for pod app to be scheduled',
  ]);
  const early = eventOf(cm, 'early');
  assert.deepEqual(early?.slice(0, 2), ['Normal', 'ExternalProvisioning']);
  assert.match(String(early?.[2]), /external provisioner 'disk\.csi\.example' or manually/);
  // Scheduled now: the WaitForFirstConsumer claim is left to the provisioner in turn.
  cm.upsertPod(pod('app', 'unscheduled', 'node-1'));
  await settle();
  assert.equal(eventOf(cm, 'unscheduled')?.[1], 'ExternalProvisioning');
  cm.stop();
});

test('claim Events: recorded at each sync while leading, at once when left to the provisioner', async () => {
  const cm = manager();
  const recorded: KubeEvent[] = [];
  let leading = true;
  const events = new ClaimEvents({
    cm,
    recorder: { record: async (event) => void recorded.push(event) },
    fence: () => (leading ? Promise.resolve() : Promise.reject(new Error('not leading'))),
    say: () => undefined,
    clock: new RealClock(),
    periodMs: 60_000,
  });
  events.start();
  cm.upsertObject(storageClass('fast', 'Immediate'));
  cm.upsertObject(pvc('early', 'fast'));
  await settle();
  assert.deepEqual(
    recorded.map((e) => [e.object.kind, e.object.name, e.object.uid, e.reason]),
    [['PersistentVolumeClaim', 'early', 'uid-early', 'ExternalProvisioning']],
    'written without waiting for the next sync',
  );
  leading = false;
  cm.upsertObject(pvc('later', 'gone'));
  events.sync();
  await settle();
  assert.equal(recorded.length, 1, 'a replica that does not lead writes no Event');
  events.stop();
  cm.stop();
});
