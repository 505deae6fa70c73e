/**
 * `vole controller --kubeconfig` in place of kube-controller-manager's attach/detach
 * controller, on a real kube-apiserver (scripts/kube-up.sh), with Kubernetes' own
 * external-attacher (csi-attacher) calling ControllerPublish/Unpublish of `vole
 * csi-driver` (the loop disk: real loop devices), beside kube-controller-manager with
 * `--controllers=*,-attachdetach,-nodelifecycle`. The test plays the kubelet (it makes the
 * Node and CSINode with the controller-managed annotation and writes its volumesInUse); the
 * claims are pre-bound. Checked: the VolumeAttachment named and shaped as
 * Kubernetes' CSI attacher makes it, attached by the external-attacher, listed in the
 * Node's status.volumesAttached; a second node's pod gets the Multi-Attach Event; no
 * VolumeAttachment for a driver with attachRequired: false; the detach waits for
 * volumesInUse to drop the volume; two replicas: the leader SIGKILLed mid-attach, the
 * other takes over within the lease duration + 1 s and finishes the attach.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { volumeAttachmentName } from '../../src/kube/attachments.js';
import { sandboxIn, startDriver, stop } from '../csi/support.js';
import { type AgentProcess, startVole } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { eventually as eventuallyIn, kubeTestSkipReason, useKubeCluster } from '../support/kube.js';

const driverName = 'disk.csi.vole.dev';
const leaseDurationS = 4;
const skip = kubeTestSkipReason();

interface Va {
  metadata: { name: string; deletionTimestamp?: string };
  spec: { attacher: string; nodeName: string; source: { persistentVolumeName?: string } };
  status?: { attached?: boolean };
}

describe('vole controller --kubeconfig with the external-attacher', { skip }, () => {
  // Registered before the sandbox's hook: the processes and the control plane end first.
  const cluster = useKubeCluster(['kube-controller-manager', 'csi-attacher']);
  let driver: ChildProcess | undefined;
  after(async () => {
    if (driver !== undefined) await stop(driver);
  });
  const { base } = skip === false ? hostSandbox('kubectrl') : { base: '' };
  const controllers: AgentProcess[] = [];
  let attacher: AgentProcess | undefined;
  /** A token of kube-system/vole-attach-detach, bound to deploy/'s roles only. */
  let controllerKubeconfig = '';
  const kubectl = (args: readonly string[], input?: string) => cluster.ok(args, input);
  const apply = (...objects: object[]) =>
    kubectl(
      ['apply', '-f', '-'],
      JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }),
    );
  const { json } = cluster;
  const eventually = <T>(what: string, probe: () => T | undefined, timeoutMs = 60_000) =>
    eventuallyIn(what, probe, {
      timeoutMs,
      context: () => controllers.map((c) => c.lines.join('\n')).join('\n--\n'),
    });
  const vas = () => json<{ items: Va[] }>(['get', 'volumeattachments']).items;
  const nodeStatus = (node: string) =>
    json<{ status?: { volumesAttached?: { name: string; devicePath: string }[] } }>([
      'get',
      'node',
      node,
    ]).status ?? {};
  const setInUse = (node: string, volumes: string[]) =>
    kubectl([
      'patch',
      'node',
      node,
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({ status: { volumesInUse: volumes } }),
    ]);
  const startController = (identity: string, extra: string[] = []) => {
    const c = startVole([
      'controller',
      ...extra,
      '--kubeconfig',
      controllerKubeconfig,
      '--root',
      join(base, identity),
      '--identity',
      identity,
      '--lease-duration',
      `${leaseDurationS}s`,
    ]);
    controllers.push(c);
    cluster.processes.add(c);
    return c;
  };

  function leastPrivilegeKubeconfig(): void {
    controllerKubeconfig = cluster.controllerKubeconfig(join(base, 'controller.kubeconfig'));
    const canI = (...args: string[]) =>
      cluster
        .kubectl(['auth', 'can-i', ...args], { kubeconfig: controllerKubeconfig })
        .stdout.trim();
    assert.equal(canI('create', 'volumeattachments'), 'yes');
    assert.equal(canI('patch', 'nodes', '--subresource=status'), 'yes');
    assert.equal(canI('create', 'pods'), 'no', 'the controller must not create pods');
    assert.equal(
      canI('patch', 'nodes'),
      'no',
      'the controller must not change Nodes but their status',
    );
    assert.equal(canI('update', 'leases/vole-attach-detach', '-n', 'kube-system'), 'yes');
    assert.equal(canI('update', 'leases/kube-controller-manager', '-n', 'kube-system'), 'no');
  }

  before(async () => {
    // Kubernetes' controllers but its attach/detach one (vole's) and the node lifecycle one
    // (no kubelet heartbeats here).
    cluster.start(base, { controllers: '*,-attachdetach,-nodelifecycle' });
    const sandbox = sandboxIn(base, 'driver');
    driver = await startDriver(sandbox);
    attacher = cluster.startSidecar('csi-attacher', sandbox.socket, base, ['--timeout=30s']);
    // kube-controller-manager makes it too; apply does not mind which comes first.
    apply({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default' } });
    leastPrivilegeKubeconfig();
    apply(
      ...node('vole-node-1'),
      ...node('vole-node-2'),
      {
        apiVersion: 'storage.k8s.io/v1',
        kind: 'CSIDriver',
        metadata: { name: driverName },
        spec: { attachRequired: true },
      },
      {
        apiVersion: 'storage.k8s.io/v1',
        kind: 'CSIDriver',
        metadata: { name: 'noattach.csi.vole.dev' },
        spec: { attachRequired: false },
      },
      ...claimAndVolume('data', driverName, 'vol-1'),
      ...claimAndVolume('data2', driverName, 'vol-2'),
      ...claimAndVolume('plain', 'noattach.csi.vole.dev', 'vol-3'),
    );
    for (const claim of ['data', 'data2', 'plain'])
      kubectl(['patch', 'pvc', claim, '--subresource=status', '--type=merge', '-p', boundStatus]);
  });

  test('attach by VolumeAttachment, volumesAttached, Multi-Attach, safe detach', async () => {
    const c = startController('replica-a');
    await c.line(/leading: CSI drivers/);
    apply(pod('one', 'vole-node-1', 'data'), pod('plain', 'vole-node-1', 'plain'));
    const name = volumeAttachmentName('vol-1', driverName, 'vole-node-1');
    const va = await eventually('the VolumeAttachment attached by the external-attacher', () =>
      vas().find((v) => v.metadata.name === name && v.status?.attached === true),
    );
    assert.deepEqual(va.spec, {
      attacher: driverName,
      nodeName: 'vole-node-1',
      source: { persistentVolumeName: 'data-pv' },
    });
    const unique = `kubernetes.io/csi/${driverName}^vol-1`;
    await eventually('volumesAttached on the Node', () =>
      nodeStatus('vole-node-1').volumesAttached?.find((v) => v.name === unique),
    );
    assert.deepEqual(nodeStatus('vole-node-1').volumesAttached, [{ name: unique, devicePath: '' }]);
    assert.equal(vas().length, 1, 'attachRequired: false makes no VolumeAttachment');

    // A PV of a driver not seen before (no CSIDriver: attachable): the engine starts again
    // with it, and goes on from its log (the Multi-Attach below needs the attachment).
    apply(...claimAndVolume('late', 'late.csi.vole.dev', 'vol-4').slice(0, 1));
    await c.line(/CSI drivers now \[.*late\.csi\.vole\.dev=true.*\]: starting the engine again/);
    await c.line(/leading: CSI drivers \[.*late\.csi\.vole\.dev=true/);

    // Another node's pod on the same ReadWriteOnce claim: refused, said on the pod.
    apply(pod('two', 'vole-node-2', 'data'));
    const event = await eventually('the Multi-Attach Event', () =>
      json<{ items: { reason: string; message: string; involvedObject: { name: string } }[] }>([
        'get',
        'events',
      ]).items.find((e) => e.involvedObject.name === 'two' && e.reason === 'FailedAttachVolume'),
    );
    assert.match(
      event.message,
      /^Multi-Attach error for volume "data-pv" Volume is already used by pod\(s\) one/,
    );
    kubectl(['delete', 'pod', 'two', '--grace-period=0', '--force']);

    // The kubelet says the volume is in use; the pod goes: no detach until it stops saying so.
    setInUse('vole-node-1', [unique]);
    kubectl(['delete', 'pod', 'one', '--grace-period=0', '--force']);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    assert.ok(
      vas().some((v) => v.metadata.name === name && v.metadata.deletionTimestamp === undefined),
      'no detach while volumesInUse lists the volume',
    );
    setInUse('vole-node-1', []);
    await eventually('the VolumeAttachment gone', () =>
      vas().some((v) => v.metadata.name === name) ? undefined : true,
    );
    await eventually('volumesAttached emptied', () =>
      (nodeStatus('vole-node-1').volumesAttached ?? []).length === 0 ? true : undefined,
    );
    kubectl(['delete', 'pod', 'plain', '--grace-period=0', '--force']);
    await c.stop();
  });

  test('the leader SIGKILLed mid-attach: the other replica takes over and finishes', async () => {
    const a = startController('replica-b');
    await a.line(/leading: CSI drivers/);
    const b = startController('replica-c');
    await b.line(/standby: replica-b holds the Lease/);
    const name = volumeAttachmentName('vol-2', driverName, 'vole-node-2');
    // The attacher is stopped: the attach cannot finish while replica-a leads.
    await attacher!.stop();
    apply(pod('three', 'vole-node-2', 'data2'));
    await eventually('the VolumeAttachment created by replica-a', () =>
      vas().find((v) => v.metadata.name === name),
    );
    const killedMs = Date.now();
    process.kill(a.child.pid!, 'SIGKILL');
    await b.line(/leading: took the Lease/, (leaseDurationS + 5) * 1000);
    const tookOverMs = Date.now() - killedMs;
    assert.ok(
      tookOverMs <= (leaseDurationS + 1) * 1000,
      `took over after ${tookOverMs} ms (lease ${leaseDurationS} s)`,
    );
    const socket = join(base, 'driver', 'csi.sock');
    attacher = cluster.startSidecar('csi-attacher', socket, base, ['--timeout=30s']);
    const unique = `kubernetes.io/csi/${driverName}^vol-2`;
    await eventually('volumesAttached written by replica-b', () =>
      nodeStatus('vole-node-2').volumesAttached?.find((v) => v.name === unique),
    );
    assert.equal(vas().find((v) => v.metadata.name === name)?.status?.attached, true);
    kubectl(['delete', 'pod', 'three', '--grace-period=0', '--force']);
    await eventually('the VolumeAttachment gone after the pod', () =>
      vas().some((v) => v.metadata.name === name) ? undefined : true,
    );
    await b.stop();
  });

  test('a not Ready node still using the volume: forced detach after maxWaitForUnmount', async () => {
    const c = startController('replica-d', ['--max-wait-for-unmount', '3s']);
    await c.line(/leading: CSI drivers/);
    const unique = `kubernetes.io/csi/${driverName}^vol-1`;
    apply(pod('four', 'vole-node-1', 'data'));
    await eventually('volumesAttached on the Node', () =>
      nodeStatus('vole-node-1').volumesAttached?.find((v) => v.name === unique),
    );
    setInUse('vole-node-1', [unique]); // the node (no Ready condition: unhealthy) never unmounts
    const deletedMs = Date.now();
    kubectl(['delete', 'pod', 'four', '--grace-period=0', '--force']);
    const name = volumeAttachmentName('vol-1', driverName, 'vole-node-1');
    await eventually('the forced detach', () =>
      vas().some((v) => v.metadata.name === name) ? undefined : true,
    );
    assert.ok(Date.now() - deletedMs >= 3000, 'not before maxWaitForUnmount');
    await c.line(
      /forced detach of kubernetes\.io\/csi\/disk\.csi\.vole\.dev\^vol-1 from vole-node-1: timeout/,
    );
    setInUse('vole-node-1', []);

    // Fencing: the Lease taken from under the leader; it stops and writes nothing more.
    const renewTime = new Date().toISOString().replace(/Z$/, '000Z');
    kubectl([
      '-n',
      'kube-system',
      'patch',
      'lease',
      'vole-attach-detach',
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { holderIdentity: 'intruder', renewTime, leaseDurationSeconds: 60 } }),
    ]);
    apply(pod('five', 'vole-node-1', 'data'));
    assert.equal(await c.exited, 3, 'exits as a replica that lost its Lease');
    // Either it saw the intruder's name, or its next renewal was refused because the Lease
    // had been modified under it (409): both are the Lease taken.
    assert.ok(
      c.lines.some((l) => /leadership lost: .*(intruder|renewal refused: .* 409 )/.test(l)),
      c.lines.join('\n'),
    );
    await new Promise((resolve) => setTimeout(resolve, 2000));
    assert.equal(vas().length, 0, 'no VolumeAttachment written without the Lease');
    kubectl(['delete', 'pod', 'five', '--grace-period=0', '--force']);
  });
});

