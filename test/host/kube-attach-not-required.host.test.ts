/**
 * A CSI driver whose CSIDriver object says `attachRequired: false`: vole mounts its
 * volumes without any VolumeAttachment, as the kubelet does. `vole csi-driver
 * --node-attach` (no PUBLISH_UNPUBLISH_VOLUME: the node puts the disk on a loop device at
 * NodeStageVolume) serves it; Kubernetes' external-provisioner provisions; `vole controller
 * --kubeconfig --controllers attachdetach,persistentvolume-binder` binds, and attaches
 * nothing; no external-attacher runs at all. `vole run --kubeconfig` stages and publishes
 * the volume into the pod from the CSIDriver object alone (the node's fold resolves the
 * volume as not attachable). Pod and claim deleted: unmounted, off its loop device, the
 * disk and PV deleted.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { listLoops } from '../../src/host/loop.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { type AgentProcess, startVole } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { csiDiskImages, useKubeCluster, kubeTestSkipReason } from '../support/kube.js';

const node = 'direct-node';
const driver = 'disk.csi.vole.dev';

const skip = kubeTestSkipReason();

interface Claim {
  spec: { volumeName?: string };
  status: { phase: string };
}
interface NodeObject {
  status?: { volumesAttached?: { name: string }[] };
}

describe('a CSIDriver with attachRequired: false', { skip, timeout: 600_000 }, () => {
  // Registered before the sandbox's hook: the processes and the control plane end first.
  const cluster = useKubeCluster(['kube-controller-manager', 'csi-provisioner']);
  const { base, root } = skip === false ? hostSandbox('kubedirect') : { base: '', root: '' };
  const { ok, json } = cluster;
  let agent: AgentProcess | undefined;
  let controller: AgentProcess | undefined;
  const { wait } = cluster;
  const images = () => csiDiskImages(base);
  const attachments = () => ok(['get', 'volumeattachments', '-o', 'name']).trim();

  before(() =>
    cluster.start(base, {
      controllers: '*,-persistentvolume-binder-controller,-attachdetach,-nodelifecycle',
    }),
  );

  test('vole mounts the volume without a VolumeAttachment', async () => {
    ok(['apply', '-f', '-'], csiDriver);
    const socket = cluster.startCsiDriver(base, root, 'direct-disk-id', ['--node-attach']);
    cluster.startSidecar('csi-provisioner', socket, base);
    agent = await cluster.startAgent(node, root);
    controller = cluster.started(
      startVole([
        'controller',
        '--kubeconfig',
        cluster.controllerKubeconfig(join(base, 'controller.kubeconfig')),
        '--controllers',
        'attachdetach,persistentvolume-binder',
        '--root',
        join(base, 'controller'),
        '--identity',
        'c1',
        '--lease-duration',
        '4s',
      ]),
      'controller',
    );
    await controller.line(/leading: CSI drivers \[disk\.csi\.vole\.dev=false\]/);
    await cluster.defaultServiceAccount();
    ok(['apply', '-f', '-'], manifests);

    const claim = await wait('the claim bound', () => {
      const c = json<Claim>(['get', 'pvc', 'direct']);
      return c.status.phase === 'Bound' ? c : undefined;
    });
    const pv = claim.spec.volumeName!;
    await agent.line(/pod default\/app: mounted \[/, 120_000);
    const uid = ok(['get', 'pod', 'app', '-o', 'jsonpath={.metadata.uid}']).trim();
    const mounts = mountsUnder(await readMountTable(), join(root, 'pods', uid));
    assert.ok(
      mounts.some((m) => m.mountPoint.endsWith('/kubernetes.io~csi/direct/mount')),
      `the volume is published into the pod:\n${mounts.map((m) => m.mountPoint).join('\n')}`,
    );
    assert.equal(attachments(), '', 'no VolumeAttachment was made');
    const status = json<NodeObject>(['get', 'node', node]).status ?? {};
    assert.equal(status.volumesAttached, undefined, 'the controller attached nothing');
    const onLoop = async () =>
      (await listLoops()).some((l) => l.backFile.startsWith(base)) ? true : undefined;
    assert.equal(await onLoop(), true, 'NodeStageVolume put the disk on a loop device');

    ok(['delete', 'pod', 'app', '--timeout=60s']);
    ok(['delete', 'pvc', 'direct', '--timeout=60s']);
    await wait(`the PV ${pv} to go`, () =>
      cluster.kubectl(['get', 'pv', pv]).status === 0 ? undefined : true,
    );
    assert.deepEqual(images(), [], 'DeleteVolume removed the disk');
    assert.equal(await onLoop(), undefined, 'NodeUnstageVolume took it off its loop device');
    assert.deepEqual(mountsUnder(await readMountTable(), root), [], 'nothing stays mounted');
    assert.equal(attachments(), '', 'still no VolumeAttachment');
  });
});

const csiDriver = `
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: ${driver}}
spec: {attachRequired: false}
`;
const manifests = `
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: vole-direct}
provisioner: ${driver}
volumeBindingMode: Immediate
reclaimPolicy: Delete
parameters: {csi.storage.k8s.io/fstype: ext4}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: direct, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: vole-direct
  resources: {requests: {storage: 64Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: app, namespace: default}
spec:
  nodeName: ${node}
  containers:
  - name: app
    image: registry.k8s.io/pause
    volumeMounts: [{name: direct, mountPath: /direct}]
  volumes:
  - {name: direct, persistentVolumeClaim: {claimName: direct}}
`;
