/**
 * Kubernetes' control plane with two `vole controller --kubeconfig` replicas in place of
 * its attach/detach controller (kube-controller-manager runs `*,-attachdetach`, and
 * `-nodelifecycle`: no kubelet heartbeats here), Kubernetes' external-attacher
 * (csi-attacher) serving `vole csi-driver`, and `vole run --kubeconfig` as the node
 * `vole-node`. A second Node, `kubelet-node`, is played by the test (its Node and CSINode).
 *
 * A ReadWriteOnce claim is attached to vole-node and mounted there; a pod on kubelet-node
 * wants it too (Multi-Attach). With the external-attacher stopped, a second claim's attach
 * is left half done; the leader is SIGKILLed then: the standby takes over within the lease
 * duration + 1 s, learns the old leader's attachments from the VolumeAttachments and the
 * Nodes' volumesAttached before acting (its log is its own, empty), finishes the attach
 * once the external-attacher is back, and moves the first volume to kubelet-node only
 * after vole-node let it go. A watch of its own follows every VolumeAttachment and Node
 * the API server shows during the run: a ReadWriteOnce volume is never attached (nor asked
 * to be) on two nodes at once.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { listLoops } from '../../src/host/loop.js';
import { volumeAttachmentName } from '../../src/kube/attachments.js';
import { KubeHttp } from '../../src/kube/http.js';
import {
  type ApiObject,
  type KubeInformer,
  coreRef,
  startInformer,
  storageRef,
} from '../../src/kube/informer.js';
import { type AgentProcess, startVole } from '../support/agent-process.js';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';
import { eventually, kubeUp, useKubeCluster } from '../support/kube.js';
import { RealClock } from '../../src/clock.js';

const driver = 'disk.csi.vole.dev';
const voleNode = 'vole-node';
/** Sorts before vole-node: a controller that knew nothing would try it first. */
const kubeletNode = 'kubelet-node';
const leaseDurationS = 4;
const unique = (handle: string) => `kubernetes.io/csi/${driver}^${handle}`;

function skipReason(): string | false {
  const host = hostTestSkipReason();
  if (host !== false) return host;
  if (!existsSync(kubeUp)) return 'scripts/kube-up.sh is not here';
  return false;
}
const skip = skipReason();

interface Va {
  metadata: { name: string; deletionTimestamp?: string };
  spec: { nodeName: string; source: { persistentVolumeName?: string } };
  status?: { attached?: boolean };
}

/**
 * Every VolumeAttachment and Node the API server shows, as a watch sees them, one change at
 * a time: after each, no ReadWriteOnce PV may have VolumeAttachments on two nodes, be
 * attached on two, or be listed in two Nodes' volumesAttached.
 */
class TwoNodeWatch {
  readonly violations: string[] = [];
  changes = 0;
  private readonly vas = new Map<string, Va>();
  private readonly attachedOn = new Map<string, string[]>();
  private readonly informers: KubeInformer[] = [];

  start(http: KubeHttp): Promise<void> {
    const clock = new RealClock();
    const say = (line: string) => this.violations.push(`watch trouble: ${line}`);
    this.informers.push(
      startInformer(
        { http: http, clock },
        storageRef('volumeattachments', 'VolumeAttachment'),
        {
          upsert: (o) => this.va(o, false),
          remove: (o) => this.va(o, true),
        },
        say,
      ),
      startInformer(
        { http: http, clock },
        coreRef('nodes', 'Node'),
        { upsert: (o) => this.node(o, false), remove: (o) => this.node(o, true) },
        say,
      ),
    );
    return Promise.all(this.informers.map((i) => i.synced)).then(() => undefined);
  }

  private va(o: ApiObject, gone: boolean): void {
    this.changes++;
    if (gone) this.vas.delete(o.metadata.name);
    else this.vas.set(o.metadata.name, o as unknown as Va);
    const byPv = (attachedOnly: boolean) => {
      const nodes = new Map<string, string[]>();
      for (const va of this.vas.values()) {
        if (attachedOnly && va.status?.attached !== true) continue;
        const pv = va.spec.source.persistentVolumeName ?? '';
        nodes.set(pv, [...(nodes.get(pv) ?? []), va.spec.nodeName]);
      }
      return nodes;
    };
    for (const [what, attachedOnly] of [
      ['VolumeAttachments', false],
      ['attached', true],
    ] as const)
      for (const [pv, nodes] of byPv(attachedOnly))
        if (nodes.length > 1)
          this.violations.push(`${what} of ${pv} on ${nodes.join(' and ')} (${this.changes})`);
  }

