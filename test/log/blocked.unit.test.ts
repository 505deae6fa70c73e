/**
 * The writer lock and a blocked group committer, in one process: a second writer on a log
 * is refused naming this process; an append SQLite refuses (here: another connection holds
 * the write lock) keeps the events in order, reports the blockage, and is retried until it
 * succeeds, releasing whoever waited for durability.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { GroupCommitter } from '../../src/log/group-commit.js';
import type { LogBlockage } from '../../src/log/group-commit-options.js';
import { LogOpenError, openLog, readHolder, WriterLock } from '../../src/log/store.js';
import { type TestEvent, testEventCodec } from '../support/test-events.js';

const codec = testEventCodec;
const added = (uid: string): Omit<TestEvent, 'seq'> => ({ type: 'PodAdded', tsMs: 0, uid });

const dir = mkdtempSync(join(tmpdir(), 'vole-blocked-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const sameProcessTitle =
  'writer lock: a second writer in the same process is refused naming it; closing frees it';

test(sameProcessTitle, () => {
  const path = join(dir, 'one.db');
  const first = openLog<TestEvent>(path, { codec, mode: 'create' });
  const holder = readHolder(WriterLock.pathFor(path));
  assert.equal(holder?.pid, process.pid);
  assert.equal(holder?.host, hostname());
  assert.throws(
    () => openLog<TestEvent>(path, { codec, mode: 'readwrite' }),
    (error: unknown) =>
      error instanceof LogOpenError &&
      error.code === 'inUse' &&
      error.message.includes(`pid ${process.pid} on ${hostname()}`),
  );
  const reader = openLog<TestEvent>(path, { codec, mode: 'readonly' });
  assert.equal(reader.head().seq, 0, 'a reader opens beside the writer');
  reader.close();
  first.close();
  openLog<TestEvent>(path, { codec, mode: 'readwrite' }).close();
});

test('group commit: a refused append blocks, is retried with backoff, and resumes', async () => {
  const path = join(dir, 'blocked.db');
  const store = openLog<TestEvent>(path, { codec, mode: 'create', timeoutMs: 10 });
  const blockages: LogBlockage[] = [];
  const resumed: number[] = [];
  let writableCalls = 0;
  const committer = new GroupCommitter(store, {
    onBlocked: (b) => blockages.push(b),
    onResumed: (r) => resumed.push(r.written),
    retryMs: { first: 20, max: 40 },
  });
  committer.onWritable(() => writableCalls++);
  const other = new Database(path, { timeout: 0 });
  other.exec('BEGIN IMMEDIATE');

  committer.push(added('a'));
  committer.push(added('b'));
  const durable = committer.whenDurable();
  assert.ok(durable !== undefined, 'waits for the commit');
  await null; // the commit the wait queued runs as a microtask
  assert.equal(committer.writable, false, 'not durable while the lock is held elsewhere');
  assert.equal(blockages[0]?.code, 'SQLITE_BUSY');
  assert.equal(blockages[0]?.path, path);
  assert.equal(blockages[0]?.pendingCount, 2);
  assert.ok((blockages[0]?.freeBytes ?? -1) >= 0, 'the free space is reported');
  committer.push(added('c'));
  committer.flush(); // a no-op while blocked: the retry owns the buffer
  // About 130 ms (20 + 40 + 40 ms of backoff, 10 ms busy waits); longer on a loaded machine.
  for (let waitedMs = 0; blockages.length < 3 && waitedMs < 5_000; waitedMs += 25)
    await new Promise((resolve) => setTimeout(resolve, 25));
  assert.ok(blockages.length >= 3, `retried (${blockages.length} attempts)`);
  assert.deepEqual(
    blockages.slice(0, 3).map((b) => b.retryInMs),
    [20, 40, 40],
    'backoff doubles up to its max',
  );
  assert.equal(committer.durableSeq, 0);

  other.exec('ROLLBACK');
  other.close();
  await durable;
  assert.equal(committer.writable, true);
  assert.deepEqual(resumed, [3], 'every buffered event, in one resumption');
  assert.equal(writableCalls, 1);
  assert.equal(committer.durableSeq, 3);
  assert.deepEqual(
    [...store.read()].map((e) => `${e.seq}:${e.uid}`),
    ['1:a', '2:b', '3:c'],
    'in order, nothing lost or doubled',
  );
  assert.equal(committer.whenDurable(), undefined);
  committer.close();
});

test('group commit: closing a blocked committer drops its buffer, as a crash would', () => {
  const path = join(dir, 'dropped.db');
  const store = openLog<TestEvent>(path, { codec, mode: 'create', timeoutMs: 10 });
  const committer = new GroupCommitter(store, { retryMs: { first: 10_000, max: 10_000 } });
  committer.push(added('a'));
  committer.flush();
  const other = new Database(path, { timeout: 0 });
  other.exec('BEGIN IMMEDIATE');
  committer.push(added('b'));
  committer.flush();
  assert.equal(committer.writable, false);
  assert.equal(committer.close(), 1, 'one event was never written');
  other.exec('ROLLBACK');
  other.close();
  const reader = openLog<TestEvent>(path, { codec, mode: 'readonly' });
  assert.deepEqual(
    [...reader.read()].map((e) => e.uid),
    ['a'],
  );
  reader.close();
});

test('group commit: a blocked log times no commit until it is written again', async () => {
  const path = join(dir, 'timed.db');
  const store = openLog<TestEvent>(path, { codec, mode: 'create', timeoutMs: 10 });
  const committer = new GroupCommitter(store, { retryMs: { first: 20, max: 20 } });
  const latencies: number[] = [];
  committer.onCommitted((seconds) => latencies.push(seconds));
  let resumed = 0;
  committer.onWritable(() => resumed++);
  const other = new Database(path, { timeout: 0 });
  other.exec('BEGIN IMMEDIATE');
  committer.push(added('a'));
  const waiting = committer.whenDurable();
  assert.ok(waiting !== undefined);
  await null;
  assert.equal(committer.writable, false);
  assert.deepEqual(latencies, [], 'no latency for a write that did not happen');
  other.exec('ROLLBACK');
  other.close();
  await waiting;
  assert.equal(committer.writable, true);
  assert.equal(resumed, 1);
  assert.equal(latencies.length, 1, 'the resumed write is timed');
  committer.push(added('b'));
  await committer.whenDurable();
  assert.equal(latencies.length, 2, 'each commit is timed');
  committer.close();
});
