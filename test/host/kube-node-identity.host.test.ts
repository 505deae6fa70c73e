/**
 * A node's own identity on a real kube-apiserver started as a cluster's is
 * (scripts/kube-up.sh: --authorization-mode Node,RBAC, --enable-admission-plugins
 * NodeRestriction, client certificates of the cluster CA): `--node-kubeconfig node-1`
 * mints a certificate with CN system:node:node-1 and O system:nodes, and with it node-1
 * reads and writes only what the Node authorizer (plugin/pkg/auth/authorizer/node/
 * node_authorizer.go) and NodeRestriction (plugin/pkg/admission/noderestriction) give a
 * kubelet. Each refusal is paired with the same request on node-1's own objects, which
 * succeeds, so a refusal for any other reason (a bad certificate, a missing object)
 * fails the test.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { KubeApiError, KubeHttp } from '../../src/kube/http.js';
import { startVole } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { kubeTestSkipReason, useKubeCluster } from '../support/kube.js';

const skip = kubeTestSkipReason();

describe("a node's own identity on a real kube-apiserver", { skip }, () => {
  const cluster = useKubeCluster([]);
  const { base, root } =
    skip === false ? hostSandbox('kube-node-identity') : { base: '', root: '' };
  const { ok, kubectl } = cluster;

  before(() => cluster.start(base));

  test('node-1 reads only its own pods objects and writes only its own Node and pods', async () => {
    const node1 = cluster.nodeKubeconfig('node-1');
    const asNode1 = (args: readonly string[], input?: string) =>
      kubectl(args, { kubeconfig: node1, ...(input === undefined ? {} : { input }) });
    const refused = (args: readonly string[], why: RegExp) => {
      const run = asNode1(args);
      assert.notEqual(run.status, 0, `node-1 may ${args.join(' ')}: ${run.stdout}`);
      assert.match(run.stderr, /Error from server \(Forbidden\)/, run.stderr); // HTTP 403
      assert.match(run.stderr, why, run.stderr);
    };
    assert.equal(
      asNode1(['auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}']).stdout,
      'system:node:node-1',
    );

    ok(['create', 'serviceaccount', 'default']);
    for (const node of ['node-1', 'node-2'])
      ok(
        ['apply', '-f', '-'],
        `{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "${node}"}}`,
      );
    ok(['create', 'secret', 'generic', 's1', '--from-literal=k=one']);
    ok(['create', 'secret', 'generic', 's2', '--from-literal=k=two']);
    ok(['apply', '-f', '-'], podYaml('p1', 'node-1', 's1'));
    ok(['apply', '-f', '-'], podYaml('p2', 'node-2', 's2'));

    // The Secret of its own pod, once the authorizer's graph has the pod.
    await cluster.wait('node-1 to read s1, the Secret of its pod p1', () =>
      asNode1(['get', 'secret', 's1', '-o', 'name']).status === 0 ? true : undefined,
    );
    refused(['get', 'secret', 's2'], /no relationship found between node 'node-1' and this object/);
    refused(['get', 'secrets'], /User "system:node:node-1" cannot list resource "secrets"/);

    assert.equal(asNode1(['get', 'node', 'node-1', '-o', 'name']).stdout.trim(), 'node/node-1');
    refused(['get', 'node', 'node-2'], /node 'node-1' cannot read 'node-2', only its own Node/);

    // The status subresource patched as the kubelet patches it (kubectl patch would get
    // nodes/status first, which no node may).
    const http = KubeHttp.fromFile(node1);
    const patchStatus = (node: string) =>
      http.patch(`/api/v1/nodes/${node}/status`, { status: { volumesInUse: [] } }, 'strategic');
    await patchStatus('node-1');
    const refusal = await patchStatus('node-2').then(
      () => undefined,
      (error: unknown) => error,
    );
    assert.ok(refusal instanceof KubeApiError, `node-1 may patch node-2's status: ${refusal}`);
    assert.equal(refusal.statusCode, 403);
    assert.match(refusal.message, /node "node-1" is not allowed to modify node "node-2"/);

    refused(
      ['delete', 'pod', 'p2', '--wait=false'],
      /node "node-1" can only delete pods with spec\.nodeName set to itself/,
    );
    const deleted = asNode1(['delete', 'pod', 'p1', '--wait=false', '--grace-period=0', '--force']);
    assert.equal(deleted.status, 0, deleted.stderr);
    assert.equal(ok(['get', 'pod', 'p2', '-o', 'jsonpath={.spec.nodeName}']), 'node-2');
  });

  test('vole run as node-1 mounts its pod with those credentials, never asks for s2, never gets 403', async () => {
    ok(['apply', '-f', '-'], podYaml('p3', 'node-1', 's1'));
    const uid = ok(['get', 'pod', 'p3', '-o', 'jsonpath={.metadata.uid}']).trim();
    const auditLog = join(cluster.dir(), 'audit.log');
    // The requests before vole starts (the first test's, as node-1 too) are not vole's.
    const before = readFileSync(auditLog, 'utf8').trim().split('\n').length;
    const kubeconfig = cluster.agentKubeconfig('node-1');
    const agent = cluster.started(
      startVole([
        ...['run', '--kubeconfig', kubeconfig, '--node', 'node-1', '--root', root],
        ...['--db', join(base, 'vole.db'), '--no-controller-attach-detach'],
      ]),
      'agent',
    );
    await agent.line(/pod default\/p3: mounted \[/, 90_000);
    const file = join(root, 'pods', uid, 'volumes/kubernetes.io~secret/sec/k');
    assert.ok(existsSync(file), `${file} is missing:\n${agent.lines.join('\n')}`);
    assert.equal(readFileSync(file, 'utf8'), 'one');
    ok(['delete', 'pod', 'p3', '--timeout=60s']);
    assert.equal(await agent.stop(), 143);

    // What vole asked for as node-1 (kubectl's own requests as node-1 left out).
    const asked = readFileSync(auditLog, 'utf8')
      .trim()
      .split('\n')
      .slice(before)
      .map((line) => JSON.parse(line) as AuditEvent)
      .filter((e) => e.user.username === 'system:node:node-1')
      .filter((e) => !(e.userAgent ?? '').startsWith('kubectl'));
    assert.ok(asked.length > 10, `vole's requests are in the audit log (${asked.length})`);
    const about = (e: AuditEvent) => `${e.verb} ${e.requestURI} → ${e.responseStatus?.code}`;
    assert.deepEqual(
      asked.filter((e) => e.objectRef?.name === 's2').map(about),
      [],
      'vole never asks for the Secret of a node-2 pod',
    );
    // A read of p3's own Secret may come before the authorizer's graph has p3 (it is
    // retried, as the kubelet's is); any other refusal would be a request beyond its grant.
    assert.deepEqual(
      asked.filter((e) => e.responseStatus?.code === 403 && e.objectRef?.name !== 's1').map(about),
      [],
      'vole asks only for what the Node authorizer grants',
    );
    assert.deepEqual(
      asked
        .filter((e) => e.verb === 'list' || e.verb === 'watch')
        .filter(
          (e) => !/[?&]fieldSelector=(metadata\.name|spec\.nodeName)(%3D|=)/.test(e.requestURI),
        )
        .filter((e) => e.objectRef?.resource !== 'csidrivers')
        .map(about),
      [],
      'every list and watch is of one object by name, or of its own pods (CSIDrivers aside)',
    );
  });
});

/** One request of the API server's audit log (scripts/kube-up.sh: level Metadata). */
interface AuditEvent {
  readonly user: { readonly username: string };
  readonly userAgent?: string;
  readonly verb: string;
  readonly requestURI: string;
  readonly objectRef?: { readonly resource?: string; readonly name?: string };
  readonly responseStatus?: { readonly code?: number };
}

function podYaml(name: string, node: string, secret: string): string {
  return `
apiVersion: v1
kind: Pod
metadata: {name: ${name}, namespace: default}
spec:
  nodeName: ${node}
  automountServiceAccountToken: false
  containers:
  - {name: app, image: registry.k8s.io/pause, volumeMounts: [{name: sec, mountPath: /secret}]}
  volumes: [{name: sec, secret: {secretName: ${secret}}}]
`;
}
