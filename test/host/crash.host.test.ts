/**
 * The real agent with real plugins, killed with SIGKILL at random points and restarted.
 * After every kill the log opens and verifies; after the last restart every pod is
 * mounted; after the pods are deleted nothing is left (mounts, loop devices, directories).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { listLoops, detachLoopForImage } from '../../src/host/loop.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { ensureUnmounted } from '../../src/host/mount.js';
import { hostTestSkipReason } from '../support/host.js';

const skip = hostTestSkipReason();
const repo = join(import.meta.dirname, '../..');
const base = mkdtempSync(join(tmpdir(), 'vole-crash-'));
const root = join(base, 'root');
const db = join(base, 'vole.db');
const manifests = join(base, 'manifests');
const kills = Number(process.env.VOLE_CRASH_KILLS ?? 50);

after(async () => {
  for (const m of mountsUnder(await readMountTable(), base).reverse())
    await ensureUnmounted(m.mountPoint).catch(() => undefined);
  for (const loop of await listLoops())
    if (loop.backFile.startsWith(base))
      await detachLoopForImage(loop.backFile).catch(() => undefined);
  rmSync(base, { recursive: true, force: true });
  rmSync('/tmp/vole-demo-host-logs', { recursive: true, force: true });
});

function agentArgs(extra: string[] = []) {
  return [
    '--import',
    'tsx',
    join(repo, 'src/cli/main.ts'),
    'run',
    '--manifests',
    manifests,
    '--root',
    root,
    '--db',
    db,
    ...extra,
  ];
}

function vole(...args: string[]) {
  return spawnSync(process.execPath, ['--import', 'tsx', join(repo, 'src/cli/main.ts'), ...args], {
    encoding: 'utf8',
  });
}

/** A deterministic PRNG so a failing run can be repeated (seed printed on failure). */
function prng(seed: number) {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s ^ (s >>> 15), 2246822507) + 0x6d2b79f5) >>> 0) / 2 ** 32;
}

test(
  `host: the agent killed ${kills} times at random points converges and leaks nothing`,
  { skip, timeout: 600_000 },
  async () => {
    mkdirSync(manifests, { recursive: true });
    cpSync(join(repo, 'examples/manifests'), manifests, { recursive: true });
    const seed = Number(process.env.VOLE_CRASH_SEED ?? Date.now() % 100_000);
    const random = prng(seed);
    for (let i = 0; i < kills; i++) {
      // Alternate between bringing the pods up and tearing them down, so kills land in both.
      const wantPods = i % 3 !== 2;
      rmSync(manifests, { recursive: true, force: true });
      mkdirSync(manifests);
      if (wantPods) cpSync(join(repo, 'examples/manifests'), manifests, { recursive: true });
      const child: ChildProcess = spawn(process.execPath, agentArgs(), {
        stdio: ['ignore', 'pipe', 'ignore'],
      });
      // Kill at a random point after the agent opened its log (its first line), up to ~0.4 s:
      // the window in which it attaches, formats, mounts, or tears down.
      await new Promise((resolve) => child.stdout!.once('data', resolve));
      child.stdout!.resume();
      const delayMs = Math.floor(random() * 400);
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
      const verify = vole('verify', '--db', db);
      assert.equal(
        verify.status,
        0,
        `seed ${seed}, kill ${i} after ${delayMs} ms: the log must verify\n${verify.stdout}${verify.stderr}`,
      );
    }
    cpSync(join(repo, 'examples/manifests'), manifests, { recursive: true });
    const up = spawnSync(process.execPath, agentArgs(['--once', '--timeout', '120']), {
      encoding: 'utf8',
    });
    assert.equal(
      up.status,
      0,
      `seed ${seed}: settles with the pods mounted\n${up.stdout}${up.stderr}`,
    );
    const table = await readMountTable();
    assert.ok(
      table.some((m) => m.mountPoint.endsWith('/volumes/disk.vole.dev/pv-web-data')),
      'the disk is mounted in the pod',
    );

    rmSync(manifests, { recursive: true, force: true });
    mkdirSync(manifests);
    const down = spawnSync(process.execPath, agentArgs(['--once', '--timeout', '120']), {
      encoding: 'utf8',
    });
    assert.equal(down.status, 0, `seed ${seed}: tears down\n${down.stdout}${down.stderr}`);
    assert.deepEqual(
      mountsUnder(await readMountTable(), base).map((m) => m.mountPoint),
      [],
      `seed ${seed}: no mounts left`,
    );
    assert.deepEqual(
      (await listLoops()).filter((l) => l.backFile.startsWith(base)),
      [],
      `seed ${seed}: no loop devices left`,
    );
    assert.deepEqual(readdirSync(join(root, 'pods')), [], `seed ${seed}: no pod directories left`);
    assert.equal(vole('verify', '--db', db).status, 0);
  },
);
