/**
 * Faults on a real control plane while pods come and go: `vole run --kubeconfig` as the
 * node of a real kube-apiserver (scripts/kube-up.sh), 50 pods each with a ConfigMap, a
 * Secret and an emptyDir volume, then churn around each fault:
 * - kube-apiserver SIGKILLed and started again (scripts/kube-restart.sh): every watch
 *   breaks, and the agent watches again from where it was;
 * - etcd compacted past everything the agent has seen, then the API server restarted: its
 *   watch cache starts at the newest revision, so a watch the agent starts again from an
 *   older resourceVersion answers 410 Gone and the agent lists again (the audit log shows
 *   the node's list of its pods after the restart);
 * - pods deleted while the agent is down (SIGKILL), and new ones created: started again on
 *   the same log, it tears the deleted pods' volumes down and lets them go (the status
 *   manager's delete with grace period 0), and mounts the new ones.
 * After each: every pod that exists has its files on disk, nothing is left of a pod that
 * is gone, and the table of times to converge is printed. At the end `vole verify` finds
 * 0 divergences in the agent's log.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { type AgentProcess, startVole, vole } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { kubeTestSkipReason, useKubeCluster } from '../support/kube.js';

const node = 'fault-node';
const podsMax = 50;
const skip = kubeTestSkipReason();
const repo = new URL('../..', import.meta.url).pathname;

const contents = [0, 1, 2, 3, 4]
  .map(
    (i) => `apiVersion: v1
kind: ConfigMap
metadata: {name: cfg-${i}, namespace: default}
data: {value: config-${i}}
---
apiVersion: v1
kind: Secret
metadata: {name: sec-${i}, namespace: default}
stringData: {token: secret-${i}}
`,
  )
  .join('---\n');

const podYaml = (name: string, i: number) => `apiVersion: v1
kind: Pod
metadata: {name: ${name}, namespace: default}
spec:
  nodeName: ${node}
  containers:
    - name: app
      image: busybox
      volumeMounts: [{name: cfg, mountPath: /cfg}, {name: sec, mountPath: /sec}, {name: scratch, mountPath: /s}]
  volumes:
    - {name: cfg, configMap: {name: cfg-${i % 5}}}
    - {name: sec, secret: {secretName: sec-${i % 5}}}
    - {name: scratch, emptyDir: {}}
`;

interface AuditEvent {
  readonly user: { readonly username: string };
  readonly verb: string;
  readonly objectRef?: { readonly resource?: string };
  readonly responseStatus?: { readonly code?: number };
}

interface PodList {
  items: { metadata: { name: string; uid: string; deletionTimestamp?: string } }[];
}

describe('faults on the real API server during pod churn', { skip, timeout: 900_000 }, () => {
  const cluster = useKubeCluster(['kube-controller-manager']);
  const { base, root } = skip === false ? hostSandbox('kubefaults') : { base: '', root: '' };
  const db = join(base, 'vole.db');
  const { ok, json, wait } = cluster;
  let agent: AgentProcess | undefined;
  const gonePods = new Set<string>(); // uids of pods deleted
  const table: string[] = [];

  before(() => cluster.start(base, { controllers: '*,-attachdetach,-nodelifecycle' }));

  const startAgent = (kubeconfig: string) => {
    agent = cluster.started(
      startVole(['run', '--kubeconfig', kubeconfig, '--node', node, '--root', root, '--db', db]),
      'agent',
    );
    return agent;
  };
  const create = (names: readonly string[], from: number) =>
    ok(['apply', '-f', '-'], names.map((n, k) => podYaml(n, from + k)).join('---\n'));
  const remove = (names: readonly string[]) => {
    const uids = json<PodList>(['get', 'pods']).items.filter((p) =>
      names.includes(p.metadata.name),
    );
    for (const p of uids) gonePods.add(p.metadata.uid);
    ok(['delete', 'pod', '--wait=false', ...names]);
  };
  const podDir = (uid: string) => join(root, 'pods', uid);
  const mountedOnDisk = (uid: string) =>
    existsSync(join(podDir(uid), 'volumes/kubernetes.io~configmap/cfg/value')) &&
    existsSync(join(podDir(uid), 'volumes/kubernetes.io~secret/sec/token')) &&
    existsSync(join(podDir(uid), 'volumes/kubernetes.io~empty-dir/scratch'));

  /** Every pod the API has is on disk and none is Terminating; nothing of a gone pod is. */
  const converged = () => {
    const pods = json<PodList>(['get', 'pods']).items;
    if (pods.some((p) => p.metadata.deletionTimestamp !== undefined)) return undefined;
    if (!pods.every((p) => mountedOnDisk(p.metadata.uid))) return undefined;
    if ([...gonePods].some((uid) => existsSync(podDir(uid)))) return undefined;
    return pods.length;
  };
  const converge = async (fault: string, sinceMs: number) => {
    const pods = await wait(`convergence after: ${fault}`, converged, 240_000);
    const row = `${fault.padEnd(58)} ${String(Date.now() - sinceMs).padStart(6)} ms  ${pods} pods`;
    table.push(row);
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
  const names = (prefix: string, count: number) =>
    Array.from({ length: count }, (_, i) => `${prefix}${i}`);

  test('the agent converges after each fault, and its log verifies', async () => {
    await cluster.defaultServiceAccount();
    ok(['apply', '-f', '-'], contents);
    const agentKubeconfig = cluster.agentKubeconfig(node);
    startAgent(agentKubeconfig);
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

    await agent!.stop();
    const verify = vole('verify', '--db', db);
    assert.equal(verify.status, 0, verify.stdout + verify.stderr);
    assert.match(verify.stdout, / 0 divergences/);
    console.log(
      ['fault                                                      converged  pods', ...table].join(
        '\n',
      ),
    );
  });
});
