/**
 * The real kube-scheduler beside vole. Pods carry no spec.nodeName: the scheduler's
 * VolumeBinding plugin picks the node of a WaitForFirstConsumer claim (the
 * volume.kubernetes.io/selected-node annotation, written by kube-scheduler), Kubernetes'
 * external-provisioner provisions through `vole csi-driver` on that node's topology, and
 * the scheduler binds the pod, which `vole run --kubeconfig` mounts. vole's controller
 * (`vole controller --controllers attachdetach,persistentvolume-binder`) plays the
 * scheduler's part only for a consumer that is already on a node while its claim has no
 * selected node, which only a pod that bypassed the scheduler can be: here it selects
 * nothing. A claim whose class allows a topology no node has gets the scheduler's reason on
 * the pod (FailedScheduling), and no node is selected for it.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import type { AgentProcess } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { useKubeCluster, kubeTestSkipReason } from '../support/kube.js';

const node = 'sched-node';
const driver = 'disk.csi.vole.dev';
const topologyKey = 'topology.disk.csi.vole.dev/node';
const selectedNode = 'volume.kubernetes.io/selected-node';
const skip = kubeTestSkipReason();

interface ManagedField {
  manager: string;
  fieldsV1?: { 'f:metadata'?: { 'f:annotations'?: Record<string, unknown> } };
}
interface Claim {
  metadata: { annotations?: Record<string, string>; managedFields?: ManagedField[] };
  spec: { volumeName?: string };
  status: { phase: string };
}
interface Pod {
  spec: { nodeName?: string };
  status: { phase: string };
}
interface Events {
  items: {
    reason: string;
    message: string;
    source?: { component?: string };
    /** events.k8s.io Events (the scheduler's) name their component here. */
    reportingComponent?: string;
  }[];
}

const manifests = `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: late}
provisioner: ${driver}
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: nowhere}
provisioner: ${driver}
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
  - matchLabelExpressions: [{key: ${topologyKey}, values: [no-such-disk-id]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  storageClassName: late
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 64Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: placed, namespace: default}
spec:
  containers: [{name: app, image: busybox, volumeMounts: [{name: data, mountPath: /data}]}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: stranded, namespace: default}
spec:
  storageClassName: nowhere
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 64Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: unplaceable, namespace: default}
spec:
  containers: [{name: app, image: busybox, volumeMounts: [{name: data, mountPath: /data}]}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: stranded}}]
`;

const component = (e: Events['items'][number]) => e.reportingComponent || e.source?.component || '';

/** Who wrote the claim's selected-node annotation (its managedFields entry). */
function selectedNodeWriters(claim: Claim): string[] {
  return (claim.metadata.managedFields ?? [])
    .filter((f) => f.fieldsV1?.['f:metadata']?.['f:annotations']?.[`f:${selectedNode}`])
    .map((f) => f.manager);
}

describe('the real scheduler places WaitForFirstConsumer pods', { skip, timeout: 600_000 }, () => {
  const cluster = useKubeCluster([
    'kube-controller-manager',
    'kube-scheduler',
    'csi-attacher',
    'csi-provisioner',
  ]);
  const { base, root } = skip === false ? hostSandbox('kubesched') : { base: '', root: '' };
  const { ok, json, wait } = cluster;
  let agent: AgentProcess | undefined;

  before(() =>
    cluster.start(base, {
      // The node lifecycle controller stays: it lifts the not-ready taint the API server
      // puts on a new Node once vole's Ready condition is posted, or nothing is scheduled.
      controllers: '*,-persistentvolume-binder-controller,-attachdetach',
      scheduler: true,
    }),
  );

  test('the scheduler selects the node, the provisioner follows it, vole mounts', async () => {
    const socket = cluster.startCsiDriver(base, root, 'sched-disk-id');
    cluster.startSidecar('csi-attacher', socket, base);
    cluster.startSidecar('csi-provisioner', socket, base);
    agent = await cluster.startAgent(node, root);
    await cluster.startController(base, 'attachdetach,persistentvolume-binder');
    await cluster.defaultServiceAccount();
    ok(['apply', '-f', '-'], manifests);

    const claim = await wait('the claim bound', () => {
      const c = json<Claim>(['get', 'pvc', 'data', '--show-managed-fields']);
      return c.status.phase === 'Bound' ? c : undefined;
    });
    assert.equal(claim.metadata.annotations?.[selectedNode], node);
    assert.deepEqual(selectedNodeWriters(claim), ['kube-scheduler']);
    const pod = await wait('the pod bound to the node', () => {
      const p = json<Pod>(['get', 'pod', 'placed']);
      return p.spec.nodeName === undefined ? undefined : p;
    });
    assert.equal(pod.spec.nodeName, node);
    await agent.line(/pod default\/placed: mounted \[data /, 120_000);

    // No node has the class's topology: the scheduler says so on the pod; nobody guesses.
    const events = await wait('the scheduler to explain', () => {
      const e = json<Events>([
        ...['get', 'events', '--field-selector'],
        'involvedObject.kind=Pod,involvedObject.name=unplaceable',
      ]);
      return e.items.some((i) => i.reason === 'FailedScheduling') ? e : undefined;
    });
    const failed = events.items.find((i) => i.reason === 'FailedScheduling')!;
    assert.equal(component(failed), 'default-scheduler');
    assert.match(failed.message, /0\/1 nodes are available/);
    assert.deepEqual(
      events.items.filter((i) => component(i) !== 'default-scheduler'),
      [],
      'no other component writes its own reason on the pod',
    );
    const stranded = json<Claim>(['get', 'pvc', 'stranded']);
    assert.equal(stranded.status.phase, 'Pending');
    assert.equal(stranded.metadata.annotations?.[selectedNode], undefined);
    assert.equal(json<Pod>(['get', 'pod', 'unplaceable']).spec.nodeName, undefined);
  });
});
