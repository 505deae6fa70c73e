/**
 * A Secret and a ConfigMap deleted after the last pod reading them never reach the next
 * pod, on a real kube-apiserver (scripts/kube-up.sh) with `vole run --kubeconfig` as the
 * node and pods bound to it through the pods/binding subresource, as the scheduler binds.
 *
 * Pod a reads Secret s and ConfigMap c; a is deleted, then s and c. Pod b, bound after,
 * names both: as the kubelet, vole mounts nothing of them, writes FailedMount Events with
 * the kubelet's words (`secret "s" not found`, `configmap "c" not found`), and `vole why`
 * says b waits for them. Created again, they are mounted with their new data.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { type AgentProcess, startVole, vole } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { kubeTestSkipReason, useKubeCluster } from '../support/kube.js';

const node = 'vole-node';
const skip = kubeTestSkipReason();

describe('a revoked Secret on a real kube-apiserver', { skip }, () => {
  const cluster = useKubeCluster([]);
  const { base, root } = skip === false ? hostSandbox('kube-revoked') : { base: '', root: '' };
  const db = join(base, 'vole.db');
  const { ok, json } = cluster;

  before(() => cluster.start(base));

  /** A pod with no node, bound to ours as kube-scheduler binds (POST pods/NAME/binding). */
  const createBoundPod = (name: string) => {
    ok(['apply', '-f', '-'], podYaml(name));
    const binding = JSON.stringify({
      apiVersion: 'v1',
      kind: 'Binding',
      metadata: { name, namespace: 'default' },
      target: { apiVersion: 'v1', kind: 'Node', name: node },
    });
    ok(['create', '--raw', `/api/v1/namespaces/default/pods/${name}/binding`, '-f', '-'], binding);
    return ok(['get', 'pod', name, '-o', 'jsonpath={.metadata.uid}']).trim();
  };
  const failedMounts = (pod: string) =>
    json<{ items: { reason: string; message: string; source: { component: string } }[] }>([
      'get',
      'events',
      '--field-selector',
      `involvedObject.name=${pod}`,
    ]).items.filter((e) => e.reason === 'FailedMount');

  test('pod b is not mounted with the data of the deleted s and c', async () => {
    ok(['create', 'serviceaccount', 'default']);
    ok(['create', 'secret', 'generic', 's', '--from-literal=password=old']);
    ok(['create', 'configmap', 'c', '--from-literal=mode=old']);
    const kubeconfig = cluster.agentKubeconfig(node);
    const agentArgs = ['run', '--kubeconfig', kubeconfig, '--node', node, '--root', root];
    const agent: AgentProcess = cluster.started(
      startVole([...agentArgs, '--db', db, '--no-controller-attach-detach']),
      'agent',
    );
    await agent.line(/vole agent on vole-node: API https:\/\/127\.0\.0\.1:\d+/);

    const uidA = createBoundPod('a');
    await agent.line(/pod default\/a: mounted \[/, 90_000);
    const volumesA = join(root, 'pods', uidA, 'volumes');
    assert.equal(readFileSync(join(volumesA, 'kubernetes.io~secret/sec/password'), 'utf8'), 'old');
    assert.equal(readFileSync(join(volumesA, 'kubernetes.io~configmap/cfg/mode'), 'utf8'), 'old');

    // kubectl delete waits until the pod is gone: vole removes it once its volumes are.
    ok(['delete', 'pod', 'a', '--timeout=60s']);
    ok(['delete', 'secret', 's']);
    ok(['delete', 'configmap', 'c']);

    const uidB = createBoundPod('b');
    const events = await cluster.wait('FailedMount Events on b for both volumes', () => {
      const found = failedMounts('b');
      const sec = found.find((e) => e.message.includes('volume "sec"'));
      const cfg = found.find((e) => e.message.includes('volume "cfg"'));
      return sec !== undefined && cfg !== undefined ? { sec, cfg } : undefined;
    });
    assert.equal(events.sec.source.component, 'kubelet');
    assert.match(
      events.sec.message,
      /^MountVolume\.SetUp failed for volume "sec" : secret "s" not found/,
    );
    assert.match(
      events.cfg.message,
      /^MountVolume\.SetUp failed for volume "cfg" : configmap "c" not found/,
    );
    const volumesB = join(root, 'pods', uidB, 'volumes');
    assert.ok(!existsSync(join(volumesB, 'kubernetes.io~secret/sec/password')), 'no s in b');
    assert.ok(!existsSync(join(volumesB, 'kubernetes.io~configmap/cfg/mode')), 'no c in b');
    assert.deepEqual(mountsUnder(await readMountTable(), join(root, 'pods', uidB)), []);
    assert.ok(!agent.lines.some((l) => l.includes('pod default/b: mounted')), 'b not mounted');

    // Between retries `vole why` names what b waits on; a snapshot taken while a retry
    // runs says "runs setUp" with the same error, so read it until it is between retries.
    const why = await cluster.wait('vole why names the missing Secret and ConfigMap', () => {
      const out = vole('why', 'default/b', '--db', db);
      assert.equal(out.status, 0, out.stderr);
      const waits =
        /sec .*: waits on Secret default\/s since seq \d+/.test(out.stdout) &&
        /cfg .*: waits on ConfigMap default\/c since seq \d+/.test(out.stdout);
      return waits ? out.stdout : undefined;
    });
    assert.match(why, /2 of 2 volume\(s\) not ready/);
    assert.match(why, /secret "s" not found/);

    // Created again, they reach b through its watches: mounted with the new data.
    ok(['create', 'secret', 'generic', 's', '--from-literal=password=new']);
    ok(['create', 'configmap', 'c', '--from-literal=mode=new']);
    await agent.line(/pod default\/b: mounted \[/, 90_000);
    assert.equal(readFileSync(join(volumesB, 'kubernetes.io~secret/sec/password'), 'utf8'), 'new');
    assert.equal(readFileSync(join(volumesB, 'kubernetes.io~configmap/cfg/mode'), 'utf8'), 'new');

    ok(['delete', 'pod', 'b', '--timeout=60s']);
    assert.deepEqual(mountsUnder(await readMountTable(), join(root, 'pods')), []);
    assert.equal(await agent.stop(), 143);
  });
});

function podYaml(name: string): string {
  return `
apiVersion: v1
kind: Pod
metadata: {name: ${name}, namespace: default}
spec:
  automountServiceAccountToken: false
  containers:
  - name: app
    image: registry.k8s.io/pause
    volumeMounts:
    - {name: sec, mountPath: /secret}
    - {name: cfg, mountPath: /config}
  volumes:
  - {name: sec, secret: {secretName: s}}
  - {name: cfg, configMap: {name: c}}
`;
}
