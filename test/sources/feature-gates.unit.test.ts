/**
 * Feature gates as Kubernetes spells them, and the alpha field they guard: with
 * EmptyDirVolumeMode off, a manifest pod's emptyDir.mode is dropped before validation (the
 * API server's dropDisabledFields), noted once by the watcher; with it on, the field is
 * kept, validated (0 to 01777) and the agent's plugin sets it
 * (test/cli/feature-gates.scenario.test.ts).
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import {
  defaultFeatureGates,
  dropDisabledPodFields,
  parseFeatureGates,
} from '../../src/sources/feature-gates.js';
import { type ManifestNotice, readManifestDir } from '../../src/sources/manifests.js';
import { ManifestWatcher } from '../../src/sources/watch.js';
import { validate } from '../../src/sources/validate.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-gates-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const on = parseFeatureGates('EmptyDirVolumeMode=true');

const podYaml = (mode: string) => `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, uid: uid-web}
spec:
  volumes:
    - {name: scratch, emptyDir: {mode: ${mode}}}
    - {name: plain, emptyDir: {}}
`;

function manifests(name: string, mode: string): string {
  const at = join(dir, name);
  rmSync(at, { recursive: true, force: true });
  mkdirSync(at, { recursive: true });
  writeFileSync(join(at, 'pod.yaml'), podYaml(mode));
  return at;
}

test('feature gates: parsed as the kubelet takes them; unknown gates and bad values refused', () => {
  assert.deepEqual(parseFeatureGates(undefined), { EmptyDirVolumeMode: false });
  assert.deepEqual(defaultFeatureGates, { EmptyDirVolumeMode: false });
  assert.deepEqual(on, { EmptyDirVolumeMode: true });
  assert.deepEqual(parseFeatureGates(' EmptyDirVolumeMode=false '), { EmptyDirVolumeMode: false });
  assert.throws(
    () => parseFeatureGates('Nope=true'),
    /unrecognized feature gate "Nope".*EmptyDirVolumeMode/,
  );
  assert.throws(
    () => parseFeatureGates('EmptyDirVolumeMode=yes'),
    /EmptyDirVolumeMode=true or EmptyDirVolumeMode=false/,
  );
  assert.throws(() => parseFeatureGates('EmptyDirVolumeMode'), /EmptyDirVolumeMode=true or/);
});

test('feature gates: off, emptyDir.mode is dropped from the pod (only it), and named', () => {
  const pod = {
    kind: 'Pod',
    metadata: { name: 'p' },
    spec: {
      volumes: [
        { name: 'a', emptyDir: { mode: 0o700, medium: 'Memory' } },
        { name: 'b', emptyDir: {} },
        { name: 'c', hostPath: { path: '/tmp' } },
      ],
    },
  };
  const off = dropDisabledPodFields(pod, defaultFeatureGates);
  assert.deepEqual(off.dropped, [
    { volume: 'a', field: 'emptyDir.mode', gate: 'EmptyDirVolumeMode' },
  ]);
  assert.deepEqual((off.doc as typeof pod).spec.volumes, [
    { name: 'a', emptyDir: { medium: 'Memory' } },
    { name: 'b', emptyDir: {} },
    { name: 'c', hostPath: { path: '/tmp' } },
  ]);
  assert.equal(pod.spec.volumes[0]!.emptyDir!.mode, 0o700, 'the caller’s document is not changed');
  const kept = dropDisabledPodFields(pod, on);
  assert.equal(kept.doc, pod);
  assert.deepEqual(kept.dropped, []);
});

test('validate: emptyDir.mode between 0 and 01777, as the API server checks it', () => {
  const withMode = (mode: unknown) =>
    validate({
      kind: 'Pod',
      metadata: { name: 'p' },
      spec: { volumes: [{ name: 'v', emptyDir: { mode } }] },
    });
  assert.deepEqual(withMode(0o1777), []);
  assert.deepEqual(withMode(0), []);
  for (const bad of [0o2000, -1, 1.5, '0755']) {
    const errors = withMode(bad);
    assert.deepEqual(
      errors.map((e) => e.field),
      ['spec.volumes[0].emptyDir.mode'],
    );
    assert.match(
      errors[0]!.message,
      /^Invalid value: .+: must be a number between 0 and 01777 \(octal\), both inclusive$/,
    );
  }
});

test('manifests: with the gate off the mode is dropped before validation; on, kept and validated', () => {
  const off = readManifestDir(manifests('off', '0o7777'));
  assert.deepEqual(
    off.problems,
    [],
    'an out-of-range mode is dropped, not refused, with the gate off',
  );
  const pod = off.pods.get('uid-web')!;
  assert.deepEqual(pod.spec.volumes?.[0]?.emptyDir, {});
  assert.deepEqual(
    off.notices?.map((n) => [n.pod, n.volume]),
    [['default/web', 'scratch']],
  );
  assert.match(
    off.notices![0]!.message,
    /emptyDir\.mode dropped, the EmptyDirVolumeMode feature gate is off/,
  );

  const bad = readManifestDir(manifests('on-bad', '0o7777'), {}, on);
  assert.equal(bad.pods.size, 0);
  assert.match(bad.problems[0]!.message, /spec\.volumes\[0\]\.emptyDir\.mode.*between 0 and 01777/);

  const good = readManifestDir(manifests('on', '0o1770'), {}, on);
  assert.deepEqual(good.problems, []);
  assert.deepEqual(good.notices, []);
  assert.equal(good.pods.get('uid-web')!.spec.volumes?.[0]?.emptyDir?.mode, 0o1770);
});

test('watcher: a dropped field is told once, and again only after the pod went without it', () => {
  const at = manifests('watch', '0o700');
  const told: ManifestNotice[][] = [];
  const watcher = new ManifestWatcher({
    dir: at,
    onChanges: () => undefined,
    onProblems: (p) => assert.fail(JSON.stringify(p)),
    onNotices: (n) => told.push(n),
  });
  watcher.sync();
  watcher.sync();
  assert.deepEqual(
    told.map((n) => n.map((x) => `${x.pod} ${x.volume}`)),
    [['default/web scratch']],
  );
  writeFileSync(join(at, 'pod.yaml'), podYaml('null').replace('{mode: null}', '{}'));
  watcher.sync();
  writeFileSync(join(at, 'pod.yaml'), podYaml('0o700'));
  watcher.sync();
  assert.equal(told.length, 2);
});
