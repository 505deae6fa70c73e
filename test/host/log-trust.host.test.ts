/**
 * Trusting the log on a real host, through the CLI: `--once` exits as soon as it settles;
 * a full disk under the log blocks the agent (nothing touches the host before its
 * OperationStarted is durable) until space returns; an agent finds and cleans up what its
 * log does not know (orphans).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ensureUnmounted } from '../../src/host/mount.js';
import { hostSandbox, hostTestSkipReason, until } from '../support/host.js';
import { vole } from '../support/agent-process.js';

const skip = hostTestSkipReason();
const repo = join(import.meta.dirname, '../..');
const { base } = skip === false ? hostSandbox('trust') : { base: '' };
const cli = ['--import', 'tsx', join(repo, 'src/cli/main.ts')];
const children = new Set<ChildProcess>();
after(() => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, 'SIGKILL');
});

/** Runs `vole …` to its end, stamping each stdout line with the time it arrived. */
/** `vole run` with its manifests, root and log, then `extra`. */
const agent = (manifests: string, root: string, db: string, ...extra: string[]) => [
  'run',
  '--manifests',
  manifests,
  '--root',
  root,
  '--db',
  db,
  ...extra,
];

interface TimedRun {
  code: number | null;
  /** Each stdout line with the time (performance.now()) it arrived. */
  lines: [number, string][];
  exitMs: number;
  stderr: string;
}

function timedRun(...args: string[]): Promise<TimedRun> {
  const child = spawn(process.execPath, [...cli, ...args], {
    cwd: repo,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  const lines: [number, string][] = [];
  let stderr = '';
  let partial = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const parts = (partial + chunk.toString()).split('\n');
    partial = parts.pop()!;
    for (const line of parts) lines.push([performance.now(), line]);
  });
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) =>
    child.once('close', (code) => resolve({ code, lines, exitMs: performance.now(), stderr })),
  );
}

function emptyDirPods(dir: string, count: number): void {
  mkdirSync(dir, { recursive: true });
  for (let i = 1; i <= count; i++) {
    writeFileSync(
      join(dir, `p${i}.yaml`),
      `apiVersion: v1\nkind: Pod\nmetadata: {name: p${i}, namespace: default, uid: uid-p${i}}\n` +
        'spec:\n  volumes:\n    - {name: scratch, emptyDir: {}}\n',
    );
  }
}

const once = ['--once', '--timeout', '60'];

const onceTitle = 'host: run --once exits within 1 s of printing "settled"';

test(onceTitle, { skip, timeout: 120_000 }, async () => {
  const root = join(base, 'once-root');
  const db = join(base, 'once.db');
  const manifests = join(repo, 'examples/manifests');
  const up = await timedRun(...agent(manifests, root, db, ...once));
  assert.equal(up.code, 0, up.stderr);
  const settled = up.lines.find(([, line]) => line.includes('settled:'));
  assert.ok(settled, up.lines.map(([, l]) => l).join('\n'));
  const lingerMs = up.exitMs - settled[0];
  assert.ok(lingerMs < 1_000, `exited ${lingerMs.toFixed(0)} ms after "settled"`);

  const empty = join(base, 'no-pods');
  mkdirSync(empty, { recursive: true });
  const down = await timedRun(...agent(empty, root, db, ...once));
  assert.equal(down.code, 0, down.stderr);
  const gone = down.lines.find(([, line]) => line.includes('settled:'));
  assert.ok(gone && down.exitMs - gone[0] < 1_000, 'the teardown run exits at once too');
});

/** Pods whose scratch volume exists on the host, and pods with a durable setUp CallStarted. */
function setUpOnHost(root: string): Set<string> {
  const pods = join(root, 'pods');
  if (!existsSync(pods)) return new Set();
  return new Set(
    readdirSync(pods).filter((uid) =>
      existsSync(join(pods, uid, 'volumes', 'kubernetes.io~empty-dir', 'scratch')),
    ),
  );
}

function setUpStartedInLog(db: string): Set<string> {
  const r = vole('export', '--db', db);
  assert.equal(r.status, 0, r.stderr);
  const podOfOp = new Map<string, string>();
  const started = new Set<string>();
  for (const line of r.stdout.trim().split('\n')) {
    const event = JSON.parse(line) as { type: string; opId?: string; pod?: string; call?: string };
    if (event.type === 'OperationStarted' && event.pod !== undefined)
      podOfOp.set(event.opId!, event.pod);
    if (event.type === 'CallStarted' && event.call === 'setUp')
      started.add(podOfOp.get(event.opId!)!);
  }
  return started;
}

