/**
 * The SQLite event store and its group committer, on real files in a temp directory. The
 * events are a tiny test type with its own zod codec, so these tests do not move when
 * vole's event union does.
 */
import assert from 'node:assert/strict';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { z } from 'zod';
import { InvariantError } from '../../src/assert.js';
import { appendBatchEventsMax, logApplicationId, logSchemaVersion } from '../../src/constants.js';
import { eventChecksum } from '../../src/log/checksum.js';
import { GroupCommitter } from '../../src/log/group-commit.js';
import {
  ExpectedSeqConflictError,
  type EventCodec,
  LogOpenError,
  LogReadError,
  LogReadonlyError,
  openLog,
  type OpenLogOptions,
} from '../../src/log/store.js';

// ---- the test event type and codec -----------------------------------------------------

interface TestEvent {
  seq: number;
  tsMs: number;
  type: 'PodAdded' | 'PodRemoved';
  uid: string;
  note?: string;
}

const testEventSchema = z.looseObject({
  seq: z.number().int().positive(),
  tsMs: z.number().int().nonnegative(),
  type: z.enum(['PodAdded', 'PodRemoved']),
  uid: z.string().min(1),
});

const codec: EventCodec<TestEvent> = { parse: (raw) => testEventSchema.parse(raw) };

/** The codec, counting its calls: shows what the store validates, and when. */
function countingCodec(): { codec: EventCodec<TestEvent>; calls: () => number } {
  let calls = 0;
  return {
    codec: { parse: (raw) => (calls++, codec.parse(raw)) },
    calls: () => calls,
  };
}

const added = (uid: string, tsMs = 0): Omit<TestEvent, 'seq'> => ({ type: 'PodAdded', tsMs, uid });
const invalid = { type: 'PodAdded', tsMs: 0, uid: '' } as const; // uid must not be empty
const pods = (count: number, tsMs = (i: number) => i) =>
  Array.from({ length: count }, (_, i) => added(`pod-${i + 1}`, tsMs(i)));

// ---- files -------------------------------------------------------------------------------

const root = mkdtempSync(join(tmpdir(), 'vole-log-'));
after(() => rmSync(root, { recursive: true, force: true }));
let fileCount = 0;
/** A fresh directory per test file, so "nothing else appeared next to it" can be checked. */
function newPath(name = 'log.db'): string {
  const dir = join(root, `case-${++fileCount}`);
  mkdirSync(dir);
  return join(dir, name);
}
const dirOf = (path: string) => join(path, '..');

function open(path: string, opts: Partial<OpenLogOptions<TestEvent>> = {}) {
  return openLog<TestEvent>(path, { codec, mode: 'create', ...opts });
}

function logWith(events: Omit<TestEvent, 'seq'>[], path = newPath()): string {
  const store = open(path, { durability: 'normal' });
  store.append(events, { expectedSeq: 0 });
  store.close();
  return path;
}

