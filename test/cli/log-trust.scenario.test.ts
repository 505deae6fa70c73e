/**
 * Trusting the log, through the CLI as a user meets it: one writer per log (the holder
 * named, the lock freed by SIGKILL, readers beside it), a lock another program holds, a
 * damaged file refused untouched and salvaged, and input files missing a required key.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { vole } from '../support/agent-process.js';
import { importedPvLog } from '../support/damaged-log.js';

const repo = join(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'vole-trust-'));
const children = new Set<ChildProcess>();
after(() => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, 'SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

const cli = ['--import', 'tsx', join(repo, 'src/cli/main.ts')];

/** A long-running `vole …`, ended by its pid after the test file. */
function start(...args: string[]): ChildProcess {
  const child = spawn(process.execPath, [...cli, ...args], {
    cwd: repo,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  return child;
}

function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes('\n')) resolve(text);
    });
    child.once('exit', (code) => reject(new Error(`exited ${code} before its first line`)));
  });
}

const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
const noStackTrace = (text: string) => assert.doesNotMatch(text, /\n\s+at .+\(.+:\d+:\d+\)/);

/** A log of about `objects` + 1 events (EngineStarted, then PersistentVolumes), via import. */
const bigLog = (name: string, objects: number): string =>
  importedPvLog(dir, name, objects, (i) => ({
    csi: { driver: 'fake.disk', volumeHandle: `d-${i}` },
  }));

const oneWriterTitle =
  'cli: a second writer is refused at once naming the holder; readers work beside it; ' +
  'SIGKILL frees the lock';

test(oneWriterTitle, async () => {
  const manifests = join(dir, 'empty-manifests');
  mkdirSync(manifests, { recursive: true });
  const db = join(dir, 'one-writer.db');
  const args = ['run', '--manifests', manifests, '--root', join(dir, 'root-1'), '--db', db];
  const holder = start(...args);
  await firstLine(holder);

  // "At once" against what a process start costs on this machine now (a loaded machine
  // slows both alike): a lock timeout would add its 5 s to the refusal.
  const baselineStartedMs = Date.now();
  assert.equal(vole('status', '--db', db).status, 0);
  const baselineMs = Date.now() - baselineStartedMs;
  for (const second of [args, ['controller', '--manifests', manifests, '--db', db]]) {
    const startedMs = Date.now();
    const r = vole(...second);
    const tookMs = Date.now() - startedMs;
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, new RegExp(`pid ${holder.pid} on ${hostname()} since 20\\d\\d-`));
    assert.match(r.stderr, /one writer/);
    noStackTrace(r.stderr);
    assert.ok(
      tookMs < baselineMs * 1.5 + 2_000,
      `refused at once (${tookMs} ms, a reader took ${baselineMs} ms), not after a lock timeout`,
    );
  }

  for (const reader of [['status'], ['replay', '--json'], ['history'], ['verify'], ['export']]) {
    const r = vole(...reader, '--db', db);
    assert.equal(r.status, 0, `${reader[0]} beside a running agent: ${r.stderr}`);
  }
  assert.match(vole('export', '--db', db).stdout, /"type":"EngineStarted"/);

  process.kill(holder.pid!, 'SIGKILL');
  await exited(holder);
  const next = vole(...args, '--once', '--timeout', '20');
  assert.equal(next.status, 0, `the kernel released the killed holder's lock: ${next.stderr}`);
  assert.match(next.stdout, /settled/);
});

const foreignTitle =
  'cli: a log another program holds a write lock on: a bounded wait, then exit 2 with a message';

