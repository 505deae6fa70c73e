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
import { InvalidPodError, VolumeManager } from '../../src/agent/volume-manager.js';
import { readManifestDir } from '../../src/sources/manifests.js';
import { validate } from '../../src/sources/validate.js';

const pod = (metadata: Record<string, unknown>, volumes: unknown[], extra = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata,
  spec: { volumes, ...extra },
});
const scratch = { name: 'scratch', emptyDir: {} };
const fields = (object: unknown) => validate(object).map((e) => e.field);

test('validate: a valid pod, PV, claim, ConfigMap and Secret have no errors', () => {
  const ok = pod({ name: 'task-pv-pod', namespace: 'default', labels: { app: 'web' } }, [
    { name: 'task-pv-storage', persistentVolumeClaim: { claimName: 'task-pv-claim' } },
    { name: 'conf', configMap: { name: 'web', items: [{ key: 'a', path: 'dir/a', mode: 0o400 }] } },
    { name: 'creds', secret: { secretName: 'web', defaultMode: 0o440, optional: true } },
    { name: 'info', downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] } },
    { name: 'cache', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } },
    { name: 'host', hostPath: { path: '/srv/data', type: 'DirectoryOrCreate' }, unknownField: 1 },
  ], { containers: [{ name: 'web', image: 'nginx', volumeMounts: [{ name: 'conf', mountPath: '/etc/web' }] }] });
  assert.deepEqual(validate(ok), []);
  assert.deepEqual(validate({ kind: 'PersistentVolume', metadata: { name: 'task-pv-volume' },
    spec: { storageClassName: 'manual', capacity: { storage: '10Gi' }, accessModes: ['ReadWriteOnce'], hostPath: { path: '/mnt/data' } } }), []);
  assert.deepEqual(validate({ kind: 'PersistentVolumeClaim', metadata: { name: 'task-pv-claim' },
    spec: { storageClassName: 'manual', accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '3Gi' } } } }), []);
  assert.deepEqual(validate({ kind: 'ConfigMap', metadata: { name: 'web' }, data: { 'index.html': 'hi' } }), []);
  assert.deepEqual(validate({ kind: 'Secret', metadata: { name: 'web' }, data: { token: 'c2VjcmV0' } }), []);
});

test('validate: names, namespaces and control characters', () => {
  assert.deepEqual(fields(pod({ name: 'evil/../../x', namespace: '../../kube-system' }, [scratch])), [
    'metadata.name',
    'metadata.namespace',
  ]);
  assert.deepEqual(fields(pod({ name: 'a\u0000b' }, [scratch])), ['metadata.name']);
  assert.deepEqual(fields(pod({ name: 'UPPER' }, [scratch])), ['metadata.name']);
  assert.deepEqual(fields(pod({ name: 'ok', labels: { 'bad key!': 'v' } }, [scratch])), ['metadata.labels']);
  assert.deepEqual(fields(pod({ name: 'ok' }, [{ name: 'h', hostPath: { path: '/srv/\u0007x' } }])), [
    'spec.volumes[0].hostPath.path',
  ]);
});

