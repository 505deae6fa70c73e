/**
 * Real pods through `vole run --once`, as root in a private mount namespace.
 *
 * The Kubernetes tutorial "Configure a Pod to Use a PersistentVolume for Storage", its
 * three manifests unchanged (examples/tutorial-pv), through `vole run --once`, as root in a
 * private mount namespace: the claim binds to the hostPath PV (ClaimBound in the log) and
 * nginx's volume is /mnt/data, bound into the pod's volume directory. /mnt is a tmpfs of
 * this namespace, so the machine's /mnt is never touched.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { openSqliteLog } from '../../src/agent/sqlite-log.js';
import { kubeletCore } from '../../src/engine/cores.js';
import { ensureUnmounted, isMountPoint, tmpfs } from '../../src/host/mount.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';

const skip = hostTestSkipReason();
const repo = join(import.meta.dirname, '../..');
const { base, root } = hostSandbox('tutorial');

after(async () => {
  if (skip === false) await ensureUnmounted('/mnt').catch(() => undefined);
});

const title = "host: the PersistentVolume tutorial mounts /mnt/data into nginx's volume";
test(title, { skip, timeout: 120_000 }, async () => {
  assert.equal(await isMountPoint('/mnt'), false, '/mnt is free in this namespace');
  await tmpfs('/mnt');
  mkdirSync('/mnt/data');
  writeFileSync('/mnt/data/index.html', 'Hello from Kubernetes storage\n');
  const db = join(base, 'vole.db');
  const run = spawnSync(
    process.execPath,
    [
      ...['--import', 'tsx', join(repo, 'src/cli/main.ts'), 'run'],
      ...['--manifests', join(repo, 'examples/tutorial-pv'), '--root', root, '--db', db],
      ...['--once', '--timeout', '60s'],
    ],
    { encoding: 'utf8' },
  );
  assert.equal(run.status, 0, run.stdout + run.stderr);
  // The pod has no metadata.uid: the agent gave it a fresh one, the only pod directory.
  const uids = readdirSync(join(root, 'pods'));
  assert.equal(uids.length, 1, `one pod directory: ${uids.join(' ')}`);
  const uid = uids[0]!;
  const dir = join(root, 'pods', uid, 'volumes', 'kubernetes.io~host-path', 'task-pv-volume');
  assert.ok(await isMountPoint(dir), `${dir} is a mount`);
  assert.equal(readFileSync(join(dir, 'index.html'), 'utf8'), 'Hello from Kubernetes storage\n');
  writeFileSync(join(dir, 'from-pod.txt'), 'written through the pod');
  assert.equal(readFileSync('/mnt/data/from-pod.txt', 'utf8'), 'written through the pod');
  const log = openSqliteLog(db, kubeletCore);
  try {
    const bound = [...log.readAll()].filter((e) => e.type === 'ClaimBound');
    assert.deepEqual(
      bound.map(
        (e) => e.type === 'ClaimBound' && [e.namespace, e.claim, e.volume, e.capacityBytes],
      ),
      [['default', 'task-pv-claim', 'task-pv-volume', 10 * 2 ** 30]],
    );
  } finally {
    log.sink.close();
  }
  await ensureUnmounted(dir);
});

const refused: Record<string, [string, RegExp]> = {
  'traversal.yaml': [
    'kind: Pod\nmetadata: {name: "evil/../../x", namespace: "../../kube-system"}\n' +
      'spec: {volumes: [{name: a, emptyDir: {}}]}\n',
    /metadata\.name: Invalid value: "evil\/\.\.\/\.\.\/x".*metadata\.namespace/,
  ],
  'nul.json': [
    JSON.stringify({ kind: 'Pod', metadata: { name: 'a\u0000b' }, spec: { volumes: [] } }),
    /Pod "default\/a\\u0000b" is invalid: metadata\.name/,
  ],
  'backstep.yaml': [
    'kind: Pod\nmetadata: {name: backstep}\n' +
      'spec: {volumes: [{name: a, emptyDir: {}}, {name: r, hostPath: {path: /srv/../r}}]}\n',
    /Pod "default\/backstep" is invalid: spec\.volumes\[1\]\.hostPath\.path/,
  ],
  'twice.yaml': [
    'kind: Pod\nmetadata: {name: twice}\n' +
      'spec: {volumes: [{name: a, emptyDir: {}}, {name: a, hostPath: {path: /srv}}]}\n',
    /Pod "default\/twice" is invalid: spec\.volumes\[1\]\.name: Duplicate value/,
  ],
  'unknown.yaml': [
    'kind: Pod\nmetadata: {name: unknown}\n' +
      'spec: {volumes: [{name: a, emptyDir: {}}, {name: b, fancyDisk: {}}]}\n',
    /Pod "default\/unknown" is invalid: spec\.volumes\[1\]: Required value: must specify a volume type/,
  ],
};

const refusal = 'host: vole run refuses each invalid pod whole, naming file, pod and field';
test(refusal, { skip, timeout: 120_000 }, async () => {
  const dir = join(base, 'refused');
  mkdirSync(dir);
  for (const [file, [text]] of Object.entries(refused)) writeFileSync(join(dir, file), text);
  const refusedRoot = join(base, 'refused-root');
  const run = spawnSync(
    process.execPath,
    [
      ...['--import', 'tsx', join(repo, 'src/cli/main.ts'), 'run'],
      ...['--manifests', dir, '--root', refusedRoot, '--db', join(base, 'refused.db')],
      ...['--once', '--timeout', '30s'],
    ],
    { encoding: 'utf8' },
  );
  // At start, any refused manifest refuses the start (exit 2) with every problem named.
  assert.equal(run.status, 2, run.stdout + run.stderr);
  const output = run.stdout + run.stderr;
  for (const [file, [, pattern]] of Object.entries(refused)) {
    const line = output.split('\n').find((l) => l.includes(join(dir, file))) ?? '';
    assert.match(line, pattern, file);
    assert.match(line, /refused whole/, file);
  }
  // Not one volume of them exists: nothing was mounted, no pod directory was made.
  assert.equal(existsSync(join(refusedRoot, 'pods')), false);
  assert.deepEqual(mountsUnder(await readMountTable(), refusedRoot), []);
});
