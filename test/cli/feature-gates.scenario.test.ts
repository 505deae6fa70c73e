/**
 * `vole run --feature-gates`, as a user meets it (emptyDir volumes: directories, no
 * mounts). With EmptyDirVolumeMode off (the default) a pod's emptyDir.mode is dropped, the
 * agent says so once naming the pod and the volume, the log's pod has no mode and the
 * directory gets the kubelet's 0777; with it on, the directory gets the mode, the sticky
 * bit included. An unknown gate refuses the start.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { repo } from '../support/agent-process.js';
import type { VoleEvent } from '../../src/events/index.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-gates-cli-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const podYaml = `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, uid: uid-web}
spec:
  containers: [{name: app, image: nginx, volumeMounts: [{name: scratch, mountPath: /scratch}]}]
  volumes:
    - {name: scratch, emptyDir: {mode: 0o1770}}
`;

function vole(args: readonly string[]) {
  const r = spawnSync(
    process.execPath,
    ['--import', 'tsx', join(repo, 'src/cli/main.ts'), ...args],
    {
      encoding: 'utf8',
      timeout: 90_000,
    },
  );
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** `vole run --once` on a manifest directory holding the pod; its root and log. */
function runOnce(name: string, extra: readonly string[]) {
  const base = join(dir, name);
  const manifests = join(base, 'manifests');
  mkdirSync(manifests, { recursive: true });
  writeFileSync(join(manifests, 'pod.yaml'), podYaml);
  const root = join(base, 'root');
  const db = join(base, 'vole.db');
  const run = vole([
    ...['--log-level', 'warn', 'run', '--manifests', manifests, '--root', root, '--db', db],
    ...['--once', '--timeout', '60', ...extra],
  ]);
  const volumeDir = join(root, 'pods', 'uid-web', 'volumes', 'kubernetes.io~empty-dir', 'scratch');
  return { run, db, volumeDir };
}

function loggedPod(db: string) {
  const exported = vole(['export', '--db', db]);
  assert.equal(exported.status, 0, exported.stderr);
  const events = exported.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as VoleEvent);
  const upserted = events.filter((e) => e.type === 'PodUpserted');
  assert.equal(upserted.length, 1);
  return upserted[0]!.type === 'PodUpserted' ? upserted[0]!.pod : assert.fail();
}

const dropped =
  /pod default\/web volume scratch: emptyDir\.mode dropped, the EmptyDirVolumeMode feature gate is off/;

test('vole run: EmptyDirVolumeMode off, emptyDir.mode is dropped with one warning, the dir is 0777', () => {
  const { run, db, volumeDir } = runOnce('off', []);
  assert.equal(run.status, 0, run.stdout + run.stderr);
  assert.equal(run.stdout.split('\n').filter((l) => dropped.test(l)).length, 1, run.stdout);
  const warns = run.stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; pod?: string; volume?: string; msg: string })
    .filter((l) => dropped.test(l.msg));
  assert.deepEqual(
    warns.map((w) => [w.level, w.pod, w.volume]),
    [[40, 'default/web', 'scratch']],
  );
  assert.equal(statSync(volumeDir).mode & 0o7777, 0o777);
  assert.deepEqual(loggedPod(db).spec.volumes?.[0]?.emptyDir, {});
});

test('vole run --feature-gates EmptyDirVolumeMode=true: the dir gets the mode, sticky bit too', () => {
  const { run, db, volumeDir } = runOnce('on', ['--feature-gates', 'EmptyDirVolumeMode=true']);
  assert.equal(run.status, 0, run.stdout + run.stderr);
  assert.doesNotMatch(run.stdout + run.stderr, /dropped/);
  assert.equal(statSync(volumeDir).mode & 0o7777, 0o1770);
  assert.equal(loggedPod(db).spec.volumes?.[0]?.emptyDir?.mode, 0o1770);
});

test('vole run --feature-gates with an unknown gate refuses the start (exit 2)', () => {
  const { run } = runOnce('unknown', ['--feature-gates', 'EmptyDirVolumeNode=true']);
  assert.equal(run.status, 2);
  assert.match(
    run.stderr,
    /unrecognized feature gate "EmptyDirVolumeNode" \(vole knows: EmptyDirVolumeMode\)/,
  );
});
