/**
 * The SQLite event store (STYLE.md §11–12): append-only, WAL, synchronous API, every
 * statement prepared once, one transaction per appended batch (group commit), streaming
 * reads, snapshots as disposable caches. The file is marked as a vole log
 * (PRAGMA application_id) and versioned (PRAGMA user_version); a foreign or newer file is
 * refused untouched.
 */
import { existsSync, statSync } from 'node:fs';
import Database, { type Database as Db, SqliteError, type Statement } from 'better-sqlite3';
import { assert } from '../assert.js';
import { appendBatchEventsMax, logApplicationId, logSchemaVersion } from '../constants.js';
import { Seq } from '../ids.js';
import { ExpectedSeqConflictError, LogOpenError, LogReadError } from './errors.js';

export interface EventCodec<E> {
  parse(raw: unknown): E;
}

type Envelope = { seq: number; tsMs: number; type: string };
type Unsequenced<E> = E extends Envelope ? Omit<E, 'seq'> : never;

export interface OpenLogOptions<E> {
  readonly codec: EventCodec<E>;
  /** create: make the file when missing; readwrite: it must exist; readonly: never write. */
  readonly mode: 'create' | 'readwrite' | 'readonly';
  /**
   * full (default): every commit is fsynced. vole promises that OperationStarted is durable
   * before the host is touched, which WAL's NORMAL level does not give after a power cut.
   */
  readonly durability?: 'full' | 'normal';
  /** How long to wait for another process's lock (busy timeout). */
  readonly timeoutMs?: number;
}

export interface Snapshot {
  readonly seq: number;
  readonly tsMs: number;
  readonly format: number;
  readonly data: Buffer;
}

/** Migrations by target version; index 1 creates the first schema. Never rewrite events. */
const migrations: ((db: Db) => void)[] = [
  () => {},
  (db) => {
    db.exec(`
      CREATE TABLE events (seq INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL);
      CREATE TABLE snapshots (seq INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL, format INTEGER NOT NULL, data BLOB NOT NULL);
    `);
  },
];
assert(migrations.length === logSchemaVersion + 1, 'one migration per schema version');

function openError(path: string, error: unknown): LogOpenError {
  const code = error instanceof SqliteError ? error.code : '';
  if (code === 'SQLITE_NOTADB') {
    return new LogOpenError('notSqlite', path, `${path} is not a vole log (not an SQLite database); check the --db path`);
  }
  if (code.startsWith('SQLITE_CORRUPT')) {
    return new LogOpenError('corrupt', path, `${path} is corrupt (${(error as Error).message}); restore it from a copy or import an export (vole import)`);
  }
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
    return new LogOpenError('locked', path, `${path} is locked by another process (${(error as Error).message}); stop the other vole, or open it read-only`);
  }
  if (code === 'SQLITE_CANTOPEN') {
    return new LogOpenError('notFound', path, `cannot open ${path}: ${(error as Error).message}`);
  }
  return new LogOpenError('corrupt', path, `cannot open ${path}: ${(error as Error).message}`);
}

export class EventStore<E extends Envelope> {
  private readonly insert: Statement;
  private readonly selectHead: Statement;
  private readonly selectRange: Statement;
  private readonly selectOne: Statement;
  private readonly selectBounds: Statement;
  private readonly selectAtTs: Statement;
  private readonly insertSnapshot: Statement;
  private readonly selectSnapshot: Statement;
  private readonly deleteSnapshots: Statement;
  private readonly appendBatch: (rows: Omit<E, 'seq'>[], expectedSeq: number) => { firstSeq: Seq; lastSeq: Seq };