/** The Node and CSINode the kubelet would register (the driver answers as node-1). */
function node(name: string): object[] {
  const csiNode = {
    apiVersion: 'storage.k8s.io/v1',
    kind: 'CSINode',
    metadata: { name },
    spec: { drivers: [{ name: driverName, nodeID: 'node-1', topologyKeys: null }] },
  };
  return [
    csiNode,
    {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name,
        annotations: {
          'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
          'csi.volume.kubernetes.io/nodeid': JSON.stringify({ [driverName]: 'node-1' }),
        },
      },
    },
  ];
}

function claimAndVolume(claim: string, driver: string, handle: string): object[] {
  return [
    {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: `${claim}-pv` },
      spec: {
        capacity: { storage: '64Mi' },
        accessModes: ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: 'Retain',
        claimRef: { name: claim, namespace: 'default' },
        csi: { driver, volumeHandle: handle, volumeAttributes: { size: '64Mi' } },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: claim, namespace: 'default' },
      spec: {
        accessModes: ['ReadWriteOnce'],
        resources: { requests: { storage: '64Mi' } },
        volumeName: `${claim}-pv`,
        storageClassName: '',
      },
    },
  ];
}

const boundStatus = JSON.stringify({
  status: { phase: 'Bound', capacity: { storage: '64Mi' }, accessModes: ['ReadWriteOnce'] },
});

function pod(name: string, nodeName: string, claim: string): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default' },
    spec: {
      nodeName,
      automountServiceAccountToken: false,
      containers: [
        { name: 'c', image: 'busybox', volumeMounts: [{ name: 'v', mountPath: '/data' }] },
      ],
      volumes: [{ name: 'v', persistentVolumeClaim: { claimName: claim } }],
    },
  };
}