test('validate: volumes: unique names, exactly one source, hostPath without .., quantities', () => {
  assert.deepEqual(fields(pod({ name: 'p' }, [scratch, { name: 'scratch', emptyDir: {} }])), [
    'spec.volumes[1].name',
  ]);
  assert.deepEqual(fields(pod({ name: 'p' }, [{ name: 'x', madeUpType: {} }])), ['spec.volumes[0]']);
  assert.deepEqual(fields(pod({ name: 'p' }, [{ name: 'x', emptyDir: {}, hostPath: { path: '/a' } }])), [
    'spec.volumes[0].emptyDir',
  ]);
  assert.deepEqual(fields(pod({ name: 'p' }, [{ name: 'r', hostPath: { path: '/srv/../r' } }])), [
    'spec.volumes[0].hostPath.path',
  ]);
  assert.match(validate(pod({ name: 'p' }, [{ name: 'r', hostPath: { path: '/srv/../r' } }]))[0]!.message, /must not contain '\.\.'/);
  for (const sizeLimit of ['-1Gi', 'lots', '1.5.5Mi']) {
    assert.deepEqual(fields(pod({ name: 'p' }, [{ name: 'c', emptyDir: { sizeLimit } }])), [
      'spec.volumes[0].emptyDir.sizeLimit',
    ], sizeLimit);
  }
  assert.deepEqual(fields(pod({ name: 'p' }, [{ name: 'c', configMap: { name: 'm', items: [{ key: 'k', path: '../escape' }] } }])), [
    'spec.volumes[0].configMap.items[0].path',
  ]);
  assert.deepEqual(fields(pod({ name: 'p' }, [{ name: 'c', secret: { secretName: 's', defaultMode: 0o1777 } }])), [
    'spec.volumes[0].secret.defaultMode',
  ]);
  assert.deepEqual(
    fields(pod({ name: 'p' }, [scratch], { containers: [{ name: 'c', volumeMounts: [{ name: 'nope', mountPath: '/x' }] }] })),
    ['spec.containers[0].volumeMounts[0].name'],
  );
  assert.deepEqual(fields({ kind: 'PersistentVolumeClaim', metadata: { name: 'c' }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '-3Gi' } } } }), [
    'spec.resources[storage]',
  ]);
  assert.deepEqual(fields({ kind: 'Secret', metadata: { name: 's' }, data: { k: 'not base64!' } }), ['data[k]']);
});

const refusedPods: Record<string, string> = {
  'traversal.yaml': 'kind: Pod\nmetadata: {name: "evil/../../x", namespace: "../../kube-system"}\nspec: {volumes: [{name: a, emptyDir: {}}]}\n',
  'nul.json': JSON.stringify(pod({ name: 'nul\u0000pod' }, [scratch])),
  'hostpath.yaml': 'kind: Pod\nmetadata: {name: hp}\nspec: {volumes: [{name: a, emptyDir: {}}, {name: r, hostPath: {path: /srv/../r}}]}\n',
  'twice.yaml': 'kind: Pod\nmetadata: {name: twice}\nspec: {volumes: [{name: a, emptyDir: {}}, {name: a, hostPath: {path: /srv}}]}\n',
  'unknown.yaml': 'kind: Pod\nmetadata: {name: unknown}\nspec: {volumes: [{name: a, emptyDir: {}}, {name: b, fancyDisk: {size: 1}}]}\n',
};

test('manifests: each refused pod is refused whole, with file, pod and field named', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vole-validate-'));
  try {
    for (const [name, text] of Object.entries(refusedPods)) writeFileSync(join(dir, name), text);
    writeFileSync(join(dir, 'good.yaml'), 'kind: Pod\nmetadata: {name: good}\nspec: {volumes: [{name: a, emptyDir: {}}]}\n');
    const set = readManifestDir(dir);
    assert.deepEqual([...set.pods.values()].map((p) => p.metadata.name), ['good']);
    const expected: Record<string, RegExp> = {
      'traversal.yaml': /Pod "\.\.\/\.\.\/kube-system\/evil\/\.\.\/\.\.\/x" is invalid: metadata\.name: .*metadata\.namespace/,
      'nul.json': /Pod "default\/nul\\u0000pod" is invalid: metadata\.name/,
      'hostpath.yaml': /Pod "default\/hp" is invalid: spec\.volumes\[1\]\.hostPath\.path: Invalid value: "\/srv\/\.\.\/r": must not contain '\.\.'/,
      'twice.yaml': /Pod "default\/twice" is invalid: spec\.volumes\[1\]\.name: Duplicate value: "a"/,
      'unknown.yaml': /Pod "default\/unknown" is invalid: spec\.volumes\[1\]: Required value: must specify a volume type/,
    };
    for (const [file, pattern] of Object.entries(expected)) {
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
  assert.throws(
    () => vm.addPod({ metadata: { name: 'hp', namespace: 'default', uid: 'u1' },
      spec: { volumes: [{ name: 'r', hostPath: { path: '/srv/../r' } }] } }),
    (error: unknown) =>
      error instanceof InvalidPodError &&
      /Pod "default\/hp" is invalid: spec\.volumes\[0\]\.hostPath\.path/.test(error.message),
  );
  assert.equal(vm.world.seq, before);
  assert.equal(vm.world.pods.size, 0);
  vm.stop();
});
