/**
 * The Kubernetes tutorial "Configure a Pod to Use a PersistentVolume for Storage", its
 * three manifests unchanged (examples/tutorial-pv), through `vole run --once`, as root in a
 * private mount namespace: the claim binds to the hostPath PV (ClaimBound in the log) and
 * nginx's volume is /mnt/data, bound into the pod's volume directory. /mnt is a tmpfs of
 * this namespace, so the machine's /mnt is never touched.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { openSqliteLog } from '../../src/agent/sqlite-log.js';
import { kubeletCore } from '../../src/engine/cores.js';
import { ensureUnmounted, isMountPoint, tmpfs } from '../../src/host/mount.js';
import { derivedPodUid } from '../../src/sources/manifests.js';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';

const skip = hostTestSkipReason();
const repo = join(import.meta.dirname, '../..');
const { base, root } = hostSandbox('tutorial');

after(async () => {
  if (skip === false) await ensureUnmounted('/mnt').catch(() => undefined);
});

test('host: the PersistentVolume tutorial mounts /mnt/data into nginx\'s volume', { skip, timeout: 120_000 }, async () => {
  assert.equal(await isMountPoint('/mnt'), false, '/mnt is free in this namespace');
  await tmpfs('/mnt');
  mkdirSync('/mnt/data');
  writeFileSync('/mnt/data/index.html', 'Hello from Kubernetes storage\n');
  const db = join(base, 'vole.db');
  const run = spawnSync(
    process.execPath,
    ['--import', 'tsx', join(repo, 'src/cli/main.ts'), 'run', '--manifests', join(repo, 'examples/tutorial-pv'),
      '--root', root, '--db', db, '--once', '--timeout', '60s'],
    { encoding: 'utf8' },
  );
  assert.equal(run.status, 0, run.stdout + run.stderr);
  const uid = derivedPodUid('default', 'task-pv-pod');
  const dir = join(root, 'pods', uid, 'volumes', 'kubernetes.io~host-path', 'task-pv-volume');
  assert.ok(await isMountPoint(dir), `${dir} is a mount`);
  assert.equal(readFileSync(join(dir, 'index.html'), 'utf8'), 'Hello from Kubernetes storage\n');
  writeFileSync(join(dir, 'from-pod.txt'), 'written through the pod');
  assert.equal(readFileSync('/mnt/data/from-pod.txt', 'utf8'), 'written through the pod');
  const log = openSqliteLog(db, kubeletCore);
  try {
    const bound = [...log.readAll()].filter((e) => e.type === 'ClaimBound');
    assert.deepEqual(
      bound.map((e) => e.type === 'ClaimBound' && [e.namespace, e.claim, e.volume, e.capacityBytes]),
      [['default', 'task-pv-claim', 'task-pv-volume', 10 * 2 ** 30]],
    );
  } finally {
    log.sink.close();
  }
  await ensureUnmounted(dir);
});
