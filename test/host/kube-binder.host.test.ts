/**
 * `vole controller --kubeconfig --controllers attachdetach,persistentvolume-binder` in place
 * of kube-controller-manager's PersistentVolume binder, on a real kube-apiserver
 * (scripts/kube-up.sh) beside kube-controller-manager run with
 * `--controllers=*,-persistentvolume-binder-controller,-attachdetach,-nodelifecycle`.
 * While vole's controller is not running a claim stays Pending (nobody else binds); once
 * it runs, the claim is bound to the smallest PV that fits, written as pv_controller.go
 * bind writes it: the PV's claimRef (uid and resourceVersion) and bound-by-controller
 * annotation, its phase Bound; the claim's volumeName, bound-by-controller and
 * bind-completed annotations, its status (Bound, the PV's access modes and capacity). The
 * controller runs with its least-privilege account (deploy/*-rbac.yaml).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { type AgentProcess, startVole } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { eventually, kubeTestSkipReason, useKubeCluster } from '../support/kube.js';

const skip = kubeTestSkipReason();

interface Meta {
  name: string;
  uid?: string;
  resourceVersion?: string;
  annotations?: Record<string, string>;
}
interface Pvc {
  metadata: Meta;
  spec: { volumeName?: string };
  status?: { phase?: string; accessModes?: string[]; capacity?: Record<string, string> };
}
interface Pv {
  metadata: Meta;
  spec: { claimRef?: Record<string, string> };
  status?: { phase?: string };
}

const pv = (name: string, storage: string) => ({
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
const pvc = (name: string, storageClassName = '', storage = '1Gi') => ({
  apiVersion: 'v1',
  kind: 'PersistentVolumeClaim',
  metadata: { name, namespace: 'default' },
  spec: {
    storageClassName,
    accessModes: ['ReadWriteOnce'],
    resources: { requests: { storage } },
  },
});
const lateClass = {
  apiVersion: 'storage.k8s.io/v1',
  kind: 'StorageClass',
  metadata: { name: 'late' },
  provisioner: 'disk.csi.example',
  volumeBindingMode: 'WaitForFirstConsumer',
};
interface Event {
  reason: string;
  message: string;
  type: string;
  count?: number;
  source?: { component?: string };
  involvedObject: { kind: string; name: string; uid?: string };
}

describe('vole controller --kubeconfig with the persistentvolume-binder', { skip }, () => {
  // Registered before the sandbox's hook: the controller and the control plane end first.
  const cluster = useKubeCluster(['kube-controller-manager']);
  const { base } = skip === false ? hostSandbox('kubebinder') : { base: '' };
  const { ok, json } = cluster;
  let controller: AgentProcess | undefined;
  let controllerKubeconfig = '';
  const apply = (...objects: object[]) =>
    ok(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));
  const get = <T>(...args: string[]): T => json<T>(['get', ...args]);

  before(() => {
    cluster.start(base, {
      controllers: '*,-persistentvolume-binder-controller,-attachdetach,-nodelifecycle',
    });
    controllerKubeconfig = cluster.controllerKubeconfig(join(base, 'controller.kubeconfig'));
  });

  test(
    'a claim no controller binds stays Pending; vole binds it as the PV controller does',
    { timeout: 120_000 },
    async () => {
      apply(pv('pv-big', '5Gi'), pv('pv-small', '2Gi'), pvc('data'));
      await new Promise((resolve) => setTimeout(resolve, 4_000));
      assert.equal(
        get<Pvc>('pvc', 'data').status?.phase,
        'Pending',
        "kube-controller-manager's binder is off: nobody binds it",
      );
      controller = startVole([
        'controller',
        '--kubeconfig',
        controllerKubeconfig,
        '--controllers',
        'attachdetach,persistentvolume-binder',
        '--root',
        join(base, 'c1'),
        '--identity',
        'c1',
        '--lease-duration',
        '4s',
      ]);
      cluster.processes.add(controller);
      const claim = await eventually(
        'the claim bound',
        () => {
          const now = get<Pvc>('pvc', 'data');
          return now.status?.phase === 'Bound' ? now : undefined;
        },
        { context: () => controller?.lines.join('\n') ?? '' },
      );
      assert.equal(claim.spec.volumeName, 'pv-small', 'the smallest PV that fits');
      assert.equal(claim.metadata.annotations?.['pv.kubernetes.io/bind-completed'], 'yes');
      assert.equal(claim.metadata.annotations?.['pv.kubernetes.io/bound-by-controller'], 'yes');
      assert.deepEqual(claim.status?.accessModes, ['ReadWriteOnce']);
      assert.deepEqual(claim.status?.capacity, { storage: '2Gi' });
      const volume = get<Pv>('pv', 'pv-small');
      assert.equal(volume.status?.phase, 'Bound');
      assert.equal(volume.metadata.annotations?.['pv.kubernetes.io/bound-by-controller'], 'yes');
      assert.equal(volume.spec.claimRef?.['uid'], claim.metadata.uid);
      assert.equal(volume.spec.claimRef?.['name'], 'data');
      assert.equal(volume.spec.claimRef?.['kind'], 'PersistentVolumeClaim');
      assert.equal(get<Pv>('pv', 'pv-big').status?.phase, 'Available');
    },
  );

  test(
    'a claim that waits gets the Event the PV controller records',
    { timeout: 120_000 },
    async () => {
      apply(lateClass, pvc('huge', '', '50Gi'), pvc('nowhere', 'gone'), pvc('lazy', 'late'));
      const eventOf = (claim: string) =>
        eventually(`the Event on claim ${claim}`, () => {
          const { items } = get<{ items: Event[] }>(
            'events',
            '--field-selector',
            `involvedObject.kind=PersistentVolumeClaim,involvedObject.name=${claim}`,
          );
          return items[0];
        });
      const huge = await eventOf('huge');
      assert.deepEqual(
        [huge.type, huge.reason, huge.message],
        [
          'Normal',
          'FailedBinding',
          'no persistent volumes available for this claim and no storage class is set',
        ],
      );
      assert.equal(huge.source?.component, 'persistentvolume-controller');
      assert.equal(huge.involvedObject.uid, get<Pvc>('pvc', 'huge').metadata.uid);
      const nowhere = await eventOf('nowhere');
      assert.deepEqual(
        [nowhere.type, nowhere.reason, nowhere.message],
        ['Warning', 'ProvisioningFailed', 'storageclass.storage.k8s.io "gone" not found'],
      );
      const lazy = await eventOf('lazy');
      assert.deepEqual(
        [lazy.reason, lazy.message],
        ['WaitForFirstConsumer', 'waiting for first consumer to be created before binding'],
      );
      for (const name of ['huge', 'nowhere', 'lazy'])
        assert.equal(get<Pvc>('pvc', name).status?.phase, 'Pending', `${name} stays Pending`);
    },
  );
});