  constructor(private readonly db: Db, readonly path: string, readonly readonly: boolean, private readonly codec: EventCodec<E>) {
    this.selectHead = db.prepare('SELECT COALESCE(MAX(seq), 0) AS seq FROM events');
    this.selectRange = db.prepare('SELECT seq, ts_ms, type, data FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq LIMIT ?').raw();
    this.selectOne = db.prepare('SELECT seq, ts_ms, type, data FROM events WHERE seq = ?').raw();
    this.selectBounds = db.prepare('SELECT MIN(seq) AS firstSeq, MAX(seq) AS lastSeq, MIN(ts_ms) AS firstTsMs, MAX(ts_ms) AS lastTsMs FROM events');
    this.selectAtTs = db.prepare('SELECT COALESCE(MAX(seq), 0) AS seq FROM events WHERE ts_ms <= ?');
    this.selectSnapshot = db.prepare('SELECT seq, ts_ms AS tsMs, format, data FROM snapshots WHERE seq <= ? ORDER BY seq DESC LIMIT 1');
    this.insert = readonly ? this.selectHead : db.prepare('INSERT INTO events (seq, ts_ms, type, data) VALUES (?, ?, ?, ?)');
    this.insertSnapshot = readonly ? this.selectHead : db.prepare('INSERT OR REPLACE INTO snapshots (seq, ts_ms, format, data) VALUES (?, ?, ?, ?)');
    this.deleteSnapshots = readonly ? this.selectHead : db.prepare('DELETE FROM snapshots WHERE seq > ?');
    // Created once (STYLE.md §12); the expected seq is checked inside the transaction.
    const batch = db.transaction((rows: Omit<E, 'seq'>[], expectedSeq: number) => {
      const head = this.headSeq();
      if (head !== expectedSeq) throw new ExpectedSeqConflictError(expectedSeq, head);
      let seq = head;
      for (const row of rows) {
        seq++;
        const { type, tsMs, seq: _ignored, ...rest } = row as unknown as Partial<Envelope> & Record<string, unknown>;
        this.codec.parse({ ...row, seq });
        this.insert.run(seq, tsMs, type, JSON.stringify(rest));
      }
      return { firstSeq: Seq(head + 1), lastSeq: Seq(seq) };
    });
    this.appendBatch = (rows, expectedSeq) => batch.immediate(rows, expectedSeq);
  }

  private headSeq(): number {
    return (this.selectHead.get() as { seq: number }).seq;
  }

  head(): { seq: Seq } {
    return { seq: Seq(this.headSeq()) };
  }

  /**
   * Appends events after `expectedSeq`, assigning seqs from expectedSeq + 1. Each event is
   * validated first; nothing is written if any is invalid. Batches larger than
   * appendBatchEventsMax are written as several transactions (each atomic).
   */
  append(events: readonly Unsequenced<E>[] | readonly Omit<E, 'seq'>[], opts: { expectedSeq: number }): { firstSeq: Seq; lastSeq: Seq } {
    if (this.readonly) throw new LogOpenError('readonly', this.path, `${this.path} is open read-only; nothing can be appended`);
    assert(events.length > 0, 'append: empty batch');
    let expected = opts.expectedSeq;
    let first: Seq | undefined;
    let last = Seq(expected);
    for (let i = 0; i < events.length; i += appendBatchEventsMax) {
      const chunk = events.slice(i, i + appendBatchEventsMax) as Omit<E, 'seq'>[];
      try {
        const result = this.appendBatch(chunk, expected);
        first ??= result.firstSeq;
        last = result.lastSeq;
        expected = result.lastSeq;
      } finally {
        assert(!this.db.inTransaction, 'append: a failed batch left a transaction open');
      }
    }
    return { firstSeq: first ?? Seq(opts.expectedSeq + 1), lastSeq: last };
  }

  private decode(row: unknown[]): E {
    const [seq, tsMs, type, data] = row as [number, number, string, string];
    try {
      return this.codec.parse({ ...(JSON.parse(data) as object), seq, tsMs, type });
    } catch (error) {
      throw new LogReadError(seq, `${this.path}: event seq ${seq} cannot be read: ${(error as Error).message}`);
    }
  }

  /** Streams events in seq order (iterate, never all: PERF.md). */
  *read(opts: { fromSeq?: number; toSeq?: number; limit?: number } = {}): Generator<E> {
    const rows = this.selectRange.iterate(opts.fromSeq ?? 1, opts.toSeq ?? Number.MAX_SAFE_INTEGER, opts.limit ?? -1);
    try {
      for (const row of rows) yield this.decode(row as unknown[]);
    } catch (error) {
      if (error instanceof SqliteError) throw new LogReadError(0, openError(this.path, error).message);
      throw error;
    }
  }

