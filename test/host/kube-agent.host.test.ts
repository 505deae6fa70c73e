/**
 * `vole run --kubeconfig` as a node of a real kube-apiserver (scripts/kube-up.sh: etcd and
 * kube-apiserver built from the Go module proxy, on loopback), running with the node's
 * own identity (system:node:vole-node, deploy/node-identity.md) and nothing more.
 * kubectl applies a pod with an emptyDir, a configMap, a static PV claim on the built-in
 * disk (and the projected service-account token the API server adds to every pod): vole
 * mounts them, reports volumesInUse, keeps its CSINode (with the driver's topology keys,
 * also Node labels), keeps its Lease in kube-node-lease renewed and its Ready condition,
 * logs its claim and volume, writes Events; deleting the pod unmounts everything and vole
 * removes it.
 * The test plays the PersistentVolume controller (it marks the claim Bound) and the
 * root-CA publisher (kube-root-ca.crt): no kube-controller-manager runs.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { listLoops } from '../../src/host/loop.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { type AgentProcess, startVole, vole } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { eventually as waitFor, useKubeCluster, kubeTestSkipReason } from '../support/kube.js';

const node = 'vole-node';

const skip = kubeTestSkipReason();

describe('vole run --kubeconfig on a real kube-apiserver', { skip }, () => {
  const cluster = useKubeCluster([]);
  const { base, root } = skip === false ? hostSandbox('kube') : { base: '', root: '' };
  const db = join(base, 'vole.db');
  const { kubectl, ok, json } = cluster;
  let agent: AgentProcess | undefined;
  let driver: AgentProcess | undefined;
  const started = (p: AgentProcess) => (cluster.processes.add(p), p);
  const eventually = <T>(what: string, probe: () => T | undefined, timeoutMs = 60_000) =>
    waitFor(what, probe, { timeoutMs, context: () => agent?.lines.join('\n') ?? '' });
  const volumesInUse = () =>
    json<{ status?: { volumesInUse?: string[] } }>(['get', 'node', node]).status?.volumesInUse ??
    [];

  before(() => cluster.start(base));

  const leastPrivilegeKubeconfig = () => cluster.agentKubeconfig(node);

  test('the agent mounts a pod from the API, reports it, unmounts it when deleted', async () => {
    const agentKubeconfig = leastPrivilegeKubeconfig();
    // The node's own identity: what the Node authorizer gives a kubelet, nothing cluster-wide.
    const canI = (verb: string, resource: string, ...more: string[]) =>
      // "yes", or "no" (the Node authorizer adds " - " and its reason).
      kubectl(['auth', 'can-i', verb, resource, ...more], {
        kubeconfig: agentKubeconfig,
      }).stdout.split(/\s/)[0];
    assert.equal(canI('get', `nodes/${node}`), 'yes', 'its own Node');
    assert.equal(canI('get', 'nodes/other-node'), 'no', "another node's Node");
    assert.equal(canI('list', 'secrets'), 'no', 'no list of Secrets');
    assert.equal(canI('list', 'persistentvolumeclaims'), 'no', 'no list of claims');
    assert.equal(canI('list', 'persistentvolumes'), 'no', 'no list of volumes');
    assert.equal(canI('list', 'storageclasses.storage.k8s.io'), 'no', 'no StorageClass');
    assert.equal(canI('update', 'secrets'), 'no', 'the agent must not write secrets');
    assert.equal(canI('delete', 'nodes'), 'no', 'the agent must not delete nodes');
    assert.equal(
      canI('update', `leases.coordination.k8s.io/${node}`, '-n', 'kube-node-lease'),
      'yes',
      'its heartbeat Lease',
    );
    assert.equal(
      canI('update', 'leases.coordination.k8s.io/other', '-n', 'kube-system'),
      'no',
      'no Lease of another name',
    );

    // No kube-controller-manager: the test makes what its controllers would.
    ok(['create', 'serviceaccount', 'default']);
    ok([
      'create',
      'configmap',
      'kube-root-ca.crt',
      `--from-file=ca.crt=${join(cluster.dir(), 'pki/ca.crt')}`,
    ]);
    ok(['apply', '-f', '-'], objectsYaml);
    ok(['patch', 'pvc', 'data', '--subresource=status', '--type=merge', '-p', boundClaimStatus]);

    // vole's CSI driver registers the kubelet way, through <root>/plugins_registry.
    mkdirSync(join(base, 'csi'), { recursive: true });
    driver = started(
      startVole([
        'csi-driver',
        '--endpoint',
        `unix://${join(base, 'csi/disk.sock')}`,
        '--node-id',
        'disk-id-1',
        '--state-dir',
        join(base, 'csi-state'),
        '--registration-dir',
        join(root, 'plugins_registry'),
        '--max-volumes-per-node',
        '8',
      ]),
    );
    const agentArgs = ['run', '--kubeconfig', agentKubeconfig, '--node', node, '--root', root];
    const startAgent = () =>
      started(startVole([...agentArgs, '--db', db, '--no-controller-attach-detach']));
    agent = startAgent();
    await agent.line(/vole agent on vole-node: API https:\/\/127\.0\.0\.1:\d+/);
    const csiNode = json<{ metadata: { ownerReferences: { kind: string }[] } }>([
      'get',
      'csinode',
      node,
    ]);
    assert.equal(
      csiNode.metadata.ownerReferences[0]?.kind,
      'Node',
      'the CSINode is owned by its Node',
    );
    const nodeObject = json<{ metadata: { annotations?: Record<string, string> } }>([
      'get',
      'node',
      node,
    ]);
    assert.equal(
      nodeObject.metadata.annotations?.['volumes.kubernetes.io/controller-managed-attach-detach'],
      undefined,
    );

    type CsiNode = {
      spec: { drivers: { name: string; nodeID: string; allocatable?: { count: number } }[] | null };
    };
    const registered = await eventually('the CSI driver in the CSINode', () =>
      json<CsiNode>(['get', 'csinode', node]).spec.drivers?.find(
        (d) => d.name === 'disk.csi.vole.dev',
      ),
    );
    assert.deepEqual(registered, {
      name: 'disk.csi.vole.dev',
      nodeID: 'disk-id-1',
      topologyKeys: ['topology.disk.csi.vole.dev/node'],
      allocatable: { count: 8 },
    });
    type NodeMeta = {
      metadata: { annotations: Record<string, string>; labels: Record<string, string> };
      status: { conditions?: { type: string; status: string; reason: string }[] };
    };
    const registeredNode = json<NodeMeta>(['get', 'node', node]);
    const ids = registeredNode.metadata.annotations['csi.volume.kubernetes.io/nodeid'];
    assert.deepEqual(JSON.parse(ids ?? '{}'), { 'disk.csi.vole.dev': 'disk-id-1' });
    assert.equal(
      registeredNode.metadata.labels['topology.disk.csi.vole.dev/node'],
      'disk-id-1',
      "the driver's topology segment is a Node label",
    );
    const ready = registeredNode.status.conditions?.find((c) => c.type === 'Ready');
    assert.deepEqual(ready && { status: ready.status, reason: ready.reason }, {
      status: 'True',
      reason: 'VoleReady',
    });
    // The heartbeat: a Lease in kube-node-lease, held by the Node and renewed.
    type Lease = {
      spec: { holderIdentity: string; leaseDurationSeconds: number; renewTime: string };
    };
    const lease = json<Lease>(['-n', 'kube-node-lease', 'get', 'lease', node]);
    assert.equal(lease.spec.holderIdentity, node);
    assert.equal(lease.spec.leaseDurationSeconds, 40);

    ok(['apply', '-f', '-'], podYaml('app', 'app-config'));
    const uid = ok(['get', 'pod', 'app', '-o', 'jsonpath={.metadata.uid}']).trim();
    await agent.line(/pod default\/app: mounted \[/, 90_000);
    const volumes = join(root, 'pods', uid, 'volumes');
    assert.equal(
      readFileSync(join(volumes, 'kubernetes.io~configmap/config/greeting'), 'utf8'),
      'hello from the API',
    );
    const mounts = mountsUnder(await readMountTable(), join(root, 'pods', uid));
    assert.ok(
      mounts.some((m) => m.mountPoint.endsWith('/disk.vole.dev/data-pv')),
      'the disk is mounted in the pod',
    );

    // The kube-api-access volume's token: a TokenRequest bound to this pod.
    const access = ok(['get', 'pod', 'app', '-o', 'jsonpath={.spec.volumes[3].name}']).trim();
    const token = readFileSync(join(volumes, 'kubernetes.io~projected', access, 'token'), 'utf8');
    const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'));
    assert.equal(claims['kubernetes.io'].pod.uid, uid, 'the token is bound to the pod');
    assert.ok(existsSync(join(volumes, 'kubernetes.io~projected', access, 'ca.crt')));

    await eventually('volumesInUse to list the disk', () =>
      volumesInUse().includes('disk.vole.dev/data-disk') ? true : undefined,
    );

    // A pod whose ConfigMap does not exist: FailedMount, from the kubelet, in kubectl get events.
    ok(['apply', '-f', '-'], podYaml('broken', 'no-such-config', false));
    const failed = await eventually('a FailedMount Event', () => {
      const out = ok([
        'get',
        'events',
        '--field-selector',
        'involvedObject.name=broken',
        '-o',
        'json',
      ]);
      const items = (
        JSON.parse(out) as {
          items: { reason: string; message: string; source: { component: string } }[];
        }
      ).items;
      return items.find((e) => e.reason === 'FailedMount');
    });
    assert.equal(failed.source.component, 'kubelet');
    assert.match(
      failed.message,
      /^MountVolume\.SetUp failed for volume "config" : configmap "no-such-config" not found/,
    );
    assert.match(ok(['get', 'events']), /FailedMount\s+pod\/broken/);

    // kubectl delete waits until the pod is gone: vole removes it once its volumes are.
    // Restarted after `broken` was deleted for good while it was down: the list drops it.
    const brokenUid = ok(['get', 'pod', 'broken', '-o', 'jsonpath={.metadata.uid}']).trim();
    const brokenDir = join(root, 'pods', brokenUid);
    assert.ok(mountsUnder(await readMountTable(), brokenDir).length > 0, 'broken has mounts');
    assert.equal(await agent.stop(), 143);
    ok(['delete', 'pod', 'broken', '--grace-period=0', '--force']);
    agent = startAgent();
    await agent.line(/pod [-0-9a-f]+: removed, tearing down/);
    await waitFor('the deleted pod to be torn down', async () =>
      mountsUnder(await readMountTable(), brokenDir).length === 0 ? true : undefined,
    );
    assert.ok(existsSync(join(volumes, 'kubernetes.io~configmap/config/greeting')), 'app stays');

    ok(['delete', 'pod', 'app', '--timeout=60s']);
    // The pod's own volumes are gone before it is; the disk's device follows (then detach).
    assert.deepEqual(
      mountsUnder(await readMountTable(), join(root, 'pods')),
      [],
      'no pod volume stays',
    );
    await eventually('volumesInUse to drop the disk', () =>
      volumesInUse().length === 0 ? true : undefined,
    );
    for (let i = 0; (await listLoops()).some((l) => l.backFile.startsWith(root)); i++) {
      assert.ok(i < 300, 'the loop device is detached');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.deepEqual(mountsUnder(await readMountTable(), root), [], 'nothing stays mounted');

    await eventually(
      'the node Lease renewed',
      () => {
        const now = json<Lease>(['-n', 'kube-node-lease', 'get', 'lease', node]);
        return now.spec.renewTime > lease.spec.renewTime ? true : undefined;
      },
      30_000,
    );

    // The driver goes: its registration socket is removed, and so is its CSINode entry.
    await driver.stop();
    driver = undefined;
    await eventually('the CSINode to drop the driver', () =>
      (json<CsiNode>(['get', 'csinode', node]).spec.drivers ?? []).length === 0 ? true : undefined,
    );
    assert.equal(await agent.stop(), 143);
    const agentLines = agent.lines.join('\n');
    agent = undefined;
    // Every input is in the log as the API server gave it: the pod with its resourceVersion.
    const exported = vole('export', '--db', db);
    assert.equal(exported.status, 0, exported.stderr);
    const events = exported.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const podEvents = events.filter((e) => e.type === 'PodUpserted' && e.pod.metadata.uid === uid);
    assert.ok(podEvents.length >= 2, 'the pod as created and as deleted');
    assert.ok(podEvents.every((e) => /^\d+$/.test(e.pod.metadata.resourceVersion)));
    for (const kind of ['PersistentVolume', 'PersistentVolumeClaim'])
      assert.ok(
        events.some((e) => e.type === 'ObjectUpserted' && e.object.kind === kind),
        `a ${kind} from the API is in the log:\n${agentLines}`,
      );
    assert.ok(
      !events.some((e) => e.type === 'ObjectUpserted' && e.object.kind === 'StorageClass'),
      'a node reads no StorageClass (the Node authorizer gives it none)',
    );
    assert.ok(
      !exported.stdout.includes('hello from the API'),
      'ConfigMap data stays out of the log',
    );
  });
});

const objectsYaml = `
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: manual}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config, namespace: default}
data: {greeting: hello from the API}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: data-pv}
spec:
  capacity: {storage: 64Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  claimRef: {name: data, namespace: default}
  csi: {driver: disk.vole.dev, volumeHandle: data-disk, fsType: ext4}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  volumeName: data-pv
  resources: {requests: {storage: 64Mi}}
`;

const boundClaimStatus = JSON.stringify({
  status: { phase: 'Bound', capacity: { storage: '64Mi' }, accessModes: ['ReadWriteOnce'] },
});

function podYaml(name: string, configMap: string, withClaim = true): string {
  return `
apiVersion: v1
kind: Pod
metadata: {name: ${name}, namespace: default}
spec:
  nodeName: ${node}
  containers:
  - name: app
    image: registry.k8s.io/pause
    volumeMounts:
    - {name: scratch, mountPath: /scratch}
    - {name: config, mountPath: /config}
${withClaim ? '    - {name: data, mountPath: /data}' : ''}
  volumes:
  - {name: scratch, emptyDir: {}}
  - {name: config, configMap: {name: ${configMap}}}
${withClaim ? '  - {name: data, persistentVolumeClaim: {claimName: data}}' : ''}
`;
}
