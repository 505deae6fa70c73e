import assert from 'node:assert/strict';
import { readFileSync, truncateSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { eventCodec, type VoleEvent } from '../../src/events/index.js';
import { ExpectedSeqConflictError, LogOpenError, LogReadError } from '../../src/log/errors.js';
import { GroupCommitter } from '../../src/log/group-commit.js';
import { openLog } from '../../src/log/store.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-log-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const path = () => join(dir, `log-${++n}.db`);
const open = (p: string, mode: 'create' | 'readwrite' | 'readonly' = 'create') => openLog<VoleEvent>(p, { codec: eventCodec, mode });
const removed = (uid: string, tsMs = 0) => ({ type: 'PodRemoved' as const, tsMs, uid });

test('log: append assigns seqs from 1 and reads them back in order', () => {
  const p = path();
  const store = open(p);
  assert.deepEqual(store.head(), { seq: 0 });
  assert.deepEqual(store.append([removed('a'), removed('b', 5)], { expectedSeq: 0 }), { firstSeq: 1, lastSeq: 2 });
  assert.deepEqual(store.append([removed('c', 9)], { expectedSeq: 2 }), { firstSeq: 3, lastSeq: 3 });
  assert.deepEqual([...store.read()].map((e) => [e.seq, e.tsMs, e.type === 'PodRemoved' ? e.uid : '']), [[1, 0, 'a'], [2, 5, 'b'], [3, 9, 'c']]);
  assert.deepEqual([...store.read({ fromSeq: 2, limit: 1 })].map((e) => e.seq), [2]);
  assert.equal(store.get(3)?.tsMs, 9);
  assert.equal(store.get(4), undefined);
  assert.equal(store.seqAtOrBeforeTs(6), 2);
  assert.deepEqual(store.bounds(), { firstSeq: 1, lastSeq: 3, firstTsMs: 0, lastTsMs: 9 });
  store.close();
  const again = open(p, 'readwrite');
  assert.equal(again.head().seq, 3);
  again.close();
});

test('log: an append at the wrong expected seq is refused and writes nothing', () => {
  const store = open(path());
  store.append([removed('a')], { expectedSeq: 0 });
  assert.throws(() => store.append([removed('b')], { expectedSeq: 0 }), (e: unknown) => e instanceof ExpectedSeqConflictError && e.actualSeq === 1);
  assert.equal(store.head().seq, 1);
  store.close();
});

test('log: an invalid event is refused and the batch leaves the log unchanged', () => {
  const store = open(path());
  const bad = { type: 'PodRemoved', tsMs: 0, uid: '' } as never;
  assert.throws(() => store.append([removed('ok'), bad], { expectedSeq: 0 }), /does not match this version's schema/);
  assert.equal(store.head().seq, 0);
  store.close();
});

test('log: large batches are split into transactions and keep their order', () => {
  const store = open(path());
  const events = Array.from({ length: 10_000 }, (_, i) => removed(`p${i}`, i));
  assert.deepEqual(store.append(events, { expectedSeq: 0 }), { firstSeq: 1, lastSeq: 10_000 });
  let expected = 1;
  for (const e of store.read()) assert.equal(e.seq, expected++);
  store.close();
});

test('log: group commit writes the pushes of one tick in one transaction', async () => {
  const store = open(path());
  const committer = new GroupCommitter<VoleEvent>(store);
  for (let i = 0; i < 100; i++) assert.equal(committer.push(removed(`p${i}`)), i + 1);
  assert.equal(committer.durableSeq, 0);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(committer.durableSeq, 100);
  assert.equal(store.head().seq, 100);
  committer.push(removed('x'));
  committer.flush();
  assert.equal(store.head().seq, 101);
  committer.close();
});

test('log: snapshots are saved and the latest at or before a seq is found', () => {
  const store = open(path());
  store.saveSnapshot({ seq: 10, tsMs: 1, format: 1, data: 'ten' });
  store.saveSnapshot({ seq: 20, tsMs: 2, format: 1, data: 'twenty' });
  assert.equal(store.latestSnapshot()?.data.toString(), 'twenty');
  assert.equal(store.latestSnapshot({ atOrBeforeSeq: 15 })?.seq, 10);
  store.deleteSnapshotsAfter(10);
  assert.equal(store.latestSnapshot()?.seq, 10);
  store.close();
});

test('log: refuses a missing file, a text file, a foreign database, a newer schema', () => {
  const code = (fn: () => unknown) => { try { fn(); } catch (e) { return (e as LogOpenError).code; } return 'opened'; };
  assert.equal(code(() => open(join(dir, 'missing.db'), 'readonly')), 'notFound');
  assert.equal(code(() => open(join(dir, 'missing.db'), 'readwrite')), 'notFound');
  const text = join(dir, 'text.db');
  writeFileSync(text, 'hello, this is not SQLite at all, just some text padding padding padding');
  assert.equal(code(() => open(text)), 'notSqlite');
  const foreign = join(dir, 'foreign.db');
  const db = new Database(foreign);
  db.exec('CREATE TABLE users (id INTEGER)');
  db.close();
  assert.equal(code(() => open(foreign)), 'foreign');
  const newer = path();
  open(newer).close();
  const raw = new Database(newer);
  raw.pragma('user_version = 99');
  raw.close();
  const bytes = readFileSync(newer);
  assert.throws(() => open(newer), (e: unknown) => e instanceof LogOpenError && e.code === 'newerSchema' && /upgrade vole/.test(e.message));
  assert.deepEqual(readFileSync(newer), bytes, 'a refused file is not changed');
});

test('log: a read-only store refuses appends', () => {
  const p = path();
  open(p).close();
  const store = open(p, 'readonly');
  assert.throws(() => store.append([removed('a')], { expectedSeq: 0 }), /read-only/);
  store.close();
});

test('log: a truncated file is reported as an error, never read as a shorter log', () => {
  const p = path();
  const store = open(p);
  store.append(Array.from({ length: 5000 }, (_, i) => removed(`pod-${i}-${'x'.repeat(50)}`, i)), { expectedSeq: 0 });
  store.close();
  truncateSync(p, Math.floor(readFileSync(p).length / 2));
  assert.throws(() => {
    const s = open(p, 'readonly');
    try { for (const _e of s.read()) { /* read all */ } } finally { s.close(); }
  }, (e: unknown) => (e instanceof LogOpenError && e.code === 'corrupt') || e instanceof LogReadError);
});