  get(seq: number): E | undefined {
    const row = this.selectOne.get(seq) as unknown[] | undefined;
    return row === undefined ? undefined : this.decode(row);
  }

  bounds(): { firstSeq: number; lastSeq: number; firstTsMs: number; lastTsMs: number } {
    const b = this.selectBounds.get() as Record<string, number | null>;
    return { firstSeq: b.firstSeq ?? 0, lastSeq: b.lastSeq ?? 0, firstTsMs: b.firstTsMs ?? 0, lastTsMs: b.lastTsMs ?? 0 };
  }

  /** The last event at or before `tsMs` (0 when none); timestamps never decrease with seq. */
  seqAtOrBeforeTs(tsMs: number): Seq {
    return Seq((this.selectAtTs.get(tsMs) as { seq: number }).seq);
  }

  saveSnapshot(snapshot: { seq: number; tsMs: number; format: number; data: Buffer | string }): void {
    if (this.readonly) return; // A cache: a read-only reader simply does not write one.
    this.insertSnapshot.run(snapshot.seq, snapshot.tsMs, snapshot.format, Buffer.from(snapshot.data));
  }

  latestSnapshot(opts: { atOrBeforeSeq?: number } = {}): Snapshot | undefined {
    return this.selectSnapshot.get(opts.atOrBeforeSeq ?? Number.MAX_SAFE_INTEGER) as Snapshot | undefined;
  }

  deleteSnapshotsAfter(seq: number): void {
    if (!this.readonly) this.deleteSnapshots.run(seq);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}

function checkIdentity(db: Db, path: string): number {
  const applicationId = db.pragma('application_id', { simple: true }) as number;
  const version = db.pragma('user_version', { simple: true }) as number;
  const tables = (db.prepare("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table'").get() as { n: number }).n;
  if (applicationId !== logApplicationId && tables > 0) {
    throw new LogOpenError('foreign', path, `${path} is an SQLite database but not a vole log; check the --db path`);
  }
  if (version > logSchemaVersion) {
    throw new LogOpenError('newerSchema', path, `${path} was written by a newer vole (log schema ${version}; this vole reads up to ${logSchemaVersion}); upgrade vole to open it. The file was not changed.`);
  }
  return version;
}

/** Opens (or creates) a log. Throws LogOpenError with a code and a message saying what to do. */
export function openLog<E extends Envelope>(path: string, opts: OpenLogOptions<E>): EventStore<E> {
  const readonly = opts.mode === 'readonly';
  if (opts.mode !== 'create' && !existsSync(path)) {
    throw new LogOpenError('notFound', path, `${path} does not exist; give the path of a vole log (vole run or vole simulate --db create one)`);
  }
  if (existsSync(path) && statSync(path).isDirectory()) {
    throw new LogOpenError('notSqlite', path, `${path} is a directory; give the path of a vole log file`);
  }
  let db: Db | undefined;
  try {
    db = new Database(path, { readonly, fileMustExist: opts.mode !== 'create', timeout: opts.timeoutMs ?? 5000 });
    const version = checkIdentity(db, path);
    if (!readonly) {
      db.pragma('journal_mode = WAL');
      db.pragma(`synchronous = ${opts.durability === 'normal' ? 'NORMAL' : 'FULL'}`);
      if (version < logSchemaVersion) {
        db.transaction(() => {
          for (let v = version + 1; v <= logSchemaVersion; v++) migrations[v]!(db!);
          db!.pragma(`application_id = ${logApplicationId}`);
          db!.pragma(`user_version = ${logSchemaVersion}`);
        }).immediate();
      }
    } else if (version === 0) {
      throw new LogOpenError('notSqlite', path, `${path} is empty, not a vole log yet; give the path of a log vole wrote`);
    }
    // A quick integrity probe: reading the head touches the table's pages.
    db.prepare('SELECT COALESCE(MAX(seq), 0) AS seq FROM events').get();
    return new EventStore<E>(db, path, readonly, opts.codec);
  } catch (error) {
    db?.close();
    if (error instanceof LogOpenError) throw error;
    throw openError(path, error);
  }
}