  private node(o: ApiObject, gone: boolean): void {
    this.changes++;
    const status = (o.status ?? {}) as { volumesAttached?: { name: string }[] };
    const names = gone ? [] : (status.volumesAttached ?? []).map((v) => v.name);
    this.attachedOn.set(o.metadata.name, names);
    const nodesOf = new Map<string, string[]>();
    for (const [node, volumes] of this.attachedOn)
      for (const v of volumes) nodesOf.set(v, [...(nodesOf.get(v) ?? []), node]);
    for (const [volume, nodes] of nodesOf)
      if (nodes.length > 1)
        this.violations.push(`volumesAttached lists ${volume} on ${nodes.join(' and ')}`);
  }

  async stop(): Promise<void> {
    for (const i of this.informers) await i.stop();
  }
}

describe(
  'two vole controllers in place of Kubernetes attach/detach controller',
  {
    skip,
    timeout: 600_000,
  },
  () => {
    const cluster = useKubeCluster(['kube-controller-manager', 'csi-attacher']);
    const { base, root } = skip === false ? hostSandbox('interop-ctl') : { base: '', root: '' };
    const { ok, json } = cluster;
    const watch = new TwoNodeWatch();
    const started = (p: AgentProcess) => (cluster.processes.add(p), p);
    let attacher: AgentProcess | undefined;
    const replicas: AgentProcess[] = [];
    let agent: AgentProcess | undefined;
    const context = () =>
      [agent, ...replicas].map((p) => p?.lines.slice(-40).join('\n') ?? '').join('\n---\n');
    after(() => watch.stop());

    before(() => cluster.start(base, { controllers: '*,-attachdetach,-nodelifecycle' }));

    const socket = join(base, 'csi/disk.sock');
    /** csi-attacher, stopped and started again by the test (ended by its PID). */
    const startAttacher = () => {
      attacher = cluster.startSidecar('csi-attacher', socket, base, ['--timeout=30s']);
    };
    const stopAttacher = () => attacher!.stop();
    const startReplica = (identity: string) => {
      const p = started(
        startVole([
          'controller',
          '--kubeconfig',
          join(cluster.dir(), 'kubeconfig'),
          '--root',
          join(base, identity),
          '--identity',
          identity,
          '--lease-duration',
          `${leaseDurationS}s`,
        ]),
      );
      replicas.push(p);
      return p;
    };
    const vas = () => json<{ items: Va[] }>(['get', 'volumeattachments']).items;
    const attachedNames = (node: string) =>
      (
        json<{ status?: { volumesAttached?: { name: string }[] } }>(['get', 'node', node]).status
          ?.volumesAttached ?? []
      )
        .map((v) => v.name)
        .sort();
    const multiAttachEvents = () =>
      json<{ items: { reason: string; count?: number; involvedObject: { name: string } }[] }>([
        'get',
        'events',
      ]).items.filter(
        (e) => e.involvedObject.name === 'other' && e.reason === 'FailedAttachVolume',
      );

    test('the leader killed mid-attach: the standby takes over, learns, never attaches twice', async () => {
      cluster.startCsiDriver(base, root, 'interop-disk-id');
      startAttacher();
      const agentKubeconfig = cluster.agentKubeconfig(voleNode);
      agent = started(
        startVole(['run', '--kubeconfig', agentKubeconfig, '--node', voleNode, '--root', root]),
      );
      await agent.line(/CSI driver disk\.csi\.vole\.dev registered/);
      await watch.start(KubeHttp.fromFile(join(cluster.dir(), 'kubeconfig')));
      await cluster.defaultServiceAccount();
      ok(['apply', '-f', '-'], storage);
      const a = startReplica('replica-a');
      await a.line(/leading: CSI drivers/);
      const b = startReplica('replica-b');
      await b.line(/standby: replica-a holds the Lease/);

      // Attached to vole-node and mounted there; kubelet-node's pod is refused meanwhile.
      ok(['apply', '-f', '-'], pod('app', voleNode, 'data'));
      await agent.line(/pod default\/app: mounted \[/, 120_000);
      ok(['apply', '-f', '-'], pod('other', kubeletNode, 'data'));
      await eventually('the Multi-Attach Event', () => multiAttachEvents()[0], { context });

      // The second claim's attach half done (no external-attacher), then the leader dies.
      await stopAttacher();
      ok(['apply', '-f', '-'], pod('app2', voleNode, 'data2'));
      const va2 = volumeAttachmentName('interop-2', driver, voleNode);
      await eventually('the VolumeAttachment made by replica-a', () =>
        vas().find((v) => v.metadata.name === va2),
      );
      const killedMs = Date.now();
      process.kill(a.child.pid!, 'SIGKILL');
      await b.line(/leading: took the Lease/, (leaseDurationS + 5) * 1000);
      const tookOverMs = Date.now() - killedMs;
      console.log(
        `replica-b took over ${tookOverMs} ms after the kill (lease ${leaseDurationS} s)`,
      );
      assert.ok(
        tookOverMs <= (leaseDurationS + 1) * 1000,
        `took over after ${tookOverMs} ms (lease ${leaseDurationS} s)`,
      );
      // It learned both attachments before acting on any pod: app's confirmed (on the Node's
      // volumesAttached), app2's uncertain (a VolumeAttachment not attached yet).
      const found = await b.line(
        /found (\d+) attachment\(s\) on the API server before acting: (.*)/,
      );
      assert.equal(found[1], '2', context());
      assert.equal(
        found[2],
        `${unique('interop-1')} on ${voleNode}, ${unique('interop-2')} on ${voleNode}?`,
      );

      startAttacher();
      await agent.line(/pod default\/app2: mounted \[/, 120_000);
      await eventually(
        'volumesAttached of vole-node with both',
        () => (attachedNames(voleNode).length === 2 ? true : undefined),
        { context },
      );
      assert.deepEqual(attachedNames(voleNode), [unique('interop-1'), unique('interop-2')]);
      assert.equal(
        vas().some((v) => v.spec.nodeName === kubeletNode),
        false,
        'kubelet-node got nothing while vole-node holds the volume',
      );

      // vole-node lets the first volume go: only then does it move to kubelet-node.
      ok(['delete', 'pod', 'app', 'app2', '--timeout=90s']);
      const vaOther = volumeAttachmentName('interop-1', driver, kubeletNode);
      await eventually(
        'the volume attached to kubelet-node',
        () => vas().find((v) => v.metadata.name === vaOther && v.status?.attached === true),
        { context, timeoutMs: 120_000 },
      );
      await eventually(
        'volumesAttached of kubelet-node',
        () => (attachedNames(kubeletNode).includes(unique('interop-1')) ? true : undefined),
        { context },
      );
      ok(['delete', 'pod', 'other', '--grace-period=0', '--force']);
      await eventually(
        'every VolumeAttachment gone',
        () => (vas().length === 0 ? true : undefined),
        {
          context,
          timeoutMs: 120_000,
        },
      );
      await eventually(
        'the loop devices to go',
        async () =>
          (await listLoops()).some((l) => l.backFile.startsWith(base)) ? undefined : true,
        { context },
      );
      assert.ok(watch.changes > 10, `the watch saw ${watch.changes} changes`);
      assert.deepEqual(watch.violations, [], 'a ReadWriteOnce volume on two nodes at once');
      await b.stop();
    });
  },
);

const storage = [1, 2]
  .map(
    (i) => `
apiVersion: v1
kind: PersistentVolume
metadata: {name: data${i === 1 ? '' : i}-pv}
spec:
  capacity: {storage: 64Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  csi:
    driver: ${driver}
    volumeHandle: interop-${i}
    fsType: ext4
    volumeAttributes: {size: 64Mi}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data${i === 1 ? '' : i}, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  volumeName: data${i === 1 ? '' : i}-pv
  resources: {requests: {storage: 64Mi}}
`,
  )
  .concat(
    `
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: ${kubeletNode}}
spec:
  drivers: [{name: ${driver}, nodeID: interop-disk-id, topologyKeys: null}]
---
apiVersion: v1
kind: Node
metadata:
  name: ${kubeletNode}
  annotations:
    volumes.kubernetes.io/controller-managed-attach-detach: "true"
    csi.volume.kubernetes.io/nodeid: '{"${driver}":"interop-disk-id"}'
`,
  )
  .join('---');

function pod(name: string, nodeName: string, claim: string): string {
  return `
apiVersion: v1
kind: Pod
metadata: {name: ${name}, namespace: default}
spec:
  nodeName: ${nodeName}
  automountServiceAccountToken: false
  containers:
  - name: app
    image: registry.k8s.io/pause
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: ${claim}}
`;
}
