/**
 * The Kubernetes docs' storage examples (examples/kubernetes-docs, examples/tutorial-pv),
 * unchanged, applied with kubectl on a real kube-apiserver and kube-controller-manager,
 * with `vole run --kubeconfig` as the node (its own identity, system:node:docs-node). No
 * scheduler runs: the test binds each pod to vole's node with a Binding, as the scheduler
 * does. The objects the docs make with commands (`kubectl create secret generic …`) are
 * made with those commands. vole mounts each pod's volumes: the files, their contents and
 * modes are the kubelet's. Deleting the pods leaves nothing mounted.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ensureUnmounted, isMountPoint, tmpfs } from '../../src/host/mount.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { type AgentProcess, repo, startVole } from '../support/agent-process.js';
import { hostSandbox } from '../support/host.js';
import { eventually, useKubeCluster, kubeTestSkipReason } from '../support/kube.js';

const node = 'docs-node';
const docs = join(repo, 'examples/kubernetes-docs');

const skip = kubeTestSkipReason();

describe('the Kubernetes docs storage examples on vole', { skip, timeout: 600_000 }, () => {
  const cluster = useKubeCluster(['kube-controller-manager']);
  const { base, root } = skip === false ? hostSandbox('docs') : { base: '', root: '' };
  const { ok } = cluster;
  let agent: AgentProcess | undefined;
  const context = () => agent?.lines.join('\n') ?? '';

  before(async () => {
    cluster.start(base, { controllers: '*' });
    // The PV tutorial's hostPath is /mnt/data: a tmpfs of this mount namespace.
    assert.equal(await isMountPoint('/mnt'), false, '/mnt is free in this namespace');
    await tmpfs('/mnt');
    mkdirSync('/mnt/data');
    writeFileSync('/mnt/data/index.html', 'Hello from Kubernetes storage\n');
  });
  after(async () => {
    if (skip === false) await ensureUnmounted('/mnt').catch(() => undefined);
  });

  /** As the scheduler: the pod bound to vole's node (pods/binding). */
  function bind(pod: string, namespace = 'default'): void {
    const binding = {
      apiVersion: 'v1',
      kind: 'Binding',
      metadata: { name: pod },
      target: { apiVersion: 'v1', kind: 'Node', name: node },
    };
    const path = `/api/v1/namespaces/${namespace}/pods/${pod}/binding`;
    ok(['create', '--raw', path, '-f', '-'], JSON.stringify(binding));
  }

  /** The pod's volume directory of `plugin`, once vole said it mounted the pod. */
  async function volumeDir(pod: string, plugin: string, volume: string, namespace = 'default') {
    await agent!.line(new RegExp(`pod ${namespace}/${pod}: mounted \\[`), 90_000);
    const uid = ok(['-n', namespace, 'get', 'pod', pod, '-o', 'jsonpath={.metadata.uid}']).trim();
    return join(root, 'pods', uid, 'volumes', `kubernetes.io~${plugin}`, volume);
  }

  const read = (dir: string, file: string) => readFileSync(join(dir, file), 'utf8');
  const modeOf = (dir: string, file: string) => statSync(join(dir, file)).mode & 0o7777;

  test('emptyDir, configMap, secret, downwardAPI, projected and PV examples mount', async () => {
    const agentKubeconfig = cluster.agentKubeconfig(node);
    agent = startVole([
      ...['run', '--kubeconfig', agentKubeconfig, '--node', node, '--root', root],
      ...['--allocatable', 'cpu=2,memory=4Gi'],
    ]);
    cluster.processes.add(agent);
    await agent.line(/vole agent on docs-node: API/);
    const defaultServiceAccount = (namespace: string) =>
      eventually(`the default ServiceAccount of ${namespace}`, () =>
        cluster.kubectl(['-n', namespace, 'get', 'serviceaccount', 'default']).status === 0
          ? true
          : undefined,
      );
    await defaultServiceAccount('default');
    const apply = (file: string) => ok(['apply', '-f', join(docs, file)]);

    // Configure a Pod to Use a Volume for Storage: an emptyDir, 0777 as the kubelet makes it.
    apply('redis.yaml');
    bind('redis');
    const scratch = await volumeDir('redis', 'empty-dir', 'redis-storage');
    assert.equal(statSync(scratch).mode & 0o7777, 0o777);

    // Configure a Pod to Use a ConfigMap: each key a file, mode 0644.
    apply('configmap-multikeys.yaml');
    apply('pod-configmap-volume.yaml');
    bind('dapi-test-pod');
    const config = await volumeDir('dapi-test-pod', 'configmap', 'config-volume');
    assert.equal(read(config, 'SPECIAL_LEVEL'), 'very');
    assert.equal(read(config, 'SPECIAL_TYPE'), 'charm');
    assert.equal(modeOf(config, 'SPECIAL_LEVEL'), 0o644);

    // Distribute Credentials Securely Using Secrets.
    apply('secret.yaml');
    apply('secret-pod.yaml');
    bind('secret-test-pod');
    const secret = await volumeDir('secret-test-pod', 'secret', 'secret-volume');
    assert.equal(read(secret, 'username'), 'my-app');
    assert.equal(read(secret, 'password'), '39528$vdg7Jb');
    assert.equal(modeOf(secret, 'password'), 0o644);

    // Expose Pod Information to Containers Through Files: labels and annotations.
    apply('dapi-volume.yaml');
    bind('kubernetes-downwardapi-volume-example');
    const podinfo = await volumeDir(
      'kubernetes-downwardapi-volume-example',
      'downward-api',
      'podinfo',
    );
    assert.equal(
      read(podinfo, 'labels'),
      'cluster="test-cluster1"\nrack="rack-22"\nzone="us-est-coast"',
    );
    assert.match(read(podinfo, 'annotations'), /^build="two"\nbuilder="john-doe"\n/);

    // Configure a Pod to Use a Projected Volume: the docs' two secrets, from files.
    writeFileSync(join(base, 'username.txt'), 'admin');
    writeFileSync(join(base, 'password.txt'), '1f2d1e2e67df');
    ok(['create', 'secret', 'generic', 'user', `--from-file=${join(base, 'username.txt')}`]);
    ok(['create', 'secret', 'generic', 'pass', `--from-file=${join(base, 'password.txt')}`]);
    apply('projected.yaml');
    bind('test-projected-volume');
    const projected = await volumeDir('test-projected-volume', 'projected', 'all-in-one');
    assert.equal(read(projected, 'username.txt'), 'admin');
    assert.equal(read(projected, 'password.txt'), '1f2d1e2e67df');

    // Projected Volumes: the two examples named volume-test, each in a namespace of its own.
    for (const namespace of ['mixed', 'modes']) {
      ok(['create', 'namespace', namespace]);
      await defaultServiceAccount(namespace);
      const secrets = ['mysecret', '--from-literal=username=admin'];
      ok(['-n', namespace, 'create', 'secret', 'generic', ...secrets]);
    }
    ok(['-n', 'mixed', 'create', 'configmap', 'myconfigmap', '--from-literal=config=debug']);
    ok(['-n', 'modes', 'create', 'secret', 'generic', 'mysecret2', '--from-literal=password=s3']);
    ok(['-n', 'mixed', 'apply', '-f', join(docs, 'projected-secret-downwardapi-configmap.yaml')]);
    ok([
      '-n',
      'modes',
      'apply',
      '-f',
      join(docs, 'projected-secrets-nondefault-permission-mode.yaml'),
    ]);
    bind('volume-test', 'mixed');
    bind('volume-test', 'modes');
    const mixed = await volumeDir('volume-test', 'projected', 'all-in-one', 'mixed');
    assert.equal(read(mixed, 'my-group/my-username'), 'admin');
    assert.equal(read(mixed, 'my-group/my-config'), 'debug');
    assert.equal(read(mixed, 'labels'), '');
    assert.equal(read(mixed, 'cpu_limit'), '2', "no limit: the node's allocatable, in cores");
    const modes = await volumeDir('volume-test', 'projected', 'all-in-one', 'modes');
    assert.equal(modeOf(modes, 'my-group/my-password'), 0o777, 'mode 511');
    assert.equal(modeOf(modes, 'my-group/my-username'), 0o644);

    // Projected Volumes: a serviceAccountToken for audience "api", from the TokenRequest API.
    ok(['apply', '-f', join(docs, 'projected-service-account-token.yaml')]);
    bind('sa-token-test');
    const tokenDir = await volumeDir('sa-token-test', 'projected', 'token-vol');
    const token = read(tokenDir, 'token');
    const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'));
    assert.deepEqual(claims.aud, ['api']);
    assert.equal(claims.exp - claims.iat, 3600);

    // Configure a Pod to Use a PersistentVolume: Kubernetes binds the claim, vole mounts.
    for (const file of ['pv-volume.yaml', 'pv-claim.yaml', 'pv-pod.yaml'])
      ok(['apply', '-f', join(repo, 'examples/tutorial-pv', file)]);
    bind('task-pv-pod');
    const pv = await volumeDir('task-pv-pod', 'host-path', 'task-pv-volume');
    assert.equal(read(pv, 'index.html'), 'Hello from Kubernetes storage\n');

    const pods = join(root, 'pods');
    assert.equal(readdirSync(pods).length, 9, 'nine pods, each with its own directory');
    ok(['delete', 'pods', '--all', '--all-namespaces', '--timeout=90s']);
    await eventually(
      'every pod volume unmounted',
      async () => (mountsUnder(await readMountTable(), pods).length === 0 ? true : undefined),
      { context },
    );
  });
});
