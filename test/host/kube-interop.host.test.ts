/**
 * Kubernetes' control plane, vole as the node. kube-apiserver runs with
 * kube-controller-manager, all its controllers but the node lifecycle one (no kubelet
 * heartbeats here), so Kubernetes' own attach/detach and PersistentVolume controllers act.
 * Kubernetes' external-attacher (csi-attacher) serves `vole csi-driver`, which registers
 * into vole's plugins_registry/. `vole run --kubeconfig` is the node, in controller-attach
 * mode, with the node's own identity only (system:node:NAME). A static claim on the CSI driver:
 * Kubernetes binds it, its attach/detach controller creates the VolumeAttachment, the
 * external-attacher publishes it, vole mounts it. `kubectl delete pod`: vole unmounts and
 * drops it from volumesInUse, the controller detaches, the VolumeAttachment goes.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { listLoops } from '../../src/host/loop.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { volumeAttachmentName } from '../../src/kube/attachments.js';
import { type AgentProcess, startVole } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { eventually, useKubeCluster, kubeTestSkipReason } from '../support/kube.js';

const node = 'interop-node';
const volume = 'kubernetes.io/csi/disk.csi.vole.dev^interop-1';

const skip = kubeTestSkipReason();

interface NodeStatus {
  status?: { volumesInUse?: string[]; volumesAttached?: { name: string }[] };
}

describe('Kubernetes control plane, vole as the node', { skip, timeout: 600_000 }, () => {
  const cluster = useKubeCluster(['kube-controller-manager', 'csi-attacher']);
  const { base, root } = skip === false ? hostSandbox('interop') : { base: '', root: '' };
  const { ok, json } = cluster;
  let agent: AgentProcess | undefined;
  const started = (p: AgentProcess) => (cluster.processes.add(p), p);
  const nodeStatus = () => json<NodeStatus>(['get', 'node', node]).status ?? {};
  const context = () => agent?.lines.join('\n') ?? '';

  before(() => cluster.start(base, { controllers: '*,-nodelifecycle' }));

  /** csi-attacher as a child process, ended by its PID with the others. */
  test('attached by the controller and the external-attacher, mounted by vole, detached after', async () => {
    const agentKubeconfig = cluster.agentKubeconfig(node);
    const socket = cluster.startCsiDriver(base, root, 'interop-disk-id');
    cluster.startSidecar('csi-attacher', socket, base);
    agent = started(
      startVole(['run', '--kubeconfig', agentKubeconfig, '--node', node, '--root', root]),
    );
    await agent.line(/vole agent on interop-node: API/);
    await agent.line(/CSI driver disk\.csi\.vole\.dev registered/);
    // The controller's service-account controller makes `default` in its own time.
    await cluster.defaultServiceAccount();
    ok(['apply', '-f', '-'], manifests);

    await agent.line(/pod default\/app: mounted \[/, 120_000);
    const pvc = json<{ status: { phase: string } }>(['get', 'pvc', 'data']);
    assert.equal(pvc.status.phase, 'Bound', "Kubernetes' PV controller bound the claim");
    const vaName = volumeAttachmentName('interop-1', 'disk.csi.vole.dev', node);
    const va = json<{ status?: { attached?: boolean } }>(['get', 'volumeattachment', vaName]);
    assert.equal(va.status?.attached, true, 'the external-attacher attached it');
    const status = nodeStatus();
    assert.deepEqual(status.volumesInUse, [volume]);
    assert.deepEqual(
      status.volumesAttached?.map((v) => v.name),
      [volume],
    );
    const uid = ok(['get', 'pod', 'app', '-o', 'jsonpath={.metadata.uid}']).trim();
    const mounts = mountsUnder(await readMountTable(), join(root, 'pods', uid));
    assert.ok(
      mounts.some((m) => m.mountPoint.endsWith('/kubernetes.io~csi/data/mount')),
      `the CSI volume is published into the pod:\n${mounts.map((m) => m.mountPoint).join('\n')}`,
    );
    assert.match(ok(['get', 'events']), /SuccessfulAttachVolume\s+pod\/app/);

    ok(['delete', 'pod', 'app', '--timeout=60s']);
    await eventually(
      'the VolumeAttachment to go',
      () => (cluster.kubectl(['get', 'volumeattachment', vaName]).status === 0 ? undefined : true),
      { context },
    );
    const after = nodeStatus();
    assert.equal(after.volumesInUse, undefined, 'volumesInUse dropped the volume');
    assert.equal(after.volumesAttached, undefined, 'the controller detached it');
    await eventually(
      'the loop device to go',
      async () => ((await listLoops()).some((l) => l.backFile.startsWith(base)) ? undefined : true),
      { context },
    );
    assert.deepEqual(mountsUnder(await readMountTable(), root), [], 'nothing stays mounted');
  });
});

const manifests = `
apiVersion: v1
kind: PersistentVolume
metadata: {name: data-pv}
spec:
  capacity: {storage: 64Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  csi:
    driver: disk.csi.vole.dev
    volumeHandle: interop-1
    fsType: ext4
    volumeAttributes: {size: 64Mi}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  volumeName: data-pv
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
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: data}
`;
