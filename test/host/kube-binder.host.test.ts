/**
 * `vole controller --kubeconfig --controllers attachdetach,persistentvolume-binder` in place
 * of kube-controller-manager's PersistentVolume binder, on a real kube-apiserver
 * (scripts/kube-up.sh) beside kube-controller-manager run with
 * `--controllers=*,-persistentvolume-binder-controller,-attachdetach,-nodelifecycle`.
 * While vole's controller is not running a claim stays Pending (nobody else binds); once
 * it runs, the claim is bound to the smallest PV that fits, written as pv_controller.go
 * bind writes it: the PV's claimRef (uid and resourceVersion) and bound-by-controller
 * annotation, its phase Bound; the claim's volumeName, bound-by-controller and
 * bind-completed annotations, its status (Bound, the PV's access modes and capacity). The
 * controller runs with its least-privilege account (deploy/*-rbac.yaml).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type AgentProcess, repo, startVole } from '../support/agent-process.js';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';
import { peersBinDir } from '../support/peers.js';

const kubeUp = join(repo, 'scripts/kube-up.sh');
const kubeDown = join(repo, 'scripts/kube-down.sh');

function skipReason(): string | false {
  const host = hostTestSkipReason();
  if (host !== false) return host;
  if (!existsSync(kubeUp)) return 'scripts/kube-up.sh is not here';
  return false;
}
const skip = skipReason();

interface Meta {
  name: string;
  uid?: string;
  resourceVersion?: string;
  annotations?: Record<string, string>;
}
interface Pvc {
  metadata: Meta;
  spec: { volumeName?: string };
  status?: { phase?: string; accessModes?: string[]; capacity?: Record<string, string> };
}
interface Pv {
  metadata: Meta;
  spec: { claimRef?: Record<string, string> };
  status?: { phase?: string };
}

const pv = (name: string, storage: string) => ({
  apiVersion: 'v1',
  kind: 'PersistentVolume',
  metadata: { name },
  spec: {
    capacity: { storage },
    accessModes: ['ReadWriteOnce'],
    storageClassName: '',
    hostPath: { path: `/srv/${name}` },
  },
});
const pvc = (name: string) => ({
  apiVersion: 'v1',
  kind: 'PersistentVolumeClaim',
  metadata: { name, namespace: 'default' },
  spec: {
    storageClassName: '',
    accessModes: ['ReadWriteOnce'],
    resources: { requests: { storage: '1Gi' } },
  },
});

describe('vole controller --kubeconfig with the persistentvolume-binder', { skip }, () => {
  let bin = '';
  // Registered before the sandbox's own hook, so the control plane is ended (by the PIDs in
  // kubeDir) before the sandbox removes kubeDir.
  after(async () => {
    await controller?.stop();
    if (existsSync(join(kubeDir, 'pids')))
      spawnSync('bash', [kubeDown, kubeDir], { stdio: 'inherit' });
  });
  const { base } = skip === false ? hostSandbox('kubebinder') : { base: '' };
  const kubeDir = join(base, 'kube');
  const kubeconfig = join(kubeDir, 'kubeconfig');
  const controllerKubeconfig = join(base, 'controller.kubeconfig');
  let controller: AgentProcess | undefined;

  const kubectl = (args: readonly string[], input?: string) => {
    const run = spawnSync(join(bin, 'kubectl'), ['--kubeconfig', kubeconfig, ...args], {
      encoding: 'utf8',
      input,
      timeout: 60_000,
    });
    assert.equal(run.status, 0, `kubectl ${args.join(' ')}: ${run.stderr}`);
    return run.stdout;
  };
  const apply = (...objects: object[]) =>
    kubectl(
      ['apply', '-f', '-'],
      JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }),
    );
  const get = <T>(...args: string[]): T => JSON.parse(kubectl(['get', ...args, '-o', 'json'])) as T;

  function controllerAccount(): void {
    kubectl(['apply', '-f', join(repo, 'deploy/attach-detach-controller-rbac.yaml')]);
    kubectl(['apply', '-f', join(repo, 'deploy/pv-binder-rbac.yaml')]);
    const token = kubectl(['-n', 'kube-system', 'create', 'token', 'vole-attach-detach']).trim();
    const cluster = (field: string) =>
      kubectl(['config', 'view', '--raw', '-o', `jsonpath={.clusters[0].cluster.${field}}`]);
    writeFileSync(
      controllerKubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        `clusters: [{name: vole, cluster: {server: "${cluster('server')}", ` +
          `certificate-authority: "${cluster('certificate-authority')}"}}]`,
        `users: [{name: controller, user: {token: "${token}"}}]`,
        'contexts: [{name: vole, context: {cluster: vole, user: controller}}]',
        'current-context: vole',
        '',
      ].join('\n'),
    );
  }

  before(() => {
    bin = peersBinDir(['etcd', 'kube-apiserver', 'kubectl', 'kube-controller-manager']);
    const controllers = '*,-persistentvolume-binder-controller,-attachdetach,-nodelifecycle';
    const args = [kubeUp, kubeDir, '--with-controller-manager', '--controllers', controllers];
    const up = spawnSync('bash', args, {
      encoding: 'utf8',
      env: { ...process.env, VOLE_PEERS_BIN: bin },
      timeout: 180_000,
    });
    assert.equal(up.status, 0, `kube-up.sh: ${up.stderr}`);
    controllerAccount();
  });

  test(
    'a claim no controller binds stays Pending; vole binds it as the PV controller does',
    { timeout: 120_000 },
    async () => {
      apply(pv('pv-big', '5Gi'), pv('pv-small', '2Gi'), pvc('data'));
      await new Promise((resolve) => setTimeout(resolve, 4_000));
      assert.equal(
        get<Pvc>('pvc', 'data').status?.phase,
        'Pending',
        "kube-controller-manager's binder is off: nobody binds it",
      );
      controller = startVole([
        'controller',
        '--kubeconfig',
        controllerKubeconfig,
        '--controllers',
        'attachdetach,persistentvolume-binder',
        '--root',
        join(base, 'c1'),
        '--identity',
        'c1',
        '--lease-duration',
        '4s',
      ]);
      const deadline = Date.now() + 60_000;
      let claim = get<Pvc>('pvc', 'data');
      while (claim.status?.phase !== 'Bound') {
        assert.ok(Date.now() < deadline, `the claim bound\n${controller.lines.join('\n')}`);
        await new Promise((resolve) => setTimeout(resolve, 300));
        claim = get<Pvc>('pvc', 'data');
      }
      assert.equal(claim.spec.volumeName, 'pv-small', 'the smallest PV that fits');
      assert.equal(claim.metadata.annotations?.['pv.kubernetes.io/bind-completed'], 'yes');
      assert.equal(claim.metadata.annotations?.['pv.kubernetes.io/bound-by-controller'], 'yes');
      assert.deepEqual(claim.status?.accessModes, ['ReadWriteOnce']);
      assert.deepEqual(claim.status?.capacity, { storage: '2Gi' });
      const volume = get<Pv>('pv', 'pv-small');
      assert.equal(volume.status?.phase, 'Bound');
      assert.equal(volume.metadata.annotations?.['pv.kubernetes.io/bound-by-controller'], 'yes');
      assert.equal(volume.spec.claimRef?.['uid'], claim.metadata.uid);
      assert.equal(volume.spec.claimRef?.['name'], 'data');
      assert.equal(volume.spec.claimRef?.['kind'], 'PersistentVolumeClaim');
      assert.equal(get<Pv>('pv', 'pv-big').status?.phase, 'Available');
    },
  );
});