const fullDiskTitle =
  'host: a full disk under the log blocks the agent, which says so and resumes when space returns';

test(fullDiskTitle, { skip, timeout: 180_000 }, async () => {
  const manifests = join(base, 'full-manifests');
  emptyDirPods(manifests, 300);
  const logDir = join(base, 'full-log');
  mkdirSync(logDir);
  assert.equal(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', logDir]).status, 0);
  after(() => ensureUnmounted(logDir).catch(() => undefined));
  const db = join(logDir, 'vole.db');
  const root = join(base, 'full-root');
  const child = spawn(
    process.execPath,
    [...cli, ...agent(manifests, root, db, '--once', '--timeout', '150')],
    { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.add(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exit = new Promise<number | null>((resolve) => child.once('close', resolve));

  await until(() => out.includes('cannot be written'), 'the agent to say its log is full', 60_000);
  const said =
    `log ${db} cannot be written \\(SQLITE_FULL: .*` +
    'free space on its filesystem: \\d+ bytes\\)';
  assert.match(out, new RegExp(`${said}: starting no operations`));
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  // While blocked: every volume set up on the host has its setUp call durable in the log.
  const onHost = setUpOnHost(root);
  const inLog = setUpStartedInLog(db);
  for (const uid of onHost)
    assert.ok(inLog.has(uid), `pod ${uid}'s volume exists but its call is not in the log`);
  assert.ok(onHost.size < 300, `blocked before the end (${onHost.size} set up)`);
  assert.equal(child.exitCode, null, 'still running, waiting for space');

  assert.equal(spawnSync('mount', ['-o', 'remount,size=16m', logDir]).status, 0);
  assert.equal(await exit, 0, out + err);
  assert.match(out, /written again after [\d.]+ s \(\d+ event\(s\)\): resuming operations/);
  assert.match(out, /settled: 300 pod\(s\) mounted/);
  assert.doesNotMatch(err, /\n\s+at /, 'no stack trace');
  const verify = vole('verify', '--db', db);
  assert.equal(verify.status, 0, verify.stdout + verify.stderr);
  assert.equal(setUpOnHost(root).size, 300);
  assert.ok(readFileSync(db).length > 256 * 1024, 'the log grew past the first size');
});

interface Report {
  type: string;
  reason?: string;
  pod?: string;
  volume?: string;
  message?: string;
}

function reports(db: string): Report[] {
  const r = vole('export', '--db', db);
  assert.equal(r.status, 0, r.stderr);
  return r.stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Report)
    .filter((e) => e.type === 'ReportRaised' && e.reason?.startsWith('Orphan') === true);
}

const mountPoints = () =>
  spawnSync('findmnt', ['-rn', '-o', 'TARGET'], { encoding: 'utf8' }).stdout.split('\n');
const loopsOver = (dir: string) =>
  spawnSync('losetup', ['-l', '-n', '-O', 'BACK-FILE'], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter((line) => line.trim().startsWith(dir));

const orphanTitle =
  'host: an agent on a fresh log finds what its log does not know, records it and cleans it up';

test(orphanTitle, { skip, timeout: 120_000 }, async () => {
  const root = join(base, 'orphan-root');
  const up = vole(...agent(join(repo, 'examples/manifests'), root, join(base, 'lost.db'), ...once));
  assert.equal(up.status, 0, up.stderr);
  // The log is lost; the batch pod is still wanted; a stray pod has a mount below a volume.
  const manifests = join(base, 'orphan-manifests');
  mkdirSync(manifests);
  const batch = readFileSync(join(repo, 'examples/manifests/batch.yaml'));
  writeFileSync(join(manifests, 'batch.yaml'), batch);
  const nested = join(root, 'pods/uid-stray/volumes/kubernetes.io~empty-dir/data/sub');
  mkdirSync(nested, { recursive: true });
  assert.equal(spawnSync('mount', ['-t', 'tmpfs', 'tmpfs', nested]).status, 0);
  const keep = join(root, 'pods/7d3e9b40-batch/volumes/kubernetes.io~empty-dir/scratch/keep');
  writeFileSync(keep, 'mine');
  assert.ok(
    mountPoints().some((m) => m.startsWith(join(root, 'plugins'))),
    'a device mount',
  );
  assert.equal(loopsOver(join(root, 'disks')).length, 1, 'a loop device');

  const db = join(base, 'fresh.db');
  const r = vole(...agent(manifests, root, db, ...once));
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /orphans: 6 found, 5 removed/);

  const web = join(root, 'pods/5f0c1a2e-web');
  assert.equal(existsSync(web), false, "the unknown pod's volumes are unmounted and removed");
  const left = mountPoints().filter((m) => m.startsWith(root));
  assert.deepEqual(left, [nested], 'only the stray mount is left');
  assert.equal(loopsOver(join(root, 'disks')).length, 0, 'the loop device is detached');
  assert.ok(existsSync(join(root, 'disks/web-data.img')), 'the disk image (data) is kept');
  assert.equal(readFileSync(keep, 'utf8'), 'mine', 'the pod the agent was told about is untouched');

  const events = reports(db);
  const byReason = (reason: string) =>
    events
      .filter((e) => e.reason === reason)
      .map((e) => e.volume)
      .sort();
  assert.deepEqual(byReason('OrphanFound'), [
    'disk.vole.dev/pv-web-data',
    'disk.vole.dev/web-data',
    'kubernetes.io/empty-dir/cache',
    'kubernetes.io/empty-dir/data',
    'kubernetes.io/host-path/logs',
    'web-data',
  ]);
  assert.deepEqual(byReason('OrphanLeft'), ['kubernetes.io/empty-dir/data']);
  const leftReport = events.find((e) => e.reason === 'OrphanLeft');
  assert.match(leftReport?.message ?? '', /still has mounts below it/);
  const firstRemoval = events.findIndex((e) => e.reason !== 'OrphanFound');
  assert.equal(firstRemoval, 6, 'every orphan is recorded before any is touched');
  assert.equal(vole('verify', '--db', db).status, 0);

  const again = vole(...agent(manifests, root, db, ...once));
  assert.equal(again.status, 0, again.stderr);
  assert.match(again.stdout, /orphan left in place: .*uid-stray/);
  assert.match(again.stdout, /orphans: 1 found, 0 removed/, 'nothing else to clean');
});

const stopTitle =
  'host: stopped while its log is full, the agent exits at once, its log verifies, ' +
  'a restart settles';

test(stopTitle, { skip, timeout: 120_000 }, async () => {
  const manifests = join(base, 'full-manifests-2');
  emptyDirPods(manifests, 300);
  const logDir = join(base, 'full-log-2');
  mkdirSync(logDir);
  assert.equal(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', logDir]).status, 0);
  after(() => ensureUnmounted(logDir).catch(() => undefined));
  const db = join(logDir, 'vole.db');
  const root = join(base, 'full-root-2');
  const child = spawn(process.execPath, [...cli, ...agent(manifests, root, db)], {
    cwd: repo,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exit = new Promise<number | null>((resolve) => child.once('close', resolve));
  await until(() => out.includes('cannot be written'), 'the agent to say its log is full', 60_000);
  // Its signal handlers are installed once its start is done (the log full meanwhile): the
  // operator socket's line is the last thing it says before.
  await until(() => out.includes('operator requests'), 'the agent to finish starting', 60_000);
  await new Promise((resolve) => setTimeout(resolve, 200));
  const stoppedMs = performance.now();
  process.kill(child.pid!, 'SIGTERM');
  assert.equal(await exit, 143, out + err);
  assert.ok(performance.now() - stoppedMs < 3_000, 'no drain to wait for');
  assert.match(out, /the log cannot be written: stopping now/);
  assert.doesNotMatch(err, /\n\s+at /, 'no stack trace');
  const verify = vole('verify', '--db', db);
  assert.equal(verify.status, 0, verify.stdout + verify.stderr);
  assert.equal(spawnSync('mount', ['-o', 'remount,size=16m', logDir]).status, 0);
  const again = vole(...agent(manifests, root, db, ...once));
  assert.equal(again.status, 0, again.stderr);
  assert.match(again.stdout, /settled: 300 pod\(s\) mounted/);
});
