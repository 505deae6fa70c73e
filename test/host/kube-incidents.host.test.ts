/**
 * Five volume incidents produced on one real control plane (scripts/kube-up.sh: etcd,
 * kube-apiserver with its audit log, kube-controller-manager with every controller, its
 * attach/detach and node lifecycle controllers among them, and a kubemark hollow node),
 * Kubernetes' csi-attacher serving `vole csi-driver`, and two `vole run --kubeconfig`
 * nodes that mount CSI volumes: vole-node and vole-edge, whose drivers share one directory
 * of disk images, as two machines share a SAN. `vole record` records the cluster
 * throughout:
 *
 * 1. a pod deleted while its node (vole-edge) is cut off (its agent stopped: edgeNodeOf):
 *    it stays Terminating, its volume attached, until the node is heard from again;
 * 2. vole-edge killed (SIGKILL, agent and driver) with a ReadWriteOnce volume attached and
 *    in use; its pod is deleted and a replacement created on vole-node: the attach/detach
 *    controller refuses it (Multi-Attach) until vole-edge gets the
 *    `node.kubernetes.io/out-of-service` taint, which forces the detach at once
 *    (maxWaitForUnmountDuration, 6 min, has no flag);
 * 3. NodeUnpublishVolume failing (`vole csi-driver --faults`): the deleted pod stays
 *    Terminating until the fault is gone;
 * 4. a claim whose StorageClass names a provisioner that does not run;
 * 5. a ControllerPublishVolume slower than csi-attacher's --timeout: the attach times out,
 *    then succeeds on its retry.
 *
 * For each, `vole why POD --db recorded.db` names the cause, and `vole import --audit-log`
 * of the same run gives the same answer (times and seqs aside); `vole judge` finds no
 * violation on either log. Then a VolumeAttachment patched by hand attaches incident 2's
 * ReadWriteOnce volume to the hollow node too: `vole judge` exits 1 naming it, on both
 * logs. The incident table is printed.
 *
 * The hollow node takes no part in the incidents themselves: kubemark's hollow kubelet runs
 * with enableControllerAttachDetach false (pkg/kubemark/hollow_kubelet.go), so it attaches
 * its volumes itself, never reports volumesInUse, and the attach/detach controller does
 * not manage its volumes; and it mounts through a fake mounter, so it cannot publish a CSI
 * volume.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { before, describe, test } from 'node:test';
import { type AgentProcess, startVole, vole } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { type KubeCluster, kubeTestSkipReason, useKubeCluster } from '../support/kube.js';

const skip = kubeTestSkipReason();
const driver = 'disk.csi.vole.dev';
const voleNode = 'vole-node';
const diskId = 'incidents-disk-id';
const edgeNode = 'vole-edge';
const hollowNode = 'hollow-a';
const gracePeriodS = 16;
const unique = (handle: string) => `kubernetes.io/csi/${driver}^${handle}`;

interface Va {
  metadata: { name: string };
  spec: { nodeName: string; source: { persistentVolumeName?: string } };
  status?: { attached?: boolean; attachError?: { message?: string } };
}
interface NodeObject {
  status?: {
    volumesInUse?: string[];
    conditions?: { type: string; status: string }[];
  };
}
interface Row {
  readonly incident: string;
  readonly pod: string;
  readonly why: string;
  readonly verdict: string;
  readonly same: boolean;
}

/** A static ReadWriteOnce PV of the driver, and its claim, both named `name`. */
const storage = (name: string) => `apiVersion: v1
kind: PersistentVolume
metadata: {name: ${name}}
spec:
  capacity: {storage: 64Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  csi: {driver: ${driver}, volumeHandle: ${name}, fsType: ext4, volumeAttributes: {size: 64Mi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ${name}, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  volumeName: ${name}
  resources: {requests: {storage: 64Mi}}
`;
const noProvisioner = `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: nobody}
provisioner: provisioner.example.com/not-running
volumeBindingMode: Immediate
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: unprovisioned, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: nobody
  resources: {requests: {storage: 64Mi}}
`;
const pod = (name: string, node: string, claim: string) => `apiVersion: v1
kind: Pod
metadata: {name: ${name}, namespace: default}
spec:
  nodeName: ${node}
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
  containers: [{name: app, image: registry.k8s.io/pause, volumeMounts: [{name: data, mountPath: /data}]}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: ${claim}}}]
`;
/**
 * The judge's waits in a `why` answer (vole's own answer after them is left out), times,
 * durations and seqs masked: what record and import must agree on.
 */
