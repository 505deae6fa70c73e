/**
 * `vole record` on a real control plane (scripts/kube-up.sh), with a kubeconfig bound to
 * deploy/recorder-rbac.yaml only: PVs, claims, a Node, pods and a volume Event churn while
 * kube-apiserver is SIGKILLed and started again (scripts/kube-restart.sh). Then every
 * change the API server's audit log shows (each create, update, patch of a pod, claim or PV,
 * with the resourceVersion it answered) is in the recorded log exactly once, each deletion
 * once, the final state matches a fresh list, and the audit log shows that the recorder
 * only read (its one write attempt was refused, 403). Started again on its log, the
 * recorder adds nothing but its EngineStarted, and history and export read the log.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { eventCodec, type VoleEvent } from '../../src/events/index.js';
import { openLog } from '../../src/log/store.js';
import { type AgentProcess, repo, startVole, vole } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { kubeTestSkipReason, useKubeCluster } from '../support/kube.js';

const skip = kubeTestSkipReason();
const node = 'rec-node';
const recorderUser = 'system:serviceaccount:kube-system:vole-recorder';

interface AuditEntry {
  readonly stage: string;
  readonly verb: string;
  readonly user: { readonly username: string };
  readonly objectRef?: { readonly resource?: string; readonly subresource?: string };
  readonly responseStatus?: { readonly code?: number };
  readonly responseObject?: {
    readonly kind?: string;
    readonly metadata?: { readonly uid?: string; readonly resourceVersion?: string };
  };
}

interface Listed {
  items: { metadata: { uid: string; resourceVersion: string } }[];
}

const pv = (i: number) => `apiVersion: v1
kind: PersistentVolume
metadata: {name: rec-pv-${i}}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  hostPath: {path: /tmp/rec-pv-${i}}
`;
const claim = (i: number) => `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: rec-claim-${i}, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: rec-pv-${i}
  resources: {requests: {storage: 1Gi}}
`;
const pod = (i: number) => `apiVersion: v1
kind: Pod
metadata: {name: rec-pod-${i}, namespace: default}
spec:
  nodeName: ${node}
  containers: [{name: app, image: busybox}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: rec-claim-${i % 5}}}]
`;
const failedMount = `apiVersion: v1
kind: Event
metadata: {name: rec-pod-0.failedmount, namespace: default}
involvedObject: {kind: Pod, namespace: default, name: rec-pod-0}
reason: FailedMount
message: 'Unable to attach or mount volumes: timed out waiting for the condition'
type: Warning
source: {component: kubelet, host: ${node}}
count: 1
`;

describe('vole record on the real API server', { skip, timeout: 900_000 }, () => {
  const cluster = useKubeCluster(['kube-controller-manager']);
  const { base } = skip === false ? hostSandbox('kuberecord') : { base: '' };
  const db = join(base, 'recorded.db');
  const { ok, json, wait } = cluster;
  let kubeconfig = '';

  before(async () => {
    cluster.start(base, { controllers: '*,-attachdetach,-nodelifecycle' });
    await cluster.defaultServiceAccount();
    kubeconfig = cluster.recorderKubeconfig(join(base, 'recorder.kubeconfig'));
  });

  const startRecorder = async (): Promise<AgentProcess> => {
    const recorder = cluster.started(
      startVole(['record', '--kubeconfig', kubeconfig, '--db', db]),
      'recorder',
    );
    await recorder.line(/recording: listed everything/, 120_000);
    return recorder;
  };
  const readLog = (): VoleEvent[] => {
    const store = openLog(db, { codec: eventCodec, mode: 'readonly' });
    try {
      return [...store.read()];
    } finally {
      store.close();
    }
  };
  const audit = (): AuditEntry[] =>
    readFileSync(join(cluster.dir(), 'audit.log'), 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as AuditEntry);
  /** uid@resourceVersion of every recorded upsert and removal of pods, claims and PVs. */
  const recorded = (events: readonly VoleEvent[]) => {
    const upserts: string[] = [];
    const removals: string[] = [];
    for (const e of events) {
      const o = 'observed' in e ? e.observed : undefined;
      if (o === undefined) continue;
      if (e.type === 'PodUpserted' || e.type === 'ObjectUpserted')
        upserts.push(`${o.uid}@${o.resourceVersion}`);
      if (e.type === 'PodRemoved' || e.type === 'ObjectRemoved') removals.push(o.uid ?? '');
    }
    return { upserts, removals };
  };
  /** Every object now listed has its resourceVersion in the log. */
  const caughtUp = () => {
    const { upserts } = recorded(readLog());
    const have = new Set(upserts);
    const now = ['pods', 'pvc', 'pv'].flatMap((r) => json<Listed>(['get', r]).items);
    return now.every((o) => have.has(`${o.metadata.uid}@${o.metadata.resourceVersion}`))
      ? true
      : undefined;
  };

  test('churn across an API server restart: no change lost, none doubled, reads only', async () => {
    const denied = cluster.kubectl(['create', 'configmap', 'rec-write'], { kubeconfig });
    assert.notEqual(denied.status, 0);
    assert.match(denied.stderr, /forbidden/i);
    ok(['apply', '-f', '-'], `apiVersion: v1\nkind: Node\nmetadata: {name: ${node}}\n`);
    const recorder = await startRecorder();
    ok(['apply', '-f', '-'], [0, 1, 2, 3, 4].map((i) => `${pv(i)}---\n${claim(i)}`).join('---\n'));
    ok(['apply', '-f', '-'], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(pod).join('---\n'));
    ok(['create', '-f', '-'], failedMount);
    const apiPid = () =>
      readFileSync(join(cluster.dir(), 'pids'), 'utf8')
        .split('\n')
        .find((l) => l.startsWith('kube-apiserver '));
    const pidBefore = apiPid();
    // Churn goes on from another process while the API server is down and back.
    const churn = spawnSync(
      'bash',
      [
        '-c',
        `for i in $(seq 10 29); do
           until kubectl --kubeconfig "$K" apply -f - <<<"$(printf "$POD" $i $i $((i % 5)))" >/dev/null 2>&1; do sleep 0.2; done
           if [ $i = 15 ]; then bash "$R" "$D" kube-apiserver >/dev/null 2>&1; fi
         done`,
      ],
      {
        encoding: 'utf8',
        timeout: 300_000,
        env: {
          ...process.env,
          PATH: `${cluster.bin()}:${process.env['PATH']}`,
          K: join(cluster.dir(), 'kubeconfig'),
          R: join(repo, 'scripts/kube-restart.sh'),
          D: cluster.dir(),
          POD: pod(0)
            .replace('rec-pod-0', 'rec-pod-%s')
            .replace('rec-claim-0', 'rec-claim-%s')
            .replace(/^/, '# %s\n'),
        },
      },
    );
    assert.equal(churn.status, 0, churn.stderr);
    assert.notEqual(apiPid(), pidBefore, 'kube-apiserver was not restarted mid-churn');
    await wait('the API server ready again', () =>
      cluster.kubectl(['get', '--raw', '/readyz']).stdout === 'ok' ? true : undefined,
    );
    ok(['delete', 'pod', '--grace-period=0', '--force', 'rec-pod-0', 'rec-pod-1', 'rec-pod-2']);
    ok(['label', 'pvc', 'rec-claim-0', 'rec-claim-1', 'churn=done']);
    ok(['delete', 'pvc', 'rec-claim-4', '--wait=false']);
    await wait('the log caught up with a fresh list', caughtUp, 120_000);

    const events = readLog();
    const { upserts, removals } = recorded(events);
    assert.equal(new Set(upserts).size, upserts.length, 'an object change logged twice');
    assert.equal(new Set(removals).size, removals.length, 'a removal logged twice');
    const restarts = audit().filter((a) => a.stage === 'ResponseComplete');
    const changes = restarts.filter(
      (a) =>
        ['create', 'update', 'patch'].includes(a.verb) &&
        ['pods', 'persistentvolumeclaims', 'persistentvolumes'].includes(
          a.objectRef?.resource ?? '',
        ) &&
        (a.responseStatus?.code ?? 0) < 300 &&
        a.responseObject?.metadata?.resourceVersion !== undefined,
    );
    assert.ok(changes.length >= 40, `only ${changes.length} changes in the audit log`);
    const have = new Set(upserts);
    const lost = changes
      .map(
        (a) => `${a.responseObject?.metadata?.uid}@${a.responseObject?.metadata?.resourceVersion}`,
      )
      .filter((k) => !have.has(k));
    assert.deepEqual(lost, [], 'changes the audit log shows and the recorded log lacks');
    const podsGone = events.filter((e) => e.type === 'PodRemoved').length;
    assert.equal(podsGone, 3);
    assert.ok(events.some((e) => e.type === 'KubeEventObserved' && e.reason === 'FailedMount'));
    assert.ok(events.some((e) => e.type === 'ObjectUpserted' && e.object.kind === 'Node'));
    const byRecorder = audit().filter((a) => a.user.username === recorderUser);
    const writes = byRecorder.filter((a) => !['get', 'list', 'watch'].includes(a.verb));
    assert.ok(byRecorder.length > 0, 'no request of the recorder in the audit log');
    assert.deepEqual(
      writes.map((a) => `${a.verb} ${a.objectRef?.resource} ${a.responseStatus?.code}`),
      ['create configmaps 403'],
    );
    assert.equal(await recorder.stop(), 0);
    // The audit log itself, imported: the same changes, each once.
    const imported = join(base, 'imported.db');
    const run = vole('import', '--audit-log', join(cluster.dir(), 'audit.log'), '--db', imported);
    assert.equal(run.status, 0, run.stderr);
    process.stdout.write(run.stderr);
    const fromAudit = (() => {
      const store = openLog(imported, { codec: eventCodec, mode: 'readonly' });
      try {
        return recorded([...store.read()]);
      } finally {
        store.close();
      }
    })();
    assert.equal(new Set(fromAudit.upserts).size, fromAudit.upserts.length);
    const importedHave = new Set(fromAudit.upserts);
    assert.deepEqual(
      changes
        .map(
          (a) =>
            `${a.responseObject?.metadata?.uid}@${a.responseObject?.metadata?.resourceVersion}`,
        )
        .filter((k) => !importedHave.has(k)),
      [],
      'audited changes the imported log lacks',
    );
    assert.equal(fromAudit.removals.filter((u) => u !== '').length >= 3, true);

    const head = events.length;
    const again = await startRecorder();
    await again.stop();
    const after = readLog().slice(head);
    assert.deepEqual(
      after.map((e) => e.type),
      ['EngineStarted'],
      'started again, only its EngineStarted',
    );
    const history = vole('history', '--db', db);
    assert.equal(history.status, 0, history.stderr);
    const exported = vole('export', '--db', db, '--out', join(base, 'recorded.jsonl'));
    assert.equal(exported.status, 0, exported.stderr);
    process.stdout.write(
      `recorded ${head} events; ${changes.length} audited changes, 0 lost, 0 doubled\n`,
    );
  });
});
