/**
 * Nothing is written to a log before its whole-file check passes: a restart's writer folds
 * and plans while quick_check runs on a worker, but the group committer holds every commit
 * and every wait for durability (so every act on the host) until it answers. A damaged
 * file is left byte for byte as it was, with the WAL a killed writer left beside it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { LogDamagedError } from '../../src/log/errors.js';
import { GroupCommitter } from '../../src/log/group-commit.js';
import { openLog } from '../../src/log/store.js';
import { type TestEvent, testEventCodec as codec } from '../support/test-events.js';

const repo = join(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'vole-gate-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let count = 0;
const newPath = () => join(dir, `log-${++count}.db`);

const pods = (n: number, from = 1): Omit<TestEvent, 'seq'>[] =>
  Array.from({ length: n }, (_, i) => ({
    type: 'PodAdded',
    tsMs: from + i,
    uid: `pod-${from + i}`,
    note: 'x'.repeat(50),
  }));

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

/** The head as another connection sees it: what is committed to the file. */
function committedHead(path: string): number {
  const raw = new Database(path, { readonly: true });
  const head = Number(raw.prepare('SELECT MAX(seq) FROM events').pluck().get());
  raw.close();
  return head;
}

/** A closed log of `events` events. */
function soundLog(events: number): string {
  const path = newPath();
  const store = openLog<TestEvent>(path, { codec, mode: 'create', durability: 'normal' });
  store.append(pods(events), { expectedSeq: 0 });
  store.close();
  return path;
}

/** One page in the middle of the file zeroed (4 KiB pages). */
function zeroMiddlePage(path: string): void {
  const pageBytes = 4096;
  const page = Math.floor(statSync(path).size / pageBytes / 2);
  const fd = openSync(path, 'r+');
  writeSync(fd, Buffer.alloc(pageBytes), 0, pageBytes, page * pageBytes);
  closeSync(fd);
}

test('gate: a restart commits nothing, and no wait resolves, before the check passes', async () => {
  const path = soundLog(5_000);
  const store = openLog<TestEvent>(path, { codec, mode: 'readwrite' });
  assert.equal(store.integrity.kind, 'pending');
  const verified: boolean[] = [];
  const committer = new GroupCommitter<TestEvent>(store, {
    onVerified: () => verified.push(committer.verified),
  });
  assert.equal(committer.writable, true, 'the engine may plan meanwhile');
  assert.equal(committer.verified, false);
  committer.push(pods(1, 5_001)[0]!);
  committer.flush();
  let resolved = 0;
  // Even a seq an earlier process made durable (a mount its attach covers) waits.
  void committer.whenDurable(5_000)!.then(() => resolved++);
  void committer.whenDurable()!.then(() => resolved++);
  assert.equal(committedHead(path), 5_000, 'held, not committed');

  assert.equal((await store.checkInBackground()).kind, 'ok');
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(verified, [true], 'onVerified told once, when the gate opened');
  assert.equal(resolved, 2, 'both waits resolved once the check passed');
  assert.equal(committedHead(path), 5_001, 'what was held is committed');
  assert.equal(committer.whenDurable(), undefined);
  committer.close();
});

test('gate: closed before the check answers, the writer checks first, then writes', () => {
  const path = soundLog(2_000);
  const store = openLog<TestEvent>(path, { codec, mode: 'readwrite' });
  const committer = new GroupCommitter<TestEvent>(store);
  committer.push(pods(1, 2_001)[0]!);
  assert.equal(committer.close(), 0, 'nothing lost');
  assert.equal(store.integrity.kind, 'ok', 'checked on the writer connection');
  assert.equal(committedHead(path), 2_001);

  const damaged = soundLog(5_000);
  zeroMiddlePage(damaged);
  const before = sha256(damaged);
  const halted: LogDamagedError[] = [];
  const store2 = openLog<TestEvent>(damaged, { codec, mode: 'readwrite', onDamaged: () => {} });
  const committer2 = new GroupCommitter<TestEvent>(store2, { onHalted: (e) => halted.push(e) });
  committer2.push(pods(1, 5_001)[0]!);
  assert.equal(committer2.close(), 1, 'the held event is never written');
  assert.equal(halted.length, 1);
  assert.match(halted[0]!.message, /nothing was written to it.*vole export --salvage/s);
  assert.equal(sha256(damaged), before);
});

test('gate: a write straight to the store runs the check first', () => {
  const path = soundLog(3_000);
  zeroMiddlePage(path);
  const before = sha256(path);
  const store = openLog<TestEvent>(path, { codec, mode: 'readwrite', onDamaged: () => {} });
  assert.throws(() => store.append(pods(1, 3_001), { expectedSeq: 3_000 }), LogDamagedError);
  assert.throws(
    () => store.saveSnapshot({ seq: 3_000, tsMs: 1, format: 1, data: 'x' }),
    LogDamagedError,
  );
  store.close();
  assert.equal(sha256(path), before);
});

/**
 * A WAL with frames, as a writer killed before its checkpoint leaves it: appended by a
 * child that SIGKILLs itself, so SQLite never closes its connection.
 */
function walLeftByKilledWriter(path: string): void {
  const child = spawnSync(
    process.execPath,
    [
      '-e',
      `const D = require(${JSON.stringify(join(repo, 'node_modules/better-sqlite3'))});
       const db = new D(${JSON.stringify(path)});
       db.pragma('wal_autocheckpoint = 0');
       const insert = db.prepare('INSERT INTO events (seq, ts_ms, type, data) VALUES (?, 1, ?, ?)');
       for (let seq = 5001; seq <= 5100; seq++) insert.run(seq, 'PodAdded', '{"uid":"late"}');
       process.kill(process.pid, 'SIGKILL');`,
    ],
    { encoding: 'utf8' },
  );
  assert.equal(child.signal, 'SIGKILL', child.stderr);
  assert.ok(statSync(`${path}-wal`).size > 0, 'the WAL holds frames');
}

test('gate: on damage the file and the WAL a killed writer left keep every byte', async () => {
  const path = soundLog(5_000);
  walLeftByKilledWriter(path);
  zeroMiddlePage(path);
  const before = { db: sha256(path), wal: sha256(`${path}-wal`) };
  const store = openLog<TestEvent>(path, { codec, mode: 'readwrite', onDamaged: () => {} });
  const committer = new GroupCommitter<TestEvent>(store);
  committer.push(pods(1, 5_101)[0]!);
  const result = await store.checkInBackground();
  assert.equal(result.kind, 'damaged');
  assert.equal(committer.verified, false);
  let resolved = false;
  void committer.whenDurable(5_000)!.then(() => (resolved = true));
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(resolved, false, 'no wait resolves on a damaged log, not even for old seqs');
  committer.close();
  // SQLite checkpoints the WAL into the file when its last connection closes: not here.
  assert.ok(existsSync(`${path}-wal`), 'the WAL is still there');
  assert.deepEqual({ db: sha256(path), wal: sha256(`${path}-wal`) }, before);
});