/**
 * The waits of a `vole why` answer, times and seqs aside. A wait under a second is left out:
 * which of its conditions held longer turns on the sub-second order of two observers' events
 * (the recorder's watch against the audit log's stamps), which may differ.
 */
function whyShape(text: string): string {
  const kept: string[] = [];
  let brief = false;
  for (const line of text.split('\n')) {
    if (/ on \S+: (waited|Terminating)/.test(line)) {
      brief = /, 0s\)$/.test(line);
      if (!brief) kept.push(line);
    } else if (/^ +held by /.test(line) && !brief) kept.push(line);
  }
  return kept.join('\n').replace(/\d+/g, '#');
}

describe('five volume incidents on a real control plane', { skip, timeout: 900_000 }, () => {
  const cluster = useKubeCluster(['kube-controller-manager', 'kubemark', 'csi-attacher']);
  const { base, root } = skip === false ? hostSandbox('incidents') : { base: '', root: '' };
  const recorded = join(base, 'recorded.db');
  const edge = edgeNodeOf(cluster, base);
  const faults = join(base, 'faults.json');
  const { ok, json, wait } = cluster;
  let agent: AgentProcess | undefined;
  let attacher: AgentProcess | undefined;
  let socket = '';
  const rows: Row[] = [];

  before(() =>
    cluster.start(base, {
      controllers: '*',
      // A node not heard from for 16 s is NotReady (the default is 50 s).
      kubeControllerManagerFlags: [
        `--node-monitor-grace-period=${gracePeriodS}s`,
        '--node-monitor-period=1s',
      ],
      hollowNodes: [hollowNode],
    }),
  );

  const vas = () => json<{ items: Va[] }>(['get', 'volumeattachments']).items;
  const attachedTo = (pv: string, node: string) =>
    wait(`${pv} attached to ${node}`, () =>
      vas().find(
        (v) =>
          v.spec.source.persistentVolumeName === pv &&
          v.spec.nodeName === node &&
          v.status?.attached === true,
      ),
    );
  const nodeOf = (node: string) => json<NodeObject>(['get', 'node', node]).status ?? {};
  const inUseOn = (pv: string, node: string) =>
    wait(`${node} lists ${pv} in volumesInUse`, () =>
      nodeOf(node).volumesInUse?.includes(unique(pv)) === true ? true : undefined,
    );
  const notReady = (node: string) =>
    wait(
      `${node} not Ready`,
      () => {
        const ready = nodeOf(node).conditions?.find((c) => c.type === 'Ready')?.status;
        return ready !== undefined && ready !== 'True' ? true : undefined;
      },
      (gracePeriodS + 60) * 1000,
    );
  const gone = (kind: string, name: string) =>
    wait(`${kind} ${name} gone`, () =>
      cluster.kubectl(['get', kind, name]).status === 0 ? undefined : true,
    );
  const podEvent = (name: string, reason: RegExp, message: RegExp) =>
    wait(`an Event ${reason} about ${name}`, () =>
      json<{ items: { reason: string; message: string; involvedObject: { name: string } }[] }>([
        'get',
        'events',
      ]).items.find(
        (e) => e.involvedObject.name === name && reason.test(e.reason) && message.test(e.message),
      ),
    );

  const startAttacher = () => {
    attacher = cluster.startSidecar('csi-attacher', socket, base, ['--timeout=3s']);
  };

  test('each incident: why names its cause, judge finds no false violation, the planted one is caught', async () => {
    await cluster.defaultServiceAccount();
    const recorder = cluster.started(
      startVole([
        ...['record', '--kubeconfig', cluster.recorderKubeconfig(join(base, 'rec.kubeconfig'))],
        ...['--db', recorded],
      ]),
      'recorder',
    );
    await recorder.line(/recording: listed everything/, 120_000);
    // One directory of disk images for both nodes' drivers (a SAN both machines see).
    mkdirSync(join(base, 'csi-state/images'), { recursive: true });
    mkdirSync(join(base, 'edge/csi-state'), { recursive: true });
    symlinkSync(join(base, 'csi-state/images'), join(base, 'edge/csi-state/images'));
    socket = cluster.startCsiDriver(base, root, diskId, ['--faults', faults]);
    agent = await cluster.startAgent(voleNode, root);
    await edge.start();
    startAttacher();
    const volumes = ['moved', 'stuck', 'slow', 'cut'];
    ok(['apply', '-f', '-'], [...volumes.map(storage), noProvisioner].join('---\n'));
    // Kubernetes' attach/detach controller skips a pod whose claim is not yet Bound and
    // looks again only minutes later (its desired state populator): bound first.
    await wait('the claims Bound', () =>
      volumes.every((c) => ok(['get', 'pvc', c, '-o', 'jsonpath={.status.phase}']) === 'Bound')
        ? true
        : undefined,
    );

    await deletedWhileCutOff();
    await nodeKilled();
    await unpublishFails();
    await noProvisionerRuns();
    await attachTimesOut();
    ok(['delete', 'pod', 'unprovisioned', '--grace-period=0', '--force']);
    ok(['delete', 'pvc', 'unprovisioned', '--wait=false']);

    // The verdict before the planted violation: the recorded log read beside its writer,
    // and the audit log as it stands, imported.
    const keep = process.env.VOLE_INCIDENTS_KEEP;
    if (keep !== undefined && keep !== '') {
      vole('export', '--db', recorded, '--out', join(keep, 'recorded-clean.jsonl'));
      copyFileSync(join(cluster.dir(), 'audit.log'), join(keep, 'audit-clean.log'));
    }
    const clean = vole('judge', '--db', recorded);
    assert.equal(clean.status, 0, `judge on the recorded log:\n${clean.stdout}${clean.stderr}`);
    copyFileSync(join(cluster.dir(), 'audit.log'), join(base, 'audit-clean.log'));
    const cleanImport = importAudit(join(base, 'audit-clean.log'), join(base, 'clean.db'));
    const cleanImported = vole('judge', '--db', cleanImport);
    assert.equal(cleanImported.status, 0, `judge on the import:\n${cleanImported.stdout}`);

    await planted();
    assert.equal(await recorder.stop(), 0);
    const imported = importAudit(join(cluster.dir(), 'audit.log'), join(base, 'imported.db'));
    for (const db of [recorded, imported]) {
      const verdict = vole('judge', '--db', db);
      assert.equal(verdict.status, 1, `judge on ${db} caught nothing:\n${verdict.stdout}`);
      const violations = verdict.stdout.split('\n').filter((l) => l.includes('VIOLATION'));
      assert.equal(violations.length, 1, verdict.stdout);
      assert.match(violations[0]!, /multiAttach .*moved \(ReadWriteOnce\) attached to /);
      assert.match(violations[0]!, new RegExp(hollowNode));
    }
    compareWhy(imported);
    console.log(table(rows, clean.stdout));
    await cleanUp();
    // VOLE_INCIDENTS_KEEP=DIR keeps both logs (scripts/inspector-screenshot.ts, the docs).
    if (keep !== undefined && keep !== '')
      for (const db of [recorded, imported]) copyFileSync(db, join(keep, basename(db)));
  });

  /** `vole import --audit-log` into `db`: its path. */
  function importAudit(log: string, db: string): string {
    const run = vole('import', '--audit-log', log, '--db', db);
    assert.equal(run.status, 0, run.stderr);
    return db;
  }

  /**
   * `vole why POD` on the recorded log, once it names the cause (the recorder may log the
   * last word, such as a repeated Event, a moment after the API server has it).
   */
  async function why(name: string, cause: RegExp[]): Promise<string> {
    let last = '';
    try {
      return await wait(
        `vole why ${name} to name its cause`,
        () => {
          const run = vole('why', `default/${name}`, '--db', recorded);
          assert.equal(run.status, 0, run.stderr);
          last = run.stdout;
          return cause.every((words) => words.test(last)) ? last : undefined;
        },
        60_000,
      );
    } catch {
      for (const words of cause) assert.match(last, words, `vole why ${name}:\n${last}`);
      return last;
    }
  }

  const answers = new Map<string, { incident: string; text: string }>();
  async function answered(incident: string, name: string, cause: RegExp[]): Promise<void> {
    answers.set(name, { incident, text: await why(name, cause) });
  }

  /** Every pod's why on the import is the recorded one's (the whole run), times and seqs aside. */
  function compareWhy(imported: string): void {
    for (const [name, { incident }] of answers) {
      const [fromRecord, fromAudit] = [recorded, imported].map((db) => {
        const run = vole('why', `default/${name}`, '--db', db);
        assert.equal(run.status, 0, run.stderr);
        return run.stdout;
      });
      const same = whyShape(fromAudit!) === whyShape(fromRecord!);
      assert.ok(same, `why ${name}: recorded\n${fromRecord}\nimported\n${fromAudit}`);
      const held = [...fromRecord!.matchAll(/^ +held by (.*)$/gm)].at(-1)?.[1] ?? ''; // the incident's wait
      rows.push({ incident, pod: name, why: held, verdict: '', same });
    }
  }

  async function nodeKilled(): Promise<void> {
    ok(['apply', '-f', '-'], pod('moved-a', edgeNode, 'moved'));
    await edge.agent().line(/pod default\/moved-a: mounted \[/, 120_000);
    await inUseOn('moved', edgeNode);
    await edge.kill();
    await notReady(edgeNode);
    // Its pod is deleted (the node is gone for good) and replaced on vole-node.
    ok(['delete', 'pod', 'moved-a', '--grace-period=0', '--force']);
    ok(['apply', '-f', '-'], pod('moved-b', voleNode, 'moved'));
    await podEvent('moved-b', /FailedAttachVolume/, /already exclusively attached/);
    ok(['taint', 'node', edgeNode, 'node.kubernetes.io/out-of-service=nodeshutdown:NoExecute']);
    await agent!.line(/pod default\/moved-b: mounted \[/, 120_000);
    await answered('node killed, pod moved', 'moved-b', [
      /held by multiAttach \(data\): Multi-Attach: moved is attached to vole-edge/,
      /still lists it in volumesInUse/,
      /NotReady/,
      /out-of-service taint/,
      /Event FailedAttachVolume: Waiting for detach/,
    ]);
  }

  async function unpublishFails(): Promise<void> {
    ok(['apply', '-f', '-'], pod('stuck', voleNode, 'stuck'));
    await agent!.line(/pod default\/stuck: mounted \[/, 120_000);
    writeFileSync(
      faults,
      JSON.stringify({ NodeUnpublishVolume: { error: 'device is busy (injected)' } }),
    );
    ok(['delete', 'pod', 'stuck', '--wait=false']);
    // Past its grace period (1 s), still there, still in use.
    await wait('stuck Terminating past its grace period', () => {
      const p = cluster.kubectl([
        'get',
        'pod',
        'stuck',
        '-o',
        'jsonpath={.metadata.deletionTimestamp}',
      ]);
      return p.status === 0 && Date.parse(p.stdout) + 5_000 < Date.now() ? true : undefined;
    });
    await inUseOn('stuck', voleNode);
    await answered('NodeUnpublishVolume fails', 'stuck', [
      /Terminating/,
      /held by teardownPending \(data\)/,
      /vole-node still lists stuck in volumesInUse/,
      /vole-node is Ready/,
    ]);
    rmSync(faults);
    await gone('pod', 'stuck');
  }

  async function noProvisionerRuns(): Promise<void> {
    ok(['apply', '-f', '-'], pod('unprovisioned', voleNode, 'unprovisioned'));
    await wait('the PV controller waits on the external provisioner', () =>
      json<{ items: { reason: string; involvedObject: { name: string } }[] }>([
        'get',
        'events',
      ]).items.find(
        (e) => e.involvedObject.name === 'unprovisioned' && e.reason === 'ExternalProvisioning',
      ),
    );
    await answered('no provisioner runs', 'unprovisioned', [
      /held by claimPending \(data\)/,
      /StorageClass nobody names provisioner provisioner\.example\.com\/not-running, which has made no PersistentVolume/,
      /ExternalProvisioning/,
    ]);
  }

  async function attachTimesOut(): Promise<void> {
    writeFileSync(
      faults,
      JSON.stringify({ ControllerPublishVolume: { delaySeconds: 6, times: 1 } }),
    );
    ok(['apply', '-f', '-'], pod('slow', voleNode, 'slow'));
    // The timeout shows in the VolumeAttachment's attachError only until the retry: the
    // recorded log keeps it (the why below), a poll of the API server may miss it.
    await agent!.line(/pod default\/slow: mounted \[/, 120_000);
    rmSync(faults);
    await answered('attach times out, then succeeds', 'slow', [
      /held by attachPending \(data\)/,
      /attachError: .*DeadlineExceeded/,
      /to \d\d:\d\d:\d\d \(ready/,
    ]);
  }

  async function deletedWhileCutOff(): Promise<void> {
    ok(['apply', '-f', '-'], pod('cut', edgeNode, 'cut'));
    await edge.agent().line(/pod default\/cut: mounted \[/, 120_000);
    await inUseOn('cut', edgeNode);
    edge.cut();
    try {
      await notReady(edgeNode);
      ok(['delete', 'pod', 'cut', '--wait=false']);
      await wait('cut Terminating past its grace period', () => {
        const p = cluster.kubectl([
          'get',
          'pod',
          'cut',
          '-o',
          'jsonpath={.metadata.deletionTimestamp}',
        ]);
        return p.status === 0 && Date.parse(p.stdout) + 5_000 < Date.now() ? true : undefined;
      });
      assert.ok(
        vas().some((v) => v.spec.nodeName === edgeNode),
        'still attached while cut off',
      );
    } finally {
      edge.heal();
    }
    await gone('pod', 'cut');
    await wait('cut detached from vole-edge', () =>
      vas().some((v) => v.spec.source.persistentVolumeName === 'cut') ? undefined : true,
    );
    await answered('pod deleted while its node is cut off', 'cut', [
      /Terminating/,
      /held by teardownNodeNotReady \(data\)/,
      /vole-edge still lists cut in volumesInUse/,
      /vole-edge is NotReady/,
    ]);
  }

  /** A VolumeAttachment made and patched by hand: moved, attached to vole-node, on hollow-b too. */
  async function planted(): Promise<void> {
    await attacher!.stop(); // nothing may act on it: the hand-made status is the violation
    ok(
      ['apply', '-f', '-'],
      `apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: planted}
spec: {attacher: ${driver}, nodeName: ${hollowNode}, source: {persistentVolumeName: moved}}
`,
    );
    ok([
      ...['patch', 'volumeattachment', 'planted', '--subresource=status', '--type=merge'],
      ...['-p', '{"status":{"attached":true}}'],
    ]);
    await wait('the recorded log shows the planted attachment', () =>
      vole('judge', '--db', recorded).status === 1 ? true : undefined,
    );
    cluster.kubectl(['delete', 'volumeattachment', 'planted', '--wait=false']);
    await gone('volumeattachment', 'planted');
    startAttacher();
  }

  /**
   * The pods gone, and every VolumeAttachment with them. vole-edge's of `moved` stays: its
   * forced detach did not complete in the runs here (the killed node's mount of the shared
   * disk stays), nor did vole-node's later one; their finalizers are taken off by hand, as
   * an operator would, and the sandbox's clean-up unmounts what the killed node left and
   * frees the loop devices.
   */
  async function cleanUp(): Promise<void> {
    ok(['delete', 'pod', 'moved-b', 'slow', '--wait=false']);
    await gone('pod', 'moved-b');
    await gone('pod', 'slow');
    for (const v of vas())
      cluster.kubectl([
        ...['patch', 'volumeattachment', v.metadata.name, '--type=merge'],
        ...['-p', '{"metadata":{"finalizers":null}}'],
      ]);
    ok(['delete', 'volumeattachments', '--all', '--wait=false']);
    await wait('every VolumeAttachment gone', () => (vas().length === 0 ? true : undefined));
  }
});

/** The incident table: each pod's cause, the verdict, record and import the same. */
function table(rows: readonly Row[], verdict: string): string {
  const violations = /safety violations: (\d+)/.exec(verdict)?.[1] ?? '?';
  const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
  return [
    '| incident | pod | vole why: held by | vole judge | record = import |',
    '| --- | --- | --- | --- | --- |',
    ...rows.map(
      (r) =>
        `| ${r.incident} | ${r.pod} | ${cut(r.why, 160)} | ${violations} violations, exit 0 | ${r.same ? 'yes' : 'NO'} |`,
    ),
    `| planted VolumeAttachment (moved on ${voleNode} and ${hollowNode}) | - | - | 1 violation (multiAttach), exit 1 | yes |`,
  ].join('\n');
}

/**
 * vole-edge: a second `vole run --kubeconfig` node with its own CSI driver. Cut off: its
 * agent stopped (SIGSTOP), so the API server hears nothing from the node (no Lease renewal,
 * no status, no pod update) until it is continued (SIGCONT): a cut link as the control
 * plane sees it, while the driver and the mounts stay. Killed: agent and driver SIGKILLed.
 */
function edgeNodeOf(cluster: KubeCluster, base: string) {
  let agent: AgentProcess | undefined;
  let driver: AgentProcess | undefined;
  return {
    agent: () => agent!,
    async start() {
      const root = join(base, 'edge-root');
      cluster.startCsiDriver(join(base, 'edge'), root, diskId);
      driver = [...cluster.processes].at(-1);
      const kubeconfig = cluster.agentKubeconfig(edgeNode);
      agent = cluster.started(
        startVole(['run', '--kubeconfig', kubeconfig, '--node', edgeNode, '--root', root]),
        'edge',
      );
      await agent.line(/CSI driver disk\.csi\.vole\.dev registered/, 120_000);
    },
    cut: () => agent!.child.kill('SIGSTOP'),
    heal: () => agent!.child.kill('SIGCONT'),
    /** The machine dies: its agent and its driver, SIGKILL. */
    async kill() {
      for (const p of [agent!, driver!]) {
        p.child.kill('SIGKILL');
        await p.exited;
      }
    },
  };
}
