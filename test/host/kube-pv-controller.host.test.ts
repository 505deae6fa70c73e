/**
 * `vole controller --kubeconfig --controllers attachdetach,persistentvolume-binder` in place
 * of kube-controller-manager's PersistentVolume controller and attach/detach controller
 * (kube-controller-manager runs with
 * `--controllers=*,-persistentvolume-binder-controller,-attachdetach,-nodelifecycle`), with
 * Kubernetes' external-provisioner (csi-provisioner) and external-attacher (csi-attacher)
 * serving `vole csi-driver` (loop disks), and `vole run --kubeconfig` as the node. kubectl
 * applies three StorageClasses (Immediate, WaitForFirstConsumer, and Immediate with
 * reclaimPolicy Retain), a claim of each and a pod on vole's node that uses the first two.
 * vole's binder annotates the claims for the provisioner (and, as no scheduler runs and the
 * pod names its node, selects that node for the WaitForFirstConsumer claim); the
 * provisioner makes each PV pre-bound to its claim; vole binds them; the pod's volumes are
 * attached and mounted. Pod and claims deleted: vole marks the PVs Released (nobody else
 * does: kube-controller-manager's binder is off), so the provisioner deletes the two with
 * reclaimPolicy Delete, their disks and their PVs; the Retain one stays Released.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { listLoops } from '../../src/host/loop.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import type { AgentProcess } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { csiDiskImages, useKubeCluster, kubeTestSkipReason } from '../support/kube.js';

const node = 'pv-node';
const driver = 'disk.csi.vole.dev';

const skip = kubeTestSkipReason();

interface Meta {
  name: string;
  uid?: string;
  annotations?: Record<string, string>;
}
interface Claim {
  metadata: Meta;
  spec: { volumeName?: string };
  status: { phase: string };
}
interface Volume {
  metadata: Meta;
  spec: { claimRef?: { name?: string; uid?: string }; csi?: { volumeHandle?: string } };
  status?: { phase?: string };
}

describe(
  'vole as the PV controller beside the external-provisioner',
  { skip, timeout: 600_000 },
  () => {
    // Registered before the sandbox's hook: the processes and the control plane end first.
    const cluster = useKubeCluster(['kube-controller-manager', 'csi-attacher', 'csi-provisioner']);
    const { base, root } = skip === false ? hostSandbox('kubepv') : { base: '', root: '' };
    const { ok, json } = cluster;
    let agent: AgentProcess | undefined;
    let controller: AgentProcess | undefined;
    const { wait } = cluster;
    const images = () => csiDiskImages(base);
    const claim = (name: string) => json<Claim>(['get', 'pvc', name]);
    const gone = (kind: string, name: string) =>
      cluster.kubectl(['get', kind, name]).status === 0 ? undefined : true;

    before(() =>
      cluster.start(base, {
        controllers: '*,-persistentvolume-binder-controller,-attachdetach,-nodelifecycle',
      }),
    );

    test('provisioned by the external-provisioner, bound and released by vole', async () => {
      const socket = cluster.startCsiDriver(base, root, 'pv-disk-id');
      cluster.startSidecar('csi-attacher', socket, base);
      cluster.startSidecar('csi-provisioner', socket, base);
      agent = await cluster.startAgent(node, root);
      controller = await cluster.startController(base, 'attachdetach,persistentvolume-binder', [
        ...['--lease-duration', '4s'],
      ]);
      await cluster.defaultServiceAccount();
      ok(['apply', '-f', '-'], manifests);

      const bound = (name: string) =>
        wait(`the claim ${name} bound`, () => {
          const c = claim(name);
          return c.status.phase === 'Bound' ? c : undefined;
        });
      const claims = {
        early: await bound('early'),
        late: await bound('late'),
        kept: await bound('kept'),
      };
      for (const [name, c] of Object.entries(claims)) {
        const a = c.metadata.annotations ?? {};
        assert.equal(a['volume.kubernetes.io/storage-provisioner'], driver, name);
        assert.equal(a['volume.beta.kubernetes.io/storage-provisioner'], driver, name);
        assert.equal(a['pv.kubernetes.io/bind-completed'], 'yes', name);
        assert.equal(a['pv.kubernetes.io/bound-by-controller'], 'yes', name);
        const pv = json<Volume>(['get', 'pv', c.spec.volumeName!]);
        assert.equal(pv.metadata.annotations?.['pv.kubernetes.io/provisioned-by'], driver, name);
        assert.equal(
          pv.spec.claimRef?.uid,
          c.metadata.uid,
          `${name}: pre-bound by the provisioner`,
        );
        assert.equal(pv.status?.phase, 'Bound', name);
      }
      // The scheduler's part: the WaitForFirstConsumer claim's node is its pod's.
      assert.equal(claims.late.metadata.annotations?.['volume.kubernetes.io/selected-node'], node);
      assert.equal(
        claims.early.metadata.annotations?.['volume.kubernetes.io/selected-node'],
        undefined,
      );
      assert.equal(images().length, 3, 'CreateVolume made three disks');
      // What `kubectl describe pvc` shows: the PV controller's Event beside the provisioner's.
      const reasons = (claimName: string) =>
        json<{ items: { reason: string; source?: { component?: string } }[] }>([
          'get',
          'events',
          '--field-selector',
          `involvedObject.kind=PersistentVolumeClaim,involvedObject.name=${claimName}`,
        ]).items.map((e) => `${e.source?.component}: ${e.reason}`);
      for (const name of Object.keys(claims))
        assert.ok(
          reasons(name).includes('persistentvolume-controller: ExternalProvisioning'),
          `${name}: ${reasons(name).join(', ')}`,
        );

      await agent.line(/pod default\/app: mounted \[/, 120_000);
      const uid = ok(['get', 'pod', 'app', '-o', 'jsonpath={.metadata.uid}']).trim();
      const mounts = mountsUnder(await readMountTable(), join(root, 'pods', uid)).map(
        (m) => m.mountPoint,
      );
      for (const name of ['early', 'late'])
        assert.ok(
          mounts.some((m) => m.endsWith(`/kubernetes.io~csi/${name}/mount`)),
          `${name} is published into the pod:\n${mounts.join('\n')}`,
        );

      ok(['delete', 'pod', 'app', '--timeout=60s']);
      await wait('every VolumeAttachment to go', () =>
        ok(['get', 'volumeattachments', '-o', 'name']).trim() === '' ? true : undefined,
      );
      ok(['delete', 'pvc', 'early', 'late', 'kept', '--timeout=60s']);
      // Only vole marks PVs Released here; the provisioner deletes a Released PV only.
      for (const name of ['early', 'late'] as const)
        await wait(`the PV ${claims[name].spec.volumeName} to go`, () =>
          gone('pv', claims[name].spec.volumeName!),
        );
      const kept = claims.kept.spec.volumeName!;
      await wait('the Retain PV Released', () =>
        json<Volume>(['get', 'pv', kept]).status?.phase === 'Released' ? true : undefined,
      );
      await new Promise((resolve) => setTimeout(resolve, 3_000)); // the provisioner's next look
      assert.equal(json<Volume>(['get', 'pv', kept]).status?.phase, 'Released', 'Retain stays');
      const handle = json<Volume>(['get', 'pv', kept]).spec.csi?.volumeHandle;
      assert.deepEqual(
        images(),
        [`${handle}.img`],
        'DeleteVolume removed the disks of class Delete',
      );
      await wait('the loop devices to go', async () =>
        (await listLoops()).some((l) => l.backFile.startsWith(base)) ? undefined : true,
      );
      assert.deepEqual(mountsUnder(await readMountTable(), root), [], 'nothing stays mounted');
      // The retained volume is the administrator's to remove: its PV, then its disk.
      ok(['delete', 'pv', kept, '--timeout=60s']);
      for (const image of images()) rmSync(join(base, 'csi-state/images', image));
    });
  },
);

const storageClass = (name: string, mode: string, reclaim: string) => `
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: ${name}}
provisioner: ${driver}
volumeBindingMode: ${mode}
reclaimPolicy: ${reclaim}
parameters: {csi.storage.k8s.io/fstype: ext4}
`;
const pvc = (name: string, className: string) => `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ${name}, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ${className}
  resources: {requests: {storage: 64Mi}}
`;
const manifests = [
  storageClass('vole-immediate', 'Immediate', 'Delete'),
  storageClass('vole-late', 'WaitForFirstConsumer', 'Delete'),
  storageClass('vole-retain', 'Immediate', 'Retain'),
  pvc('early', 'vole-immediate'),
  pvc('late', 'vole-late'),
  pvc('kept', 'vole-retain'),
  `
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
`,
].join('---');
