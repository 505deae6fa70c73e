/**
 * Faults on a real control plane while pods come and go: `vole run --kubeconfig` as the
 * node of a real kube-apiserver (scripts/kube-up.sh), 50 pods each with a ConfigMap, a
 * Secret and an emptyDir volume, one in five with a CSI volume too (a ReadWriteOnce PV of
 * `vole csi-driver`, attached through a VolumeAttachment by one of two `vole controller
 * --kubeconfig` replicas and Kubernetes' csi-attacher), then churn around each fault:
 * - kube-apiserver SIGKILLed and started again (scripts/kube-restart.sh): every watch
 *   breaks, and the agent and the controller watch again from where they were;
 * - etcd compacted past everything the agent has seen, then the API server restarted: its
 *   watch cache starts at the newest revision, so a watch the agent starts again from an
 *   older resourceVersion answers 410 Gone and the agent lists again (the audit log shows
 *   the node's list of its pods after the restart);
 * - pods deleted while the agent is down (SIGKILL), and new ones created: started again on
 *   the same log, it tears the deleted pods' volumes down and lets them go (the status
 *   manager's delete with grace period 0), and mounts the new ones;
 * - the Lease holder among the two controller replicas SIGKILLed while attaches are in
 *   flight (csi-attacher stopped, so their VolumeAttachments wait): the standby takes the
 *   Lease, learns the attachments from the API server, and finishes them once.
 * After each: every pod that exists has its files on disk and its CSI volume mounted, the
 * VolumeAttachments and the Node's volumesAttached are exactly the CSI volumes of the pods
 * that exist, nothing is left of a pod that is gone, and the logs' history passes the
 * invariants (test/support/history-invariants.ts). The table of times to converge is
 * printed; at the end `vole verify` finds 0 divergences in every log.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { type AgentProcess, startVole, vole } from '../support/agent-process.js';
import { exitLostLeadership } from '../../src/cli/cluster-run.js';
import { checkHistory, type HistoryCheck } from '../support/history-invariants.js';
import { hostSandbox } from '../support/host.js';
import { churnContents, podChurn } from '../support/kube-churn.js';
import { kubeTestSkipReason, useKubeCluster } from '../support/kube.js';

const node = 'fault-node';
const podsMax = 50;
const leaseDurationS = 4;
const skip = kubeTestSkipReason();
const repo = new URL('../..', import.meta.url).pathname;

interface AuditEvent {
  readonly user: { readonly username: string };
  readonly verb: string;
  readonly objectRef?: { readonly resource?: string };
  readonly responseStatus?: { readonly code?: number };
}

describe('faults on the real API server during pod churn', { skip, timeout: 900_000 }, () => {
  const cluster = useKubeCluster(['kube-controller-manager', 'csi-attacher']);
  const { base, root } = skip === false ? hostSandbox('kubefaults') : { base: '', root: '' };
  const db = join(base, 'vole.db');
  const { ok, wait } = cluster;
  let agent: AgentProcess | undefined;
  let attacher: AgentProcess | undefined;
  const replicas = new Map<string, AgentProcess>();
  const churn = podChurn(cluster, { node, base, root });
  const { create, remove, names, vas } = churn;
  const table: string[] = [];
  let socket = '';

  // Kubernetes' controllers but its attach/detach one (vole's replicas) and the node
  // lifecycle one (no kubelet Lease heartbeats here).
  before(() => cluster.start(base, { controllers: '*,-attachdetach,-nodelifecycle' }));

  const startAgent = (kubeconfig: string) => {
    agent = cluster.started(
      startVole(['run', '--kubeconfig', kubeconfig, '--node', node, '--root', root, '--db', db]),
      'agent',
    );
    return agent;
  };
  /** Each replica's restarts (its supervisor's, below) and how its processes ended. */
  const replicaExits: string[] = [];
  /**
   * A replica as deploy/ runs it: one that lost the Lease exits (exitLostLeadership, 3)
   * and its supervisor starts it again, a standby on the same log (an API server down
   * longer than the renew deadline takes the Lease from a leader). SIGTERM (the test's
   * stop) or SIGKILL (a fault) is not restarted.
   */
  const startReplica = (identity: string, kubeconfig: string) => {
    const replica = cluster.started(
      startVole([
        'controller',
        ...['--kubeconfig', kubeconfig, '--root', join(base, identity)],
        ...['--identity', identity, '--lease-duration', `${leaseDurationS}s`],
      ]),
      identity,
    );
    replicas.set(identity, replica);
    void replica.exited.then((code) => {
      replicaExits.push(`${identity} exited ${code ?? replica.child.signalCode}`);
      if (code === exitLostLeadership) startReplica(identity, kubeconfig);
    });
    return replica;
  };
  const startAttacher = () => {
    attacher = cluster.startSidecar('csi-attacher', socket, base, ['--timeout=30s']);
  };
  /** The agent's log and every replica's, against the invariants over their history. */
  const invariants = (): HistoryCheck =>
    checkHistory({
      agentLogs: [db],
      controllerLogs: [...replicas.keys()].map((identity) => join(base, identity, 'controller.db')),
    });
  const converge = async (fault: string, sinceMs: number) => {
    const { pods, csi } = await wait(
      `convergence after: ${fault}`,
      () => churn.converged(),
      240_000,
    );
    const ms = Date.now() - sinceMs;
    const check = invariants();
    table.push(
      `${fault.padEnd(56)} ${String(ms).padStart(6)} ms  ${String(pods).padStart(4)}  ${String(csi).padStart(3)}  ${String(check.checked).padStart(9)}  ${check.violations.length}`,
    );
    assert.deepEqual(check.violations, [], `invariants after: ${fault}`);
    return pods;
  };
  const restartApiServer = (args: readonly string[] = []) => {
    const restart = spawnSync(
      'bash',
      [join(repo, 'scripts/kube-restart.sh'), cluster.dir(), 'kube-apiserver', ...args],
      { encoding: 'utf8' },
    );
    assert.equal(restart.status, 0, restart.stderr);
  };
  const apiReady = () =>
    wait('the API server ready again', () =>
      cluster.kubectl(['get', '--raw', '/readyz']).stdout === 'ok' ? true : undefined,
    );
  /** The API server's audit log (scripts/kube-up.sh: every request, level Metadata). */
  const auditEvents = () =>
    readFileSync(join(cluster.dir(), 'audit.log'), 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as AuditEvent);

  test('the agent and the controllers converge after each fault, and their logs verify', async () => {
    await cluster.defaultServiceAccount();
    ok(['apply', '-f', '-'], churnContents);
    socket = cluster.startCsiDriver(base, root, 'fault-disk-id');
    const agentKubeconfig = cluster.agentKubeconfig(node);
    startAgent(agentKubeconfig);
    // The driver answers once registered: csi-attacher, started before, may give up on it.
    await agent!.line(/CSI driver disk\.csi\.vole\.dev registered/, 120_000);
    startAttacher();
    const controllerKubeconfig = cluster.controllerKubeconfig(join(base, 'controller.kubeconfig'));
    await startReplica('replica-a', controllerKubeconfig).line(/leading: CSI drivers/);
    await startReplica('replica-b', controllerKubeconfig).line(
      /standby: replica-a holds the Lease/,
    );
    let t0 = Date.now();
    create(names('p', podsMax), 0);
    assert.equal(await converge(`${podsMax} pods created`, t0), podsMax);

    // 1. kube-apiserver killed, down 3 s, started again; then churn.
    t0 = Date.now();
    restartApiServer(['--down-seconds', '3']);
    await apiReady();
    remove(names('p', 10));
    create(names('q', 10), 0);
    assert.equal(await converge('kube-apiserver SIGKILLed, restarted, churn', t0), podsMax);

    // 2. etcd compacted past every revision the agent saw, the API server restarted.
    const etcdUrl = /--listen-client-urls (\S+)/.exec(
      readFileSync(join(cluster.dir(), 'etcd.cmd'), 'utf8'),
    )?.[1];
    assert.ok(etcdUrl, 'the etcd client URL in etcd.cmd');
    ok(['create', 'namespace', 'noise']);
    for (let i = 0; i < 20; i += 1) ok(['-n', 'noise', 'create', 'configmap', `n${i}`]);
    const range = await fetch(`${etcdUrl}/v3/kv/range`, {
      method: 'POST',
      body: JSON.stringify({ key: Buffer.from('/').toString('base64') }),
    });
    const revision = ((await range.json()) as { header: { revision: string } }).header.revision;
    const compacted = await fetch(`${etcdUrl}/v3/kv/compaction`, {
      method: 'POST',
      body: JSON.stringify({ revision, physical: true }),
    });
    assert.equal(compacted.status, 200, await compacted.text());
    t0 = Date.now();
    const auditBefore = auditEvents().length;
    restartApiServer();
    await apiReady();
    remove(names('p', 20).slice(10));
    create(names('r', 10), 0);
    assert.equal(
      await converge(`etcd compacted at ${revision}, API server restarted`, t0),
      podsMax,
    );
    // Its pods' watch could not go on from a compacted revision: it listed them again.
    const relists = auditEvents()
      .slice(auditBefore)
      .filter((e) => e.user.username === `system:node:${node}` && e.verb === 'list')
      .filter((e) => e.objectRef?.resource === 'pods' && e.responseStatus?.code === 200);
    assert.ok(relists.length >= 1, 'the agent listed its pods again after the compaction');

    // 3. Pods deleted and created while the agent is down.
    agent!.child.kill('SIGKILL');
    await agent!.exited;
    t0 = Date.now();
    remove(names('p', 30).slice(20));
    create(names('s', 10), 0);
    startAgent(agentKubeconfig);
    assert.equal(
      await converge('10 pods deleted, 10 created while the agent is down', t0),
      podsMax,
    );

    await leaseHolderKilled();

    await agent!.stop();
    for (const replica of replicas.values()) await replica.stop();
    for (const log of [db, ...[...replicas.keys()].map((r) => join(base, r, 'controller.db'))]) {
      const verify = vole('verify', '--db', log);
      assert.equal(verify.status, 0, `${log}: ${verify.stdout}${verify.stderr}`);
      assert.match(verify.stdout, / 0 divergences/, log);
    }
    console.log(replicaExits.join('\n'));
    console.log(
      [`${'fault'.padEnd(56)} converged   pods  csi  invariants  violations`, ...table].join('\n'),
    );
  });

  /**
   * 4. The Lease holder SIGKILLed while attaches wait on the external-attacher (stopped):
   * the standby takes the Lease within its duration + 1 s and finishes them, once.
   */
  async function leaseHolderKilled(): Promise<void> {
    const holder = () =>
      cluster
        .kubectl([
          '-n',
          'kube-system',
          'get',
          'lease',
          'vole-attach-detach',
          '-o',
          'jsonpath={.spec.holderIdentity}',
        ])
        .stdout.trim();
    const leaderName = holder();
    const standbyName = leaderName === 'replica-a' ? 'replica-b' : 'replica-a';
    const leader = replicas.get(leaderName)!;
    const standby = replicas.get(standbyName)!;
    await standby.line(/standby: .* holds the Lease/);
    const said = standby.lines.length;
    await attacher!.stop();
    const t0 = Date.now();
    remove(names('p', 40).slice(30));
    create(names('t', 10), 0);
    await wait(`the VolumeAttachments of t0 and t5 made by ${leaderName}`, () => {
      const pvs = vas().map((v) => v.spec.source.persistentVolumeName);
      return pvs.includes('d-t0-pv') && pvs.includes('d-t5-pv') ? true : undefined;
    });
    const killedMs = Date.now();
    process.kill(leader.child.pid!, 'SIGKILL');
    await wait(
      `${standbyName} to take the Lease`,
      () =>
        standby.lines.slice(said).some((l) => /leading: took the Lease/.test(l)) ? true : undefined,
      (leaseDurationS + 5) * 1000,
    );
    const tookOverMs = Date.now() - killedMs;
    assert.ok(
      tookOverMs <= (leaseDurationS + 1) * 1000,
      `took over after ${tookOverMs} ms (lease ${leaseDurationS} s)`,
    );
    startAttacher();
    assert.equal(await converge('Lease holder SIGKILLed mid-attach, churn', t0), podsMax);
  }
});
