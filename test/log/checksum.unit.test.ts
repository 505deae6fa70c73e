/**
 * Schema 3: what a restart reads is checked as it is read (a CRC-32 per event row and per
 * snapshot), and the whole-file quick_check runs in the background after the start,
 * stopping the writer if it finds damage. Older logs still open (their rows: unchecked).
 */
import assert from 'node:assert/strict';
import {
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { openSqliteLog } from '../../src/agent/sqlite-log.js';
import { logApplicationId, logSchemaVersion } from '../../src/constants.js';
import { kubeletCore } from '../../src/engine/cores.js';
import { LogDamagedError } from '../../src/log/errors.js';
import { GroupCommitter } from '../../src/log/group-commit.js';
import { type SalvageReport, salvageEvents } from '../../src/log/salvage.js';
import { LogReadError, openLog } from '../../src/log/store.js';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';
import { type TestEvent, testEventCodec } from '../support/test-events.js';

const codec = testEventCodec;
const pods = (count: number, from = 1): Omit<TestEvent, 'seq'>[] =>
  Array.from({ length: count }, (_, i) => ({
    type: 'PodAdded',
    tsMs: from + i,
    uid: `pod-${from + i}`,
    note: 'x'.repeat(50),
  }));

const dir = mkdtempSync(join(tmpdir(), 'vole-crc-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let count = 0;
const newPath = () => join(dir, `log-${++count}.db`);

/** Flips one byte of the first occurrence of `text` in the (checkpointed) file. */
function flipByteOf(path: string, text: string): void {
  assert.ok(!existsSync(`${path}-wal`) || statSync(`${path}-wal`).size === 0, 'checkpointed');
  const bytes = readFileSync(path);
  const at = bytes.indexOf(Buffer.from(text, 'utf8'));
  assert.ok(at >= 0, `${text} is in the file`);
  bytes[at + 1] = bytes[at + 1]! ^ 0x01; // a letter stays a letter: the JSON still parses
  writeFileSync(path, bytes);
}

function quickCheckOf(path: string): string {
  const db = new Database(path, { readonly: true });
  const result = String(db.pragma('quick_check', { simple: true }));
  db.close();
  return result;
}

const flippedTitle =
  'restart: a byte flipped in a tail event is refused, saying what is damaged and what to do';
test(flippedTitle, async () => {
  const path = newPath();
  const scenario = parseScenario(
    readFileSync(join(import.meta.dirname, '../scenarios/kubelet-attach-mount.yaml'), 'utf8'),
  );
  const log = openSqliteLog(path, kubeletCore, { durability: 'normal' });
  await simulate(scenario, { log });
  const last = log.store.get(log.store.head().seq)!;
  log.sink.close();
  const peek = new Database(path, { readonly: true });
  const rawJson = peek.prepare('SELECT data FROM events WHERE seq = ?').pluck().get(last.seq);
  peek.close();
  assert.equal(typeof rawJson, 'string');
  flipByteOf(path, String(rawJson));
  assert.equal(quickCheckOf(path), 'ok', 'the page structure is intact: quick_check misses it');
  const before = readFileSync(path);

  const restarted = openSqliteLog(path, kubeletCore);
  assert.throws(
    () => restarted.loadWorld(),
    (error: unknown) =>
      error instanceof LogReadError &&
      error.code === 'corrupt' &&
      error.seq === last.seq &&
      new RegExp(`event seq ${last.seq} \\(${last.type}\\) does not match the checksum`).test(
        error.message,
      ) &&
      /vole export --salvage --db .* --out OUT/.test(error.message),
  );
  assert.ok(readFileSync(path).equals(before), 'the refused file is not written');
  // It was closed on refusal: its writer lock is free for the salvage or a retry.
  openLog(path, { codec: { parse: (raw) => raw as TestEvent }, mode: 'readwrite' }).close();

  const report: SalvageReport = { lastSeq: 0, headSeq: undefined, stop: undefined };
  const saved = [...salvageEvents(path, { parse: (raw) => raw as TestEvent }, report)];
  assert.equal(saved.length, last.seq - 1, 'salvage keeps what precedes the damaged row');
  assert.deepEqual(report.stop, {
    seq: last.seq,
    reason: 'it does not match the checksum written with it',
  });
});

test('restart: a damaged snapshot, or a row whose checksum was removed, is refused', () => {
  const path = newPath();
  const store = openLog<TestEvent>(path, { codec, mode: 'create', durability: 'normal' });
  store.append(pods(20), { expectedSeq: 0 });
  store.saveSnapshot({ seq: 20, tsMs: 20, format: 1, data: Buffer.from('a snapshot blob') });
  store.close();
  const raw = new Database(path);
  raw.prepare("UPDATE snapshots SET data = CAST('A snapshot blob' AS BLOB)").run();
  raw.prepare('UPDATE events SET crc = NULL WHERE seq = 7').run();
  raw.close();
  const again = openLog<TestEvent>(path, { codec, mode: 'readwrite' });
  assert.throws(
    () => again.latestSnapshot(),
    (error: unknown) =>
      error instanceof LogReadError &&
      error.code === 'corrupt' &&
      /the snapshot at seq 20 \(15 bytes\) does not match the checksum/.test(error.message),
  );
  let seen = 0;
  assert.throws(
    () => again.forEach({}, () => seen++),
    (error: unknown) =>
      error instanceof LogReadError && error.code === 'corrupt' && error.seq === 7,
  );
  assert.equal(seen, 6);
  again.close();
});

/** A 5,000-event log with a snapshot at its head, then one page mid-file zeroed. */
function logWithDamageOutsideTheTail(): string {
  const path = newPath();
  const store = openLog<TestEvent>(path, { codec, mode: 'create', durability: 'normal' });
  store.append(pods(5_000), { expectedSeq: 0 });
  store.saveSnapshot({ seq: 5_000, tsMs: 5_000, format: 1, data: Buffer.from('world') });
  store.close();
  const pageSizeBytes = 4096;
  const page = Math.floor(statSync(path).size / pageSizeBytes / 2);
  const fd = openSync(path, 'r+');
  writeSync(fd, Buffer.alloc(pageSizeBytes), 0, pageSizeBytes, page * pageSizeBytes);
  closeSync(fd);
  return path;
}

const outsideTitle =
  'restart: damage outside the tail is found in the background, and the writer stops';
test(outsideTitle, async () => {
  const path = logWithDamageOutsideTheTail();
  const damaged: LogDamagedError[] = [];
  const store = openLog<TestEvent>(path, {
    codec,
    mode: 'readwrite',
    onDamaged: (error) => damaged.push(error),
  });
  assert.equal(store.integrity.kind, 'pending', 'the open did not wait for the whole-file check');
  // What a restart reads is sound: the snapshot and the (empty) tail after it.
  assert.equal(store.latestSnapshot()?.seq, 5_000);
  assert.equal(
    store.forEach({ fromSeq: 5_001 }, () => {}),
    0,
  );
  const halted: LogDamagedError[] = [];
  const committer = new GroupCommitter<TestEvent>(store, { onHalted: (e) => halted.push(e) });
  assert.equal(committer.writable, true);

  const result = await store.checkInBackground();
  assert.equal(result.kind, 'damaged');
  assert.equal(damaged.length, 1, 'onDamaged told once');
  assert.match(damaged[0]!.message, /is damaged \(SQLite's quick_check, run in the background/);
  assert.match(damaged[0]!.message, /writer is stopped.*vole export --salvage/s);
  assert.deepEqual(halted, damaged, 'the committer stops with the store');
  assert.equal(committer.writable, false);
  committer.push(pods(1, 5_001)[0]!);
  assert.notEqual(committer.whenDurable(), undefined, 'never durable: nothing is appended');
  assert.throws(() => store.append(pods(1, 5_001), { expectedSeq: 5_000 }), LogDamagedError);
  assert.throws(
    () => store.saveSnapshot({ seq: 5_000, tsMs: 1, format: 1, data: 'x' }),
    LogDamagedError,
  );
  assert.equal(committer.close(), 1, 'the pushed event was never written');
  const raw = new Database(path, { readonly: true });
  assert.equal(raw.prepare('SELECT MAX(seq) FROM events').pluck().get(), 5_000);
  raw.close();
});

test('restart: a sound file passes the background check and keeps its writer', async () => {
  const path = newPath();
  openLog<TestEvent>(path, { codec, mode: 'create' }).close();
  const store = openLog<TestEvent>(path, { codec, mode: 'readwrite' });
  store.append(pods(3), { expectedSeq: 0 });
  assert.equal((await store.checkInBackground()).kind, 'ok');
  store.append(pods(1, 4), { expectedSeq: 3 });
  assert.equal(store.head().seq, 4);
  store.close();
});

/** A log laid out exactly as schema 2 wrote it: no crc columns. */
function writeVersion2(path: string, events: Omit<TestEvent, 'seq'>[]): void {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.exec(`CREATE TABLE events (seq INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL,
             type TEXT NOT NULL, data TEXT NOT NULL);
           CREATE TABLE snapshots (seq INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL,
             format INTEGER NOT NULL, data BLOB NOT NULL);
           CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
           INSERT INTO meta VALUES ('createdBySchema', '2');`);
  const insert = db.prepare('INSERT INTO events VALUES (?, ?, ?, ?)');
  events.forEach(({ tsMs, type, ...rest }, i) =>
    insert.run(i + 1, tsMs, type, JSON.stringify(rest)),
  );
  db.prepare('INSERT INTO snapshots VALUES (2, 2, 1, ?)').run(Buffer.from('old blob'));
  db.pragma(`application_id = ${logApplicationId}`);
  db.pragma('user_version = 2');
  db.close();
}

const olderTitle =
  'log: a schema 2 log opens; its rows read as unchecked, new rows carry checksums';
test(olderTitle, async () => {
  const path = newPath();
  writeVersion2(path, pods(5));
  const reader = openLog<TestEvent>(path, { codec, mode: 'readonly' });
  assert.deepEqual(
    [...reader.read()].map((e) => e.uid),
    pods(5).map((e) => e.uid),
  );
  assert.equal(reader.latestSnapshot()?.data.toString(), 'old blob');
  reader.close();

  const writer = openLog<TestEvent>(path, { codec, mode: 'readwrite' });
  assert.equal(writer.latestSnapshot()?.data.toString(), 'old blob', 'an unchecked snapshot');
  writer.append(pods(2, 6), { expectedSeq: 5 });
  assert.equal((await writer.checkInBackground()).kind, 'ok');
  assert.equal([...writer.read()].length, 7);
  writer.close();
  const raw = new Database(path, { readonly: true });
  assert.equal(raw.pragma('user_version', { simple: true }), logSchemaVersion);
  assert.deepEqual(
    raw.prepare('SELECT seq FROM events WHERE crc IS NULL').pluck().all(),
    [1, 2, 3, 4, 5],
  );
  assert.equal(
    raw.prepare("SELECT value FROM meta WHERE key = 'checksumsFromSeq'").pluck().get(),
    '6',
  );
  raw.close();
});
