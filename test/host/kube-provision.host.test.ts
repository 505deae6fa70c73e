/**
 * Kubernetes' control plane and CSI sidecars provision, attach and delete; vole is the node.
 * kube-apiserver and kube-controller-manager with all its controllers (node lifecycle too,
 * quickened: vole's Lease and Ready condition keep its Node untainted while a Node without
 * a heartbeat is tainted unreachable), Kubernetes' external-provisioner
 * (csi-provisioner) and external-attacher (csi-attacher) serving `vole csi-driver`, which
 * provisions (CREATE_DELETE_VOLUME, topology key topology.disk.csi.vole.dev/node) and
 * registers into vole's plugins_registry/. `vole run --kubeconfig` runs with the node's
 * own identity only (system:node:NAME). kubectl applies two StorageClasses (Immediate and
 * WaitForFirstConsumer), a claim of each and a pod on vole's node; the test plays only the
 * scheduler, which a pod with spec.nodeName bypasses (the selected-node annotation).
 * Deleting the pod, then the claims: vole unmounts, the controller detaches, the
 * VolumeAttachments go, DeleteVolume removes the disks; nothing stays.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { listLoops } from '../../src/host/loop.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { volumeAttachmentName } from '../../src/kube/attachments.js';
import type { AgentProcess } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { csiDiskImages, useKubeCluster, kubeTestSkipReason } from '../support/kube.js';

const node = 'provision-node';
const driver = 'disk.csi.vole.dev';
const topologyKey = 'topology.disk.csi.vole.dev/node';

const skip = kubeTestSkipReason();

interface Node {
  metadata: { labels?: Record<string, string> };
  spec: { taints?: { key: string; effect: string }[] };
  status?: { volumesInUse?: string[]; volumesAttached?: { name: string }[] };
}
interface Claim {
  metadata: { annotations?: Record<string, string> };
  spec: { volumeName?: string };
  status: { phase: string };
}
interface Volume {
  metadata: { name: string; annotations?: Record<string, string> };
  spec: {
    csi: { driver: string; volumeHandle: string };
    nodeAffinity?: {
      required: { nodeSelectorTerms: { matchExpressions: { key: string; values: string[] }[] }[] };
    };
  };
}

describe('Kubernetes provisions and attaches, vole mounts', { skip, timeout: 600_000 }, () => {
  const cluster = useKubeCluster(['kube-controller-manager', 'csi-attacher', 'csi-provisioner']);
  const { base, root } = skip === false ? hostSandbox('provision') : { base: '', root: '' };
  const { ok, json } = cluster;
  let agent: AgentProcess | undefined;
  const { wait } = cluster;
  const nodeObject = () => json<Node>(['get', 'node', node]);
  const images = () => csiDiskImages(base);

  // The node lifecycle controller at a quicker pace than its defaults (40 s, 60 s): a Node
  // without a heartbeat is tainted unreachable within 20 s, well inside this test.
  const lifecycleFlags = [
    '--node-monitor-period=2s',
    '--node-monitor-grace-period=20s',
    '--node-startup-grace-period=20s',
  ];
  before(() =>
    cluster.start(base, { controllers: '*', kubeControllerManagerFlags: lifecycleFlags }),
  );

  test('provisioned by the external-provisioner, attached by Kubernetes, mounted', async () => {
    const socket = cluster.startCsiDriver(base, root, 'provision-disk-id');
    cluster.startSidecar('csi-attacher', socket, base);
    cluster.startSidecar('csi-provisioner', socket, base);
    agent = await cluster.startAgent(node, root);
    // A Node nobody keeps alive, younger than vole's: the node lifecycle controller taints
    // it, and would have tainted vole's before it.
    ok(['apply', '-f', '-'], 'apiVersion: v1\nkind: Node\nmetadata: {name: no-heartbeat}\n');
    // Registration: the driver's topology segment is a Node label and a CSINode key.
    await wait('the topology label', () =>
      nodeObject().metadata.labels?.[topologyKey] === 'provision-disk-id' ? true : undefined,
    );
    const csiNode = json<{ spec: { drivers: { name: string; topologyKeys: string[] }[] } }>([
      'get',
      'csinode',
      node,
    ]);
    assert.deepEqual(csiNode.spec.drivers[0]?.topologyKeys, [topologyKey]);
    await cluster.defaultServiceAccount();
    ok(['apply', '-f', '-'], manifests);

    // Immediate: provisioned at once, on the only node that has the driver's topology.
    const early = await wait('the Immediate claim bound', () => {
      const claim = json<Claim>(['get', 'pvc', 'early']);
      return claim.status.phase === 'Bound' ? claim : undefined;
    });
    // WaitForFirstConsumer: a pod with spec.nodeName bypasses the scheduler, so the claim
    // waits (as in Kubernetes) until the scheduler's selected-node annotation names a node.
    assert.equal(json<Claim>(['get', 'pvc', 'late']).status.phase, 'Pending');
    await wait('the PV controller to say the claim waits', () =>
      /WaitForPodScheduled|WaitForFirstConsumer/.test(
        ok(['get', 'events', '--field-selector', 'involvedObject.name=late']),
      )
        ? true
        : undefined,
    );
    ok(['annotate', 'pvc', 'late', `volume.kubernetes.io/selected-node=${node}`]);
    const late = await wait('the WaitForFirstConsumer claim bound', () => {
      const claim = json<Claim>(['get', 'pvc', 'late']);
      return claim.status.phase === 'Bound' ? claim : undefined;
    });
    const pvs = [early, late].map((c) => json<Volume>(['get', 'pv', c.spec.volumeName!]));
    for (const pv of pvs) {
      assert.equal(pv.metadata.annotations?.['pv.kubernetes.io/provisioned-by'], driver);
      const term = pv.spec.nodeAffinity?.required.nodeSelectorTerms[0]?.matchExpressions[0];
      assert.deepEqual(term && { key: term.key, values: term.values }, {
        key: topologyKey,
        values: ['provision-disk-id'],
      });
    }
    assert.equal(images().length, 2, 'CreateVolume made two disks');

    await agent.line(/pod default\/app: mounted \[/, 120_000);
    const volumes = pvs.map((pv) => `kubernetes.io/csi/${driver}^${pv.spec.csi.volumeHandle}`);
    const vaNames = pvs.map((pv) => volumeAttachmentName(pv.spec.csi.volumeHandle, driver, node));
    for (const name of vaNames) {
      const va = json<{ status?: { attached?: boolean } }>(['get', 'volumeattachment', name]);
      assert.equal(va.status?.attached, true, `the external-attacher attached ${name}`);
    }
    const status = nodeObject().status ?? {};
    assert.deepEqual(status.volumesInUse, [...volumes].sort());
    assert.deepEqual(status.volumesAttached?.map((v) => v.name).sort(), [...volumes].sort());
    const uid = ok(['get', 'pod', 'app', '-o', 'jsonpath={.metadata.uid}']).trim();
    const mounts = mountsUnder(await readMountTable(), join(root, 'pods', uid)).map(
      (m) => m.mountPoint,
    );
    for (const claim of ['early', 'late'])
      assert.ok(
        mounts.some((m) => m.endsWith(`/kubernetes.io~csi/${claim}/mount`)),
        `${claim} is published into the pod:\n${mounts.join('\n')}`,
      );

    ok(['delete', 'pod', 'app', '--timeout=60s']);
    for (const name of vaNames)
      await wait(`the VolumeAttachment ${name} to go`, () =>
        cluster.kubectl(['get', 'volumeattachment', name]).status === 0 ? undefined : true,
      );
    const after = nodeObject().status ?? {};
    assert.equal(after.volumesInUse, undefined, 'volumesInUse dropped the volumes');
    assert.equal(after.volumesAttached, undefined, 'the controller detached them');

    // The claims go: the PVs are released, DeleteVolume removes the disks, the PVs go.
    ok(['delete', 'pvc', 'early', 'late', '--timeout=60s']);
    for (const pv of pvs) {
      const { name } = pv.metadata;
      await wait(`the PV ${name} to go`, () =>
        cluster.kubectl(['get', 'pv', name]).status === 0 ? undefined : true,
      );
    }
    assert.deepEqual(images(), [], 'DeleteVolume removed the disks');
    await wait('the loop devices to go', async () =>
      (await listLoops()).some((l) => l.backFile.startsWith(base)) ? undefined : true,
    );
    assert.deepEqual(mountsUnder(await readMountTable(), root), [], 'nothing stays mounted');
    // The node lifecycle controller tainted the Node without a heartbeat, not vole's.
    const taintsOf = (name: string) =>
      (json<Node>(['get', 'node', name]).spec.taints ?? []).map((t) => `${t.key}:${t.effect}`);
    await wait('the Node without a heartbeat tainted unreachable', () =>
      taintsOf('no-heartbeat').includes('node.kubernetes.io/unreachable:NoSchedule')
        ? true
        : undefined,
    );
    await new Promise((resolve) => setTimeout(resolve, 3_000)); // one more monitor pass
    assert.deepEqual(taintsOf(node), [], "vole's Lease and Ready keep its Node untainted");

    // No process stays: the agent, the driver and the sidecars end, and nothing they
    // started outlives them (the control plane ends after the test, by its PIDs).
    for (const p of [...cluster.processes].reverse()) await p.stop();
    cluster.processes.clear();
    assert.deepEqual(processesUnder(base, join(cluster.dir(), '')), [], 'no process stays');
  });
});

/** Processes whose command line names `dir`, except those naming `except` (the control plane). */
function processesUnder(dir: string, except: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
    } catch {
      continue; // gone meanwhile
    }
    if (cmdline.includes(dir) && !cmdline.includes(except)) found.push(`${pid}: ${cmdline}`);
  }
  return found;
}

const manifests = `
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: vole-immediate}
provisioner: ${driver}
volumeBindingMode: Immediate
reclaimPolicy: Delete
parameters: {csi.storage.k8s.io/fstype: ext4}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: vole-late}
provisioner: ${driver}
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
parameters: {csi.storage.k8s.io/fstype: ext4}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: early, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: vole-immediate
  resources: {requests: {storage: 64Mi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: late, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: vole-late
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
    volumeMounts: [{name: early, mountPath: /early}, {name: late, mountPath: /late}]
  volumes:
  - {name: early, persistentVolumeClaim: {claimName: early}}
  - {name: late, persistentVolumeClaim: {claimName: late}}
`;
