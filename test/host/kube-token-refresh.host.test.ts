/**
 * The token manager on a real kube-apiserver: `vole run --kubeconfig` refreshes a projected
 * service-account token on its timer, as the kubelet does, without the pod being touched.
 * The API's shortest expirationSeconds (600) would make the kubelet's 80 % wait 8 minutes,
 * so VOLE_TOKEN_AGE_MAX_MS (the kubelet's 24 h cap) is set to 3 s here: the schedule itself
 * is checked in test/kube/tokens.unit.test.ts. The new token is a different token the API
 * server accepts (a TokenReview), bound to the same pod, swapped in through `..data`.
 */
import assert from 'node:assert/strict';
import { readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { type AgentProcess, startVole, vole } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { eventually as waitFor, useKubeCluster, kubeTestSkipReason } from '../support/kube.js';

const node = 'token-node';

const skip = kubeTestSkipReason();

const podYaml = `
apiVersion: v1
kind: Pod
metadata: {name: reader, namespace: default}
spec:
  nodeName: ${node}
  automountServiceAccountToken: false
  containers:
  - name: app
    image: registry.k8s.io/pause
    volumeMounts: [{name: token, mountPath: /var/run/secrets/tokens}]
  volumes:
  - name: token
    projected:
      sources:
      - serviceAccountToken: {path: token, expirationSeconds: 600, audience: vault}
`;

interface Claims {
  iat: number;
  exp: number;
  aud: string[];
  'kubernetes.io': { pod: { uid: string } };
}

const claimsOf = (token: string): Claims =>
  JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as Claims;

describe('service-account token refresh on a real kube-apiserver', { skip }, () => {
  const cluster = useKubeCluster([]);
  const { base, root } = skip === false ? hostSandbox('token') : { base: '', root: '' };
  const db = join(base, 'vole.db');
  const { ok } = cluster;
  let agent: AgentProcess | undefined;
  const eventually = <T>(what: string, probe: () => T | undefined | Promise<T | undefined>) =>
    waitFor(what, probe, { timeoutMs: 60_000, context: () => agent?.lines.join('\n') ?? '' });

  test('the projected token is renewed on its timer, atomically, as a new valid token', async () => {
    cluster.start(base);
    ok(['create', 'serviceaccount', 'default']);
    const agentKubeconfig = cluster.agentKubeconfig(node);
    const args = ['run', '--kubeconfig', agentKubeconfig, '--node', node, '--root', root];
    agent = startVole([...args, '--db', db], { env: { VOLE_TOKEN_AGE_MAX_MS: '3000' } });
    cluster.processes.add(agent);
    await agent.line(/vole agent on token-node: API/);
    ok(['apply', '-f', '-'], podYaml);
    await agent.line(/pod default\/reader: mounted \[/, 90_000);
    const uid = ok(['get', 'pod', 'reader', '-o', 'jsonpath={.metadata.uid}']).trim();
    const dir = join(root, 'pods', uid, 'volumes/kubernetes.io~projected/token');
    const first = readFileSync(join(dir, 'token'), 'utf8');
    const firstData = readlinkSync(join(dir, '..data'));
    assert.equal(
      readlinkSync(join(dir, 'token')),
      '..data/token',
      'the file is reached via ..data',
    );

    const second = await eventually('a new token in the file', () => {
      const now = readFileSync(join(dir, 'token'), 'utf8');
      return now !== first ? now : undefined;
    });
    assert.notEqual(readlinkSync(join(dir, '..data')), firstData, '..data was swapped');
    const [a, b] = [claimsOf(first), claimsOf(second)];
    assert.equal(b['kubernetes.io'].pod.uid, uid, 'the new token is bound to the same pod');
    assert.deepEqual(b.aud, ['vault']);
    assert.equal(b.exp - b.iat, 600);
    assert.ok(b.iat >= a.iat, 'issued no earlier than the first');
    const reviewAsked = JSON.stringify({
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token: second, audiences: ['vault'] },
    });
    const review = JSON.parse(ok(['create', '-o', 'json', '-f', '-'], reviewAsked)) as {
      status: { authenticated?: boolean; user?: { username: string } };
    };
    assert.equal(review.status.authenticated, true, 'the API server accepts the new token');
    assert.equal(review.status.user?.username, 'system:serviceaccount:default:default');

    ok(['delete', 'pod', 'reader', '--timeout=90s']);
    const pods = join(root, 'pods');
    await eventually('the pod volume unmounted', async () =>
      mountsUnder(await readMountTable(), pods).length === 0 ? true : undefined,
    );
    assert.equal(await agent.stop(), 143);
    agent = undefined;
    const exported = vole('export', '--db', db);
    assert.equal(exported.status, 0, exported.stderr);
    const due = exported.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; pod?: string })
      .filter((e) => e.type === 'TokensRefreshDue');
    assert.ok(due.length >= 1, 'the refresh timer is in the log');
    assert.ok(due.every((e) => e.pod === uid));
  });
});