test(foreignTitle, async () => {
  const db = bigLog('foreign', 10);
  const holder = spawn(
    process.execPath,
    [
      '-e',
      `const D = require(${JSON.stringify(join(repo, 'node_modules/better-sqlite3'))});
       const db = new D(${JSON.stringify(db)}); db.exec('BEGIN EXCLUSIVE');
       console.log('held'); setInterval(() => {}, 1000);`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  children.add(holder);
  await firstLine(holder);
  const manifests = join(dir, 'empty-manifests');
  mkdirSync(manifests, { recursive: true });
  const startedMs = Date.now();
  const r = vole('run', '--manifests', manifests, '--root', join(dir, 'root-2'), '--db', db);
  const waitedMs = Date.now() - startedMs;
  process.kill(holder.pid!, 'SIGKILL');
  await exited(holder);
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /is locked by another program .*fuser/);
  noStackTrace(r.stderr);
  assert.ok(waitedMs >= 4_000 && waitedMs < 20_000, `waited ${waitedMs} ms`);
});

const damagedTitle =
  'cli: a page of random bytes: every reader and the agent refuse, the file is untouched; ' +
  'salvage + import give a sound log';

test(damagedTitle, () => {
  const db = bigLog('damaged', 3_000);
  const pageBytes = 4096;
  const pages = statSync(db).size / pageBytes;
  assert.ok(pages > 100, `${pages} pages`);
  const fd = openSync(db, 'r+');
  writeSync(fd, randomBytes(pageBytes), 0, pageBytes, Math.floor(pages / 2) * pageBytes);
  closeSync(fd);
  const before = sha256(db);

  const manifests = join(dir, 'empty-manifests');
  mkdirSync(manifests, { recursive: true });
  const root = join(dir, 'root-3');
  for (const args of [
    ['status', '--db', db],
    ['replay', '--db', db, '--at', '5'],
    ['history', '--db', db],
    ['verify', '--db', db],
    ['export', '--db', db],
    ['run', '--manifests', manifests, '--root', root, '--db', db, '--once'],
  ]) {
    const r = vole(...args);
    assert.equal(r.status, 2, `${args[0]}: ${r.stdout} ${r.stderr}`);
    assert.match(r.stderr, /is damaged \(.+\); it was not written to/);
    assert.match(r.stderr, /vole export --salvage/);
    noStackTrace(r.stderr);
    assert.equal(sha256(db), before, `${args[0]} left the file's bytes as they were`);
  }

  const jsonl = join(dir, 'salvaged.jsonl');
  const salvage = vole('export', '--salvage', '--db', db, '--out', jsonl);
  assert.equal(salvage.status, 1, 'stopped before the head');
  const match = /salvaged events 1–(\d+) of .*stopped at seq (\d+): /.exec(salvage.stderr);
  assert.ok(match, salvage.stderr);
  const last = Number(match[1]);
  assert.equal(Number(match[2]), last + 1);
  assert.ok(last > 100 && last < 3_000, `salvaged up to seq ${last}`);
  const seqs = readFileSync(jsonl, 'utf8')
    .trim()
    .split('\n')
    .map((line) => (JSON.parse(line) as { seq: number }).seq);
  assert.deepEqual(
    seqs,
    Array.from({ length: last }, (_, i) => i + 1),
    'in seq order, no gap',
  );
  assert.equal(sha256(db), before);

  const rebuilt = join(dir, 'rebuilt.db');
  assert.equal(vole('import', jsonl, '--db', rebuilt).status, 0);
  const verify = vole('verify', '--db', rebuilt);
  assert.equal(verify.status, 0, verify.stdout + verify.stderr);
  assert.match(verify.stdout, new RegExp(`ok: ${last} events`));
});

test('cli: export --salvage of a sound log writes every event and exits 0', () => {
  const db = bigLog('sound', 20);
  const r = vole('export', '--salvage', '--db', db);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, vole('export', '--db', db).stdout);
  assert.match(r.stderr, /salvaged all 21 events/);
});

test('cli: a scenario or a manifest missing a required key exits 2 naming the key', () => {
  const scenario = join(dir, 'no-steps.yaml');
  writeFileSync(scenario, 'name: nothing to do\n');
  const sim = vole('simulate', scenario);
  assert.equal(sim.status, 2);
  assert.match(sim.stderr, /steps: missing \(a required key\)/);

  const manifests = join(dir, 'bad-manifests');
  mkdirSync(manifests, { recursive: true });
  writeFileSync(
    join(manifests, 'pod.yaml'),
    'apiVersion: v1\nkind: Pod\nmetadata: {namespace: default}\nspec: {volumes: []}\n',
  );
  const db = join(dir, 'never-written.db');
  for (const command of ['run', 'controller']) {
    const r = vole(command, '--manifests', manifests, '--root', join(dir, 'root-4'), '--db', db);
    assert.equal(r.status, 2, r.stderr);
    assert.match(
      r.stderr,
      /pod\.yaml: Pod "\(unnamed\)" is invalid: metadata\.name: Required value/,
    );
    noStackTrace(r.stderr);
    assert.equal(existsSync(db), false, 'nothing was opened or written');
  }
});
