/**
 * scripts/kube-up.sh starts a real etcd + kube-apiserver + kube-controller-manager (without
 * its attach/detach controller) on loopback, which kubectl uses through the kubeconfig it
 * writes (RBAC on, admin token); scripts/kube-down.sh ends exactly the processes it recorded.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { hostTestSkipReason } from '../support/host.js';
import { peerBin, peersBinDir } from '../support/peers.js';
import { eventually } from '../support/vole-procs.js';

const repoRoot = new URL('../..', import.meta.url).pathname;
const skip = hostTestSkipReason();
const upTimeoutMs = 5 * 60_000;

function sh(cmd: string, args: string[], env: NodeJS.ProcessEnv = {}) {
  const run = spawnSync(cmd, args, {
    encoding: 'utf8',
    timeout: upTimeoutMs,
    env: { ...process.env, ...env },
  });
  return { status: run.status, stdout: run.stdout ?? '', stderr: run.stderr ?? '' };
}

function readPids(dir: string): Map<string, number> {
  const pids = new Map<string, number>();
  for (const line of readFileSync(join(dir, 'pids'), 'utf8').split('\n')) {
    const [name, pid] = line.split(' ');
    if (name !== undefined && pid !== undefined) pids.set(name, Number(pid));
  }
  return pids;
}

function running(pid: number): boolean {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return !/^State:\s+Z/m.test(status);
  } catch {
    return false;
  }
}

const storageClass = `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: vole-test
provisioner: disk.csi.vole.dev
volumeBindingMode: WaitForFirstConsumer
`;

test('kube-up starts a control plane kubectl can use, kube-down ends it', { skip }, async (t) => {
  const binDir = peersBinDir(['etcd', 'kube-apiserver', 'kube-controller-manager', 'kubectl']);
  const dir = mkdtempSync(join(tmpdir(), 'vole-kube-up-'));
  let pids = new Map<string, number>();
  t.after(() => {
    if (existsSync(join(dir, 'pids'))) sh('bash', [join(repoRoot, 'scripts/kube-down.sh'), dir]);
    for (const pid of pids.values()) if (running(pid)) process.kill(pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  const upArgs = [dir, '--with-controller-manager', '--controllers', '*,-attachdetach'];
  const up = sh('bash', [join(repoRoot, 'scripts/kube-up.sh'), ...upArgs], {
    VOLE_PEERS_BIN: binDir,
  });
  assert.equal(up.status, 0, `kube-up failed:\n${up.stderr}`);
  assert.equal(up.stdout.trim().split('\n').pop(), join(dir, 'kubeconfig'));
  pids = readPids(dir);
  assert.deepEqual([...pids.keys()], ['etcd', 'kube-apiserver', 'kube-controller-manager']);
  for (const [name, pid] of pids) assert.ok(running(pid), `${name} (pid ${pid}) is not running`);
  // --controllers reaches kube-controller-manager: its attach/detach controller stays off.
  // /healthz answers before it holds its lease and starts (or skips) the controllers.
  const disabled = /controller is disabled" controller="persistentvolume-attach-detach-controller"/;
  const kcmLog = () => readFileSync(join(dir, 'kube-controller-manager.log'), 'utf8');
  await eventually(() => disabled.test(kcmLog()), 'the disabled line', 60_000, kcmLog);
  assert.match(kcmLog(), disabled);

  const kubectl = (...args: string[]) =>
    sh(peerBin('kubectl'), ['--kubeconfig', join(dir, 'kubeconfig'), ...args]);
  const ns = kubectl('get', 'ns', '-o', 'name');
  assert.equal(ns.status, 0, ns.stderr);
  assert.match(ns.stdout, /^namespace\/kube-system$/m);
  assert.match(ns.stdout, /^namespace\/default$/m);

  writeFileSync(join(dir, 'sc.yaml'), storageClass);
  const apply = kubectl('apply', '-f', join(dir, 'sc.yaml'));
  assert.equal(apply.status, 0, apply.stderr);
  const sc = kubectl('get', 'storageclass', 'vole-test', '-o', 'jsonpath={.provisioner}');
  assert.equal(sc.stdout, 'disk.csi.vole.dev');
  // An unknown token is refused, not let in as an anonymous admin.
  const intruder = kubectl('--token', 'not-a-token', 'get', 'ns');
  assert.notEqual(intruder.status, 0);
  // A service account's token (TokenRequest: the signing key works) is let in, but RBAC
  // grants it nothing: the ground for least-privilege tests.
  assert.equal(kubectl('create', 'serviceaccount', 'nobody', '-n', 'default').status, 0);
  const token = kubectl('create', 'token', 'nobody', '-n', 'default');
  assert.equal(token.status, 0, token.stderr);
  const denied = kubectl('--token', token.stdout.trim(), 'get', 'ns');
  assert.match(denied.stderr, /"system:serviceaccount:default:nobody" cannot list/);

  const down = sh('bash', [join(repoRoot, 'scripts/kube-down.sh'), dir]);
  assert.equal(down.status, 0, down.stderr);
  for (const [name, pid] of pids) assert.ok(!running(pid), `${name} (pid ${pid}) still runs`);
  assert.ok(!existsSync(join(dir, 'pids')), 'kube-down leaves no pids file behind');
});

const scheduledPod = `apiVersion: v1
kind: ConfigMap
metadata: {name: greeting, namespace: default}
data: {hello.txt: hello from the scheduler}
---
apiVersion: v1
kind: Pod
metadata: {name: placed, namespace: default}
spec:
  automountServiceAccountToken: false
  containers: [{name: app, image: busybox, volumeMounts: [{name: greeting, mountPath: /g}]}]
  volumes: [{name: greeting, configMap: {name: greeting}}]
`;

test(
  'kube-up --with-scheduler --hollow-nodes: the scheduler places a pod on a hollow kubelet, which writes its ConfigMap under its root dir; kube-down removes the roots',
  { skip },
  async (t) => {
    const names = ['etcd', 'kube-apiserver', 'kubectl', 'kube-controller-manager'];
    names.push('kube-scheduler', 'kubemark');
    const binDir = peersBinDir(names);
    const dir = mkdtempSync(join(tmpdir(), 'vole-kube-hollow-'));
    let pids = new Map<string, number>();
    t.after(() => {
      if (existsSync(join(dir, 'pids'))) sh('bash', [join(repoRoot, 'scripts/kube-down.sh'), dir]);
      for (const pid of pids.values()) if (running(pid)) process.kill(pid, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    });

    // kube-controller-manager's node lifecycle controller lifts the not-ready taint the API
    // server puts on a new Node once it is Ready; its serviceaccount controller makes the
    // namespace's default ServiceAccount a pod needs.
    const kcm = ['--with-controller-manager', '--controllers', '*,-attachdetach'];
    const upArgs = [dir, ...kcm, '--with-scheduler', '--hollow-nodes', 'node-k1,node-k2'];
    const up = sh('bash', [join(repoRoot, 'scripts/kube-up.sh'), ...upArgs], {
      VOLE_PEERS_BIN: binDir,
    });
    assert.equal(up.status, 0, `kube-up failed:\n${up.stderr}`);
    pids = readPids(dir);
    assert.deepEqual(
      [...pids.keys()],
      [
        ...['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'],
        ...['hollow-node-k1', 'hollow-node-k2'],
      ],
    );
    const roots = new Map(
      readFileSync(join(dir, 'hollow-nodes'), 'utf8')
        .trim()
        .split('\n')
        .map((line) => line.split(' ') as [string, string]),
    );
    assert.deepEqual([...roots.keys()], ['node-k1', 'node-k2']);
    for (const [name, root] of roots) {
      assert.match(root, /^\/tmp\/hollow-kubelet\.\d+$/, `${name}'s root is kubemark's`);
      assert.ok(existsSync(root), `${name}'s root ${root} exists`);
      assert.match(up.stderr, new RegExp(`hollow node ${name}: root dir ${root}`));
    }

    const kubectl = (...args: string[]) =>
      sh(join(binDir, 'kubectl'), ['--kubeconfig', join(dir, 'kubeconfig'), ...args]);
    await eventually(
      () => kubectl('get', 'serviceaccount', 'default').status === 0,
      'the default ServiceAccount',
      60_000,
    );
    writeFileSync(join(dir, 'pod.yaml'), scheduledPod);
    const apply = kubectl('apply', '-f', join(dir, 'pod.yaml'));
    assert.equal(apply.status, 0, apply.stderr);
    const field = (path: string) =>
      kubectl('get', 'pod', 'placed', '-o', `jsonpath={${path}}`).stdout;
    await eventually(() => field('.status.phase') === 'Running', 'the pod Running', 90_000);
    const node = field('.spec.nodeName');
    assert.ok(roots.has(node), `the scheduler placed it on a hollow node, not on '${node}'`);
    const uid = field('.metadata.uid');
    const file = join(roots.get(node)!, 'pods', uid, 'volumes/kubernetes.io~configmap/greeting');
    assert.equal(readFileSync(join(file, 'hello.txt'), 'utf8'), 'hello from the scheduler');

    const down = sh('bash', [join(repoRoot, 'scripts/kube-down.sh'), dir]);
    assert.equal(down.status, 0, down.stderr);
    for (const [name, pid] of pids) assert.ok(!running(pid), `${name} (pid ${pid}) still runs`);
    for (const [name, root] of roots) assert.ok(!existsSync(root), `${name}'s root removed`);
  },
);