/** The error `fn` throws, checked to be a LogOpenError. */
function openErrorOf(fn: () => unknown): LogOpenError {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof LogOpenError, `expected a LogOpenError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected the open to be refused');
}

/** Opens read-only and reads everything: whatever error surfaces first. */
function openAndReadAll(path: string): unknown {
  try {
    const store = open(path, { mode: 'readonly' });
    try {
      for (const _event of store.read()) {
        // reading is the point
      }
    } finally {
      store.close();
    }
  } catch (error) {
    return error;
  }
  return undefined;
}

const uids = (events: Iterable<TestEvent>) => [...events].map((e) => `${e.seq}:${e.uid}`);

// ---- append and read ---------------------------------------------------------------------

test('log: append assigns seqs from expectedSeq + 1 and reads the events back', () => {
  const path = newPath();
  const store = open(path);
  assert.deepEqual(store.head(), { seq: 0 });
  assert.deepEqual(store.append([added('a'), added('b', 5)], { expectedSeq: 0 }), {
    firstSeq: 1,
    lastSeq: 2,
  });
  const withNote = { ...added('c', 9), note: 'kept by passthrough' };
  assert.deepEqual(store.append([withNote], { expectedSeq: 2 }), { firstSeq: 3, lastSeq: 3 });
  assert.deepEqual(store.head(), { seq: 3 });
  assert.deepEqual(
    [...store.read()],
    [
      { seq: 1, tsMs: 0, type: 'PodAdded', uid: 'a' },
      { seq: 2, tsMs: 5, type: 'PodAdded', uid: 'b' },
      { seq: 3, tsMs: 9, type: 'PodAdded', uid: 'c', note: 'kept by passthrough' },
    ],
  );
  assert.deepEqual(store.get(2), { seq: 2, tsMs: 5, type: 'PodAdded', uid: 'b' });
  assert.equal(store.get(0), undefined);
  assert.equal(store.get(4), undefined);
  assert.equal(store.path, path);
  assert.equal(store.readonly, false);
  store.close();
  store.close(); // idempotent
});

test('log: the file is a WAL-mode vole log with the envelope in columns and no index', () => {
  const path = logWith([added('a', 7)]);
  const db = new Database(path, { readonly: true });
  assert.equal(db.pragma('application_id', { simple: true }), logApplicationId);
  assert.equal(db.pragma('user_version', { simple: true }), logSchemaVersion);
  assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
  assert.deepEqual(db.prepare('SELECT seq, ts_ms, type, data FROM events').raw().all(), [
    [1, 7, 'PodAdded', '{"uid":"a"}'],
  ]);
  const indexes = db.prepare("SELECT name FROM sqlite_master WHERE type = 'index'").all();
  assert.deepEqual(indexes, [], 'a secondary index costs append throughput (PERF.md)');
  db.close();
});

test('log: an append at a stale or future expectedSeq is refused and writes nothing', () => {
  const store = open(newPath());
  store.append([added('a')], { expectedSeq: 0 });
  for (const expectedSeq of [0, 5]) {
    assert.throws(
      () => store.append([added('b')], { expectedSeq }),
      (error: unknown) =>
        error instanceof ExpectedSeqConflictError &&
        error.expectedSeq === expectedSeq &&
        error.actualSeq === 1 &&
        /re-read the log/i.test(error.message),
    );
  }
  assert.deepEqual(uids(store.read()), ['1:a']);
  assert.equal(store.appendTransactionCount, 1);
  store.close();
});

test('log: a reopened log keeps its events and continues their seqs', () => {
  const path = logWith(pods(3));
  const again = open(path, { mode: 'readwrite' });
  assert.equal(again.head().seq, 3);
  assert.deepEqual(again.append([added('d')], { expectedSeq: 3 }), { firstSeq: 4, lastSeq: 4 });
  again.close();
  const reader = open(path, { mode: 'readonly' });
  assert.deepEqual(uids(reader.read()), ['1:pod-1', '2:pod-2', '3:pod-3', '4:d']);
  reader.close();
});

test('log: the codec rejects an invalid event on append and the log is unchanged', () => {
  const { codec: counting, calls } = countingCodec();
  const store = open(newPath(), { codec: counting, appendBatchEventsMax: 500 });
  store.append([added('a')], { expectedSeq: 0 });
  assert.equal(calls(), 1, 'validated on append, with its seq');
  assert.throws(() => store.append([added('ok'), invalid], { expectedSeq: 1 }), z.ZodError);
  // Also across transactions: every event is validated before the first one is written.
  const big = [...pods(2_000)];
  big[1_500] = invalid;
  assert.throws(() => store.append(big, { expectedSeq: 1 }), z.ZodError);
  assert.equal(store.head().seq, 1);
  assert.equal(store.appendTransactionCount, 1);
  assert.deepEqual(uids(store.read()), ['1:a']);
  assert.throws(() => store.append([], { expectedSeq: 1 }), InvariantError);
  const fractional = { ...added('x'), tsMs: 1.5 };
  assert.throws(() => store.append([fractional], { expectedSeq: 1 }), InvariantError);
  store.close();
});

/** Inserts a row behind the store's back, with the checksum the store would write. */
function insertRaw(raw: Database.Database, row: [number, number, string, string]): void {
  raw.prepare('INSERT INTO events VALUES (?, ?, ?, ?, ?)').run(...row, eventChecksum(...row));
}

test('log: a row the codec rejects on read throws LogReadError naming its seq', () => {
  const path = logWith(pods(2));
  const raw = new Database(path);
  // Rows with their checksums, as a vole with another codec would write them.
  insertRaw(raw, [3, 2, 'PodAdded', '{"uid":""}']);
  insertRaw(raw, [4, 3, 'PodAdded', 'not json']);
  raw.close();
  const store = open(path, { mode: 'readonly' });
  const seen: number[] = [];
  assert.throws(
    () => {
      for (const event of store.read()) seen.push(event.seq);
    },
    (error: unknown) =>
      error instanceof LogReadError &&
      error.code === 'invalidEvent' &&
      error.seq === 3 &&
      /event seq 3 \(PodAdded\) cannot be read/.test(error.message) &&
      /up to seq 2/.test(error.message),
  );
  assert.deepEqual(seen, [1, 2], 'the events before it were read');
  assert.throws(
    () => store.get(4),
    (e: unknown) => e instanceof LogReadError && e.seq === 4,
  );
  assert.equal(store.get(2)?.uid, 'pod-2');
  store.close();
});

test('log: a 2,000-event append is split into transactions of appendBatchEventsMax', () => {
  const store = open(newPath(), { appendBatchEventsMax: 500, durability: 'normal' });
  assert.deepEqual(store.append(pods(2_000), { expectedSeq: 0 }), { firstSeq: 1, lastSeq: 2_000 });
  assert.equal(store.appendTransactionCount, 4);
  let expected = 1;
  for (const event of store.read()) {
    assert.equal(event.seq, expected);
    assert.equal(event.uid, `pod-${expected}`);
    expected++;
  }
  assert.equal(expected, 2_001);
  store.close();
  // The default limit is the shared constant.
  const byDefault = open(newPath(), { durability: 'normal' });
  assert.equal(byDefault.appendBatchEventsMax, appendBatchEventsMax);
  byDefault.append(pods(appendBatchEventsMax + 1), { expectedSeq: 0 });
  assert.equal(byDefault.appendTransactionCount, 2);
  byDefault.close();
});

test('log: read streams: ranges and limits, nothing decoded past what is taken', () => {
  const path = logWith(pods(1_000));
  const { codec: counting, calls } = countingCodec();
  const store = open(path, { mode: 'readwrite', codec: counting });
  const some = store.read();
  assert.equal(calls(), 0, 'lazy: nothing read before next()');
  const taken: number[] = [];
  for (const event of some) {
    taken.push(event.seq);
    if (taken.length === 3) break;
  }
  assert.deepEqual(taken, [1, 2, 3]);
  assert.equal(calls(), 3, 'one row at a time, not the whole log');
  const seqs = (opts: Parameters<typeof store.read>[0]) => [...store.read(opts)].map((e) => e.seq);
  assert.deepEqual(seqs({ fromSeq: 10, limit: 5 }), [10, 11, 12, 13, 14]);
  assert.deepEqual(seqs({ fromSeq: 998 }), [998, 999, 1_000]);
  assert.deepEqual(seqs({ fromSeq: 5, toSeq: 7 }), [5, 6, 7]);
  assert.deepEqual(seqs({ limit: 0 }), []);
  assert.deepEqual(seqs({ fromSeq: 1_001 }), []);
  // The loop above broke out early; that released the connection, so appends work.
  store.append([added('after')], { expectedSeq: 1_000 });
  // An unfinished iteration keeps the connection busy (documented on read()).
  const open_ = store.read();
  open_.next();
  assert.throws(() => store.append([added('no')], { expectedSeq: 1_001 }), /busy/);
  open_.return?.();
  assert.equal(store.head().seq, 1_001);
  store.close();
});

test('log: forEach visits what read() yields; read failures and visitor errors stay apart', () => {
  const path = logWith(pods(50));
  const store = open(path, { mode: 'readwrite' });
  const visited = (opts: Parameters<typeof store.forEach>[0]) => {
    const seqs: number[] = [];
    const count = store.forEach(opts, (event) => seqs.push(event.seq));
    assert.equal(count, seqs.length);
    assert.deepEqual(
      seqs,
      [...store.read(opts)].map((e) => e.seq),
    );
    return seqs;
  };
  assert.equal(visited({}).length, 50);
  assert.deepEqual(visited({ fromSeq: 10, limit: 3 }), [10, 11, 12]);
  assert.deepEqual(visited({ fromSeq: 48, toSeq: 60 }), [48, 49, 50]);
  // A visitor's own error passes through as it is, and the connection is free afterwards.
  const boom = new Error('visitor failed');
  assert.throws(
    () =>
      store.forEach({}, (e) => {
        if (e.seq === 5) throw boom;
      }),
    (error: unknown) => error === boom,
  );
  store.append([added('after')], { expectedSeq: 50 });
  store.close();
  // A row the codec rejects is a LogReadError naming its seq, as with read().
  const raw = new Database(path);
  insertRaw(raw, [52, 2, 'PodAdded', '{"uid":""}']);
  raw.close();
  const again = open(path, { mode: 'readonly' });
  let seen = 0;
  assert.throws(
    () => again.forEach({}, () => seen++),
    (error: unknown) => error instanceof LogReadError && error.seq === 52,
  );
  assert.equal(seen, 51);
  again.close();
});

test('log: bounds and seqAtOrBeforeTs on a small log', () => {
  const empty = open(newPath());
  assert.deepEqual(empty.bounds(), { firstSeq: 0, lastSeq: 0, firstTsMs: 0, lastTsMs: 0 });
  assert.equal(empty.seqAtOrBeforeTs(100), 0);
  empty.close();
  const ts = [0, 10, 10, 20, 35];
  const store = open(logWith(pods(ts.length, (i) => ts[i]!)), { mode: 'readonly' });
  assert.deepEqual(store.bounds(), { firstSeq: 1, lastSeq: 5, firstTsMs: 0, lastTsMs: 35 });
  const answers = [
    [-1, 0],
    [0, 1],
    [9, 1],
    [10, 3],
    [19, 3],
    [20, 4],
    [34, 4],
    [35, 5],
    [99, 5],
  ];
  for (const [tsMs, seq] of answers) assert.equal(store.seqAtOrBeforeTs(tsMs!), seq, `ts ${tsMs}`);
  store.close();
});

test('log: seqAtOrBeforeTs agrees with a linear scan (property)', () => {
  const path = newPath();
  const store = open(path, { durability: 'normal' });
  fc.assert(
    fc.property(
      fc.array(fc.nat({ max: 5 }), { minLength: 1, maxLength: 60 }),
      fc.integer({ min: -2, max: 200 }),
      (steps, probeTsMs) => {
        const head = store.head().seq;
        const base = head === 0 ? 0 : store.bounds().lastTsMs;
        let tsMs = base;
        const events = steps.map((step, i) => added(`p${i}`, (tsMs += step)));
        store.append(events, { expectedSeq: head });
        const all = [...store.read()];
        const expected = all.filter((e) => e.tsMs <= base + probeTsMs).at(-1)?.seq ?? 0;
        return store.seqAtOrBeforeTs(base + probeTsMs) === expected;
      },
    ),
    { numRuns: 60, seed: 42 },
  );
  store.close();
});

// ---- snapshots ---------------------------------------------------------------------------

test('log: snapshots: the latest at or before a seq, replaced, deleted after a seq', () => {
  const store = open(logWith(pods(20)), { mode: 'readwrite' });
  assert.equal(store.latestSnapshot(), undefined);
  store.saveSnapshot({ seq: 10, tsMs: 9, format: 1, data: 'ten' });
  store.saveSnapshot({ seq: 20, tsMs: 19, format: 1, data: Buffer.from([0, 1, 2]) });
  const bytes = Buffer.from([0, 1, 2]);
  assert.deepEqual(store.latestSnapshot(), { seq: 20, tsMs: 19, format: 1, data: bytes });
  assert.equal(store.latestSnapshot({ atOrBeforeSeq: 15 })?.data.toString(), 'ten');
  assert.equal(store.latestSnapshot({ atOrBeforeSeq: 9 }), undefined);
  store.saveSnapshot({ seq: 10, tsMs: 9, format: 2, data: 'ten again' });
  assert.equal(store.latestSnapshot({ atOrBeforeSeq: 10 })?.format, 2);
  store.deleteSnapshotsAfter(10);
  assert.equal(store.latestSnapshot()?.seq, 10);
  const ahead = { seq: 21, tsMs: 0, format: 1, data: '' };
  assert.throws(() => store.saveSnapshot(ahead), /past the head/);
  store.close();
});

// ---- read-only ---------------------------------------------------------------------------

test('log: a read-only store reads but refuses appends and snapshot writes', () => {
  const path = logWith(pods(2));
  const bytes = readFileSync(path);
  const store = open(path, { mode: 'readonly' });
  assert.equal(store.readonly, true);
  assert.equal(store.head().seq, 2);
  const refused = (e: unknown) =>
    e instanceof LogReadonlyError && /open it with mode/.test(e.message);
  assert.throws(() => store.append([added('a')], { expectedSeq: 2 }), refused);
  assert.throws(() => store.saveSnapshot({ seq: 1, tsMs: 0, format: 1, data: 'x' }), refused);
  assert.throws(() => store.deleteSnapshotsAfter(0), refused);
  assert.throws(() => new GroupCommitter(store), InvariantError);
  store.close();
  assert.deepEqual(readFileSync(path), bytes);
});

// ---- refusals ----------------------------------------------------------------------------

test('log: open refuses a missing file unless creating, and creates nothing', () => {
  const path = newPath('missing.db');
  for (const mode of ['readwrite', 'readonly'] as const) {
    const error = openErrorOf(() => open(path, { mode }));
    assert.equal(error.code, 'notFound');
    assert.match(error.message, /does not exist/);
    assert.match(error.message, /create one/);
    assert.equal(existsSync(path), false);
  }
  const noDir = openErrorOf(() => open(join(root, 'no-such-dir', 'log.db')));
  assert.equal(noDir.code, 'notFound');
  assert.equal(openErrorOf(() => open(root)).code, 'notSqlite', 'a directory');
});

test('log: open refuses a text file as not a vole log and leaves it alone', () => {
  const path = newPath('notes.txt');
  writeFileSync(path, 'hello, this is not SQLite at all, just some text and padding padding.\n');
  const bytes = readFileSync(path);
  for (const mode of ['create', 'readwrite', 'readonly'] as const) {
    const error = openErrorOf(() => open(path, { mode }));
    assert.equal(error.code, 'notSqlite');
    assert.match(error.message, /not a vole log/);
  }
  assert.deepEqual(readFileSync(path), bytes);
  assert.deepEqual(readdirSync(dirOf(path)), ['notes.txt']);
});

test('log: open refuses a foreign SQLite database, with or without tables', () => {
  const withTable = newPath('app.db');
  const db = new Database(withTable);
  db.exec('CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)');
  db.close();
  const marked = newPath('marked.db');
  const other = new Database(marked);
  other.pragma('application_id = 1234');
  other.close();
  for (const path of [withTable, marked]) {
    const bytes = readFileSync(path);
    for (const mode of ['create', 'readwrite', 'readonly'] as const) {
      const error = openErrorOf(() => open(path, { mode }));
      assert.equal(error.code, 'foreign');
      assert.match(error.message, /is an SQLite database but not a vole log/);
    }
    assert.deepEqual(readFileSync(path), bytes, 'untouched');
    assert.deepEqual(readdirSync(dirOf(path)).length, 1, 'no -wal or -shm left behind');
  }
});

test('log: open refuses a log of a newer schema and never writes to it', () => {
  const path = logWith(pods(3));
  const raw = new Database(path);
  raw.pragma(`user_version = ${logSchemaVersion + 1}`);
  raw.close();
  const bytes = readFileSync(path);
  const files = readdirSync(dirOf(path));
  for (const mode of ['create', 'readwrite', 'readonly'] as const) {
    const error = openErrorOf(() => open(path, { mode }));
    assert.equal(error.code, 'newerSchema');
    assert.match(error.message, /newer vole/);
    assert.match(error.message, /upgrade vole/);
    assert.deepEqual(readFileSync(path), bytes, `${mode}: the file bytes are unchanged`);
    assert.deepEqual(readdirSync(dirOf(path)), files, `${mode}: no files appeared`);
  }
});

test('log: an empty file is initialised in create and readwrite modes, refused read-only', () => {
  const path = newPath();
  writeFileSync(path, '');
  const error = openErrorOf(() => open(path, { mode: 'readonly' }));
  assert.equal(error.code, 'notSqlite');
  assert.match(error.message, /empty/);
  const store = open(path, { mode: 'readwrite' });
  store.append([added('a')], { expectedSeq: 0 });
  store.close();
  const db = new Database(path, { readonly: true });
  assert.equal(db.pragma('application_id', { simple: true }), logApplicationId);
  assert.equal(db.pragma('user_version', { simple: true }), logSchemaVersion);
  db.close();
});

test('log: a truncated log is refused as corrupt, never read as a shorter log', () => {
  // SQLite (3.53 here) compares the header's page count with the file size on the first
  // read of the schema, so the open's probe fails: LogOpenError 'corrupt'. A LogReadError
  // 'corrupt' during the read would also be acceptable; a shorter log would not.
  const path = logWith(pods(5_000).map((e) => ({ ...e, note: 'x'.repeat(50) })));
  const size = statSync(path).size;
  for (const fraction of [0.99, 0.75, 0.5, 0.25, 0.05]) {
    const copy = newPath();
    writeFileSync(copy, readFileSync(path));
    truncateSync(copy, Math.floor(size * fraction));
    const error = openAndReadAll(copy);
    const corrupt =
      (error instanceof LogOpenError || error instanceof LogReadError) && error.code === 'corrupt';
    assert.ok(corrupt, `truncated to ${fraction}: ${String(error)}`);
    assert.ok(error instanceof LogOpenError, 'surfaces at open with this SQLite');
    assert.match(error.message, /damaged/);
    assert.equal(openErrorOf(() => open(copy, { mode: 'readwrite' })).code, 'corrupt');
  }
});

/** A copy of a 5,000-event log (about 100 pages) with one page overwritten by zeros. */
function logWithZeroedPage(page: (pageCount: number) => number): string {
  const path = logWith(pods(5_000).map((e) => ({ ...e, note: 'x'.repeat(50) })));
  const pageSizeBytes = 4096;
  const pageIndex = page(statSync(path).size / pageSizeBytes);
  const fd = openSync(path, 'r+');
  writeSync(fd, Buffer.alloc(pageSizeBytes), 0, pageSizeBytes, pageIndex * pageSizeBytes);
  closeSync(fd);
  return path;
}

test('log: a page zeroed mid-file surfaces as LogReadError corrupt where reading stops', () => {
  const path = logWithZeroedPage((pageCount) => Math.floor(pageCount / 2));
  const store = open(path, { mode: 'readonly' }); // the probe reads only the last page
  let lastSeq = 0;
  assert.throws(
    () => {
      for (const event of store.read()) lastSeq = event.seq;
    },
    (error: unknown) =>
      error instanceof LogReadError &&
      error.code === 'corrupt' &&
      error.seq === lastSeq + 1 &&
      /damaged/.test(error.message),
  );
  assert.ok(lastSeq > 0 && lastSeq < 5_000, `stopped at seq ${lastSeq}`);
  store.close();
});

test('log: a zeroed last page is refused at open, where the head is read', () => {
  const path = logWithZeroedPage((pageCount) => pageCount - 1);
  for (const mode of ['readonly', 'readwrite'] as const) {
    assert.equal(openErrorOf(() => open(path, { mode })).code, 'corrupt');
  }
});

test('log: a lock held past timeoutMs is reported, on open and on append', () => {
  const fresh = newPath();
  const holder = new Database(fresh);
  holder.pragma('journal_mode = WAL');
  holder.exec('BEGIN EXCLUSIVE');
  const error = openErrorOf(() => open(fresh, { timeoutMs: 20 }));
  assert.equal(error.code, 'locked');
  holder.exec('ROLLBACK');
  holder.close();
  const path = logWith(pods(1));
  const store = open(path, { mode: 'readwrite', timeoutMs: 20 });
  const other = new Database(path);
  other.exec('BEGIN IMMEDIATE');
  assert.throws(
    () => store.append([added('b')], { expectedSeq: 1 }),
    (e: unknown) => e instanceof Database.SqliteError && e.code.startsWith('SQLITE_BUSY'),
  );
  other.exec('ROLLBACK');
  other.close();
  assert.deepEqual(store.append([added('b')], { expectedSeq: 1 }), { firstSeq: 2, lastSeq: 2 });
  store.close();
});

// ---- group commit ------------------------------------------------------------------------

const nextTick = () => new Promise<void>((resolve) => setImmediate(resolve));

test('group commit: events nobody waits on are written lazyCommitMs later, in one transaction', async () => {
  const store = open(newPath());
  const committer = new GroupCommitter(store, { lazyCommitMs: 30 });
  for (let i = 1; i <= 100; i++) assert.equal(committer.push(added(`p${i}`)), i, 'seq at once');
  assert.equal(committer.durableSeq, 0);
  assert.equal(committer.pendingCount, 100);
  await nextTick();
  assert.equal(store.head().seq, 0, 'nothing written before the lazy deadline');
  await new Promise((resolve) => setTimeout(resolve, 60));
  assert.equal(committer.durableSeq, 100);
  assert.equal(committer.pendingCount, 0);
  assert.equal(store.head().seq, 100);
  assert.equal(store.appendTransactionCount, 1, 'one transaction for them all');
  committer.close();
});

test('group commit: the waits of one turn share one commit, made in a microtask', async () => {
  const store = open(newPath());
  const committer = new GroupCommitter(store, { lazyCommitMs: 60_000 });
  const seconds: number[] = [];
  committer.onCommitted((s) => seconds.push(s));
  committer.push(added('a'));
  const first = committer.whenDurable();
  committer.push(added('b'));
  const second = committer.whenDurable();
  assert.ok(first !== undefined && second !== undefined, 'both wait');
  assert.equal(store.head().seq, 0, 'nothing written synchronously');
  await Promise.all([first, second]);
  assert.equal(store.head().seq, 2);
  assert.equal(store.appendTransactionCount, 1, 'one commit for both waits');
  assert.equal(seconds.length, 1, 'the commit is timed');
  assert.equal(committer.whenDurable(), undefined, 'nothing left to wait for');
  committer.close();
  assert.equal(store.appendTransactionCount, 1, 'the lazy timer was cleared');
});

test('group commit: flush() writes at once and is a no-op when empty', async () => {
  const store = open(logWith(pods(5)), { mode: 'readwrite' });
  // A reopened log commits once its whole-file check passed (integrity-gate.unit.test.ts).
  await store.checkInBackground();
  const committer = new GroupCommitter(store);
  assert.equal(committer.durableSeq, 5, 'starts at the head');
  committer.flush();
  assert.equal(store.appendTransactionCount, 0);
  assert.equal(committer.push(added('a')), 6);
  committer.flush();
  assert.equal(store.head().seq, 6);
  committer.flush();
  await nextTick(); // the scheduled flush finds nothing to do
  assert.equal(store.appendTransactionCount, 1);
  committer.close();
  committer.close();
});

test('group commit: a full buffer is flushed by the next push (backpressure)', async () => {
  const store = open(newPath(), { appendBatchEventsMax: 10 });
  const committer = new GroupCommitter(store);
  for (let i = 1; i <= 25; i++) committer.push(added(`p${i}`));
  assert.equal(store.appendTransactionCount, 2);
  assert.equal(committer.pendingCount, 5);
  assert.equal(committer.durableSeq, 20);
  await committer.whenDurable();
  assert.equal(store.appendTransactionCount, 3);
  assert.equal(committer.durableSeq, 25);
  committer.close();
});

test('group commit: a failed flush keeps the buffer and rethrows', () => {
  const path = newPath();
  const store = open(path);
  const committer = new GroupCommitter(store);
  committer.push(added('a'));
  committer.push(invalid);
  assert.throws(() => committer.flush(), z.ZodError);
  assert.equal(committer.pendingCount, 2, 'nothing dropped');
  assert.equal(committer.durableSeq, 0);
  assert.throws(() => committer.flush(), z.ZodError, 'still there, still refused');
  assert.throws(() => committer.close(), z.ZodError, 'close flushes, and says so when it cannot');
  assert.equal(store.head().seq, 0);
  store.close();
});

test('group commit: close flushes the buffer and closes the store', () => {
  const path = newPath();
  const committer = new GroupCommitter(open(path));
  committer.push(added('a'));
  committer.push(added('b'));
  committer.close();
  assert.throws(() => committer.push(added('c')), InvariantError);
  const reader = open(path, { mode: 'readonly' });
  assert.deepEqual(uids(reader.read()), ['1:a', '2:b']);
  reader.close();
});
