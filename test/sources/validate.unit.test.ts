/**
 * Validation as strict as the API server's: each pod the issue names is refused with the
 * field at fault, a manifest directory refuses such a pod whole (naming file, pod and
 * field), and the library's addPod refuses it with nothing appended.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { VolumeManager } from '../../src/agent/volume-manager.js';
import { InvalidPodError } from '../../src/agent/volume-manager-seams.js';
import { type ManifestChanges, readManifestDir } from '../../src/sources/manifests.js';
import { ManifestWatcher } from '../../src/sources/watch.js';
import { validate } from '../../src/sources/validate.js';

const pod = (metadata: Record<string, unknown>, volumes: unknown[], extra = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata,
  spec: { volumes, ...extra },
});
const scratch = { name: 'scratch', emptyDir: {} };
const fields = (object: unknown) => validate(object).map((e) => e.field);
const onePod = (volume: unknown, extra = {}) => fields(pod({ name: 'p' }, [volume], extra));

test('validate: a valid pod, PV, claim, ConfigMap and Secret have no errors', () => {
  const items = [{ key: 'a', path: 'dir/a', mode: 0o400 }];
  const labels = { path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } };
  const volumes = [
    { name: 'task-pv-storage', persistentVolumeClaim: { claimName: 'task-pv-claim' } },
    { name: 'conf', configMap: { name: 'web', items } },
    { name: 'creds', secret: { secretName: 'web', defaultMode: 0o440, optional: true } },
    { name: 'info', downwardAPI: { items: [labels] } },
    { name: 'cache', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } },
    { name: 'host', hostPath: { path: '/srv/data', type: 'DirectoryOrCreate' }, unknownField: 1 },
  ];
  const containers = [
    { name: 'web', image: 'nginx', volumeMounts: [{ name: 'conf', mountPath: '/etc/web' }] },
  ];
  const meta = { name: 'task-pv-pod', namespace: 'default', labels: { app: 'web' } };
  assert.deepEqual(validate(pod(meta, volumes, { containers })), []);
  const pvSpec = {
    storageClassName: 'manual',
    capacity: { storage: '10Gi' },
    accessModes: ['ReadWriteOnce'],
    hostPath: { path: '/mnt/data' },
  };
  const pv = { kind: 'PersistentVolume', metadata: { name: 'task-pv-volume' }, spec: pvSpec };
  assert.deepEqual(validate(pv), []);
  const claimSpec = {
    storageClassName: 'manual',
    accessModes: ['ReadWriteOnce'],
    resources: { requests: { storage: '3Gi' } },
  };
  const claim = { kind: 'PersistentVolumeClaim', metadata: { name: 'c' }, spec: claimSpec };
  assert.deepEqual(validate(claim), []);
  const data = { 'index.html': 'hi' };
  assert.deepEqual(validate({ kind: 'ConfigMap', metadata: { name: 'web' }, data }), []);
  const secret = { kind: 'Secret', metadata: { name: 'web' }, data: { token: 'c2VjcmV0' } };
  assert.deepEqual(validate(secret), []);
});

test('validate: names, namespaces and control characters', () => {
  const traversal = pod({ name: 'evil/../../x', namespace: '../../kube-system' }, [scratch]);
  assert.deepEqual(fields(traversal), ['metadata.name', 'metadata.namespace']);
  assert.deepEqual(fields(pod({ name: 'a\u0000b' }, [scratch])), ['metadata.name']);
  assert.deepEqual(fields(pod({ name: 'UPPER' }, [scratch])), ['metadata.name']);
  const badLabel = pod({ name: 'ok', labels: { 'bad key!': 'v' } }, [scratch]);
  assert.deepEqual(fields(badLabel), ['metadata.labels']);
  assert.deepEqual(onePod({ name: 'h', hostPath: { path: '/srv/\u0007x' } }), [
    'spec.volumes[0].hostPath.path',
  ]);
});

test('validate: volumes: unique names, exactly one source, hostPath without .., quantities', () => {
  const twice = fields(pod({ name: 'p' }, [scratch, { name: 'scratch', emptyDir: {} }]));
  assert.deepEqual(twice, ['spec.volumes[1].name']);
  assert.deepEqual(onePod({ name: 'x', madeUpType: {} }), ['spec.volumes[0]']);
  assert.deepEqual(onePod({ name: 'x', emptyDir: {}, hostPath: { path: '/a' } }), [
    'spec.volumes[0].emptyDir',
  ]);
  const backstep = { name: 'r', hostPath: { path: '/srv/../r' } };
  assert.deepEqual(onePod(backstep), ['spec.volumes[0].hostPath.path']);
  assert.match(validate(pod({ name: 'p' }, [backstep]))[0]!.message, /must not contain '\.\.'/);
  for (const sizeLimit of ['-1Gi', 'lots', '1.5.5Mi']) {
    const field = onePod({ name: 'c', emptyDir: { sizeLimit } });
    assert.deepEqual(field, ['spec.volumes[0].emptyDir.sizeLimit'], sizeLimit);
  }
  const escape = { name: 'c', configMap: { name: 'm', items: [{ key: 'k', path: '../escape' }] } };
  assert.deepEqual(onePod(escape), ['spec.volumes[0].configMap.items[0].path']);
  const wideMode = { name: 'c', secret: { secretName: 's', defaultMode: 0o1777 } };
  assert.deepEqual(onePod(wideMode), ['spec.volumes[0].secret.defaultMode']);
  const containers = [{ name: 'c', volumeMounts: [{ name: 'nope', mountPath: '/x' }] }];
  assert.deepEqual(onePod(scratch, { containers }), ['spec.containers[0].volumeMounts[0].name']);
  const negative = {
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'c' },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '-3Gi' } } },
  };
  assert.deepEqual(fields(negative), ['spec.resources[storage]']);
  const notBase64 = { kind: 'Secret', metadata: { name: 's' }, data: { k: 'not base64!' } };
  assert.deepEqual(fields(notBase64), ['data[k]']);
});

const refusedPods: Record<string, string> = {
  'traversal.yaml':
    'kind: Pod\nmetadata: {name: "evil/../../x", namespace: "../../kube-system"}\n' +
    'spec: {volumes: [{name: a, emptyDir: {}}]}\n',
  'nul.json': JSON.stringify(pod({ name: 'nul\u0000pod' }, [scratch])),
  'hostpath.yaml':
    'kind: Pod\nmetadata: {name: hp}\n' +
    'spec: {volumes: [{name: a, emptyDir: {}}, {name: r, hostPath: {path: /srv/../r}}]}\n',
  'twice.yaml':
    'kind: Pod\nmetadata: {name: twice}\n' +
    'spec: {volumes: [{name: a, emptyDir: {}}, {name: a, hostPath: {path: /srv}}]}\n',
  'unknown.yaml':
    'kind: Pod\nmetadata: {name: unknown}\n' +
    'spec: {volumes: [{name: a, emptyDir: {}}, {name: b, fancyDisk: {size: 1}}]}\n',
};

const refusals: Record<string, RegExp> = {
  'traversal.yaml':
    /Pod "\.\.\/\.\.\/kube-system\/evil\/\.\.\/\.\.\/x" is invalid: metadata\.name: .*metadata\.namespace/,
  'nul.json': /Pod "default\/nul\\u0000pod" is invalid: metadata\.name/,
  'hostpath.yaml':
    /Pod "default\/hp" is invalid: spec\.volumes\[1\]\.hostPath\.path: Invalid value: "\/srv\/\.\.\/r": must not contain '\.\.'/,
  'twice.yaml': /Pod "default\/twice" is invalid: spec\.volumes\[1\]\.name: Duplicate value: "a"/,
  'unknown.yaml':
    /Pod "default\/unknown" is invalid: spec\.volumes\[1\]: Required value: must specify a volume type/,
};

test('manifests: each refused pod is refused whole, with file, pod and field named', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vole-validate-'));
  try {
    for (const [name, text] of Object.entries(refusedPods)) writeFileSync(join(dir, name), text);
    const good = 'kind: Pod\nmetadata: {name: good}\nspec: {volumes: [{name: a, emptyDir: {}}]}\n';
    writeFileSync(join(dir, 'good.yaml'), good);
    const set = readManifestDir(dir);
    assert.deepEqual(
      [...set.pods.values()].map((p) => p.metadata.name),
      ['good'],
    );
    for (const [file, pattern] of Object.entries(refusals)) {
      const problems = set.problems.filter((p) => p.file === join(dir, file));
      assert.equal(problems.length, 1, file);
      assert.match(problems[0]!.message, pattern, file);
      assert.match(problems[0]!.message, /refused whole/, file);
    }
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test('addPod: an invalid pod throws InvalidPodError naming pod and field; nothing is appended', () => {
  const vm = VolumeManager.create({ node: 'node-1', plugins: [] });
  vm.start();
  const before = vm.world.seq;
  const invalid = {
    metadata: { name: 'hp', namespace: 'default', uid: 'u1' },
    spec: { volumes: [{ name: 'r', hostPath: { path: '/srv/../r' } }] },
  };
  assert.throws(
    () => vm.inputs.addPod(invalid),
    (error: unknown) =>
      error instanceof InvalidPodError &&
      /Pod "default\/hp" is invalid: spec\.volumes\[0\]\.hostPath\.path/.test(error.message),
  );
  assert.equal(vm.world.seq, before);
  assert.equal(vm.world.pods.size, 0);
  vm.stop();
});

test('watch: a running pod whose manifest turns invalid is kept as it was, not torn down', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vole-validate-'));
  try {
    const good = 'kind: Pod\nmetadata: {name: web}\nspec: {volumes: [{name: a, emptyDir: {}}]}\n';
    writeFileSync(join(dir, 'web.yaml'), good);
    const changes: ManifestChanges[] = [];
    const problems: string[] = [];
    const watcher = new ManifestWatcher({
      dir,
      onChanges: (c) => changes.push(c),
      onProblems: (p) => problems.push(...p.map((x) => x.message)),
    });
    watcher.sync();
    assert.deepEqual(
      changes.map((c) => c.upsertPods.length),
      [1],
    );
    writeFileSync(join(dir, 'web.yaml'), good.replace('{name: a, emptyDir: {}}', '{name: a}'));
    watcher.sync();
    assert.match(problems.join('\n'), /Pod "default\/web" is invalid: spec\.volumes\[0\]/);
    assert.equal(changes.length, 1, 'no change: the pod stays as it was');
    writeFileSync(
      join(dir, 'web.yaml'),
      good.replace('emptyDir: {}', 'emptyDir: {medium: Memory}'),
    );
    watcher.sync();
    assert.equal(changes.length, 2);
    assert.equal(changes[1]!.upsertPods[0]!.spec.volumes?.[0]?.emptyDir?.medium, 'Memory');
    rmSync(join(dir, 'web.yaml'));
    watcher.sync();
    assert.equal(changes[2]!.removePods.length, 1, 'a deleted file still removes its pod');
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test('validate: a StorageClass provisioner is a qualified name, as the API server checks it', () => {
  const storageClass = (provisioner: unknown) => ({
    apiVersion: 'storage.k8s.io/v1',
    kind: 'StorageClass',
    metadata: { name: 'sc' },
    provisioner,
  });
  assert.deepEqual(fields(storageClass('kubernetes.io/no-provisioner')), []);
  assert.deepEqual(fields(storageClass('disk.csi.vole.dev')), []);
  assert.deepEqual(fields(storageClass('Example.COM/Fast')), [], 'lowercased before the check');
  assert.deepEqual(fields(storageClass('a/b/c')), ['provisioner']);
  assert.deepEqual(fields(storageClass('-bad')), ['provisioner']);
  assert.deepEqual(fields(storageClass('')), ['provisioner']);
});
