/**
 * The event store over one open SQLite connection (STYLE.md §11–12): append-only, synchronous,
 * every statement prepared once, one IMMEDIATE transaction per appended batch, streaming
 * reads, snapshots as disposable caches. Opened by `openLog` (store.ts), never directly.
 */
import Database, { type Database as Db } from 'better-sqlite3';
import { assert } from '../assert.js';
import { Seq } from '../ids.js';
import { eventChecksum, snapshotChecksum } from './checksum.js';
import { decodeRow, encodeEvent, type EventCodec, type EventEnvelope } from './codec.js';
import {
  ExpectedSeqConflictError,
  LogDamagedError,
  LogReadError,
  LogReadonlyError,
} from './errors.js';
import { type BackgroundCheck, type IntegrityResult, quickCheckInBackground } from './integrity.js';
import { toReadError } from './sqlite-errors.js';
import {
  type EventRow,
  prepareReads,
  prepareWrites,
  type ReadStatements,
  type StoredRow,
  type WriteStatements,
} from './statements.js';

export interface ReadOptions {
  /** First seq to return (default 1). */
  fromSeq?: number;
  /** Last seq to return, inclusive (default: the end of the log). */
  toSeq?: number;
  /** At most this many events (default: no limit). */
  limit?: number;
}

export interface AppendResult {
  firstSeq: Seq;
  lastSeq: Seq;
}

/** The first and last events; all zero for an empty log. */
export interface LogBounds {
  firstSeq: Seq;
  lastSeq: Seq;
  firstTsMs: number;
  lastTsMs: number;
}

export interface Snapshot {
  seq: Seq;
  tsMs: number;
  format: number;
  data: Buffer;
}

export class EventStore<E extends EventEnvelope> {
  readonly path: string;
  readonly readonly: boolean;
  /** The most events one transaction writes; a larger append is split (see `append`). */
  readonly appendBatchEventsMax: number;
  private readonly db: Db;
  private readonly codec: EventCodec<E>;
  private readonly reads: ReadStatements;
  private readonly writes: WriteStatements | undefined;
  private transactionCount = 0;
  /** The first seq written with a checksum (schema.ts checksumsFromSeq). */
  private readonly checksumsFromSeq: number;
  private readonly timeoutMs: number;
  private readonly onDamaged: (error: LogDamagedError) => void;
  private halted: LogDamagedError | undefined;
  private readonly haltListeners: ((error: LogDamagedError) => void)[] = [];
  private check: {
    running?: BackgroundCheck;
    done?: Promise<IntegrityResult>;
    settle?: (result: IntegrityResult) => void;
  } = {};
  private integrityState: IntegrityResult | { kind: 'pending' | 'notRun' } = { kind: 'notRun' };

  private readonly onClose: (() => void) | undefined;

  /** Prepares every statement; `openLog` has checked the file's identity and schema. */
  constructor(opts: {
    db: Db;
    path: string;
    codec: EventCodec<E>;
    appendBatchEventsMax: number;
    checksumsFromSeq: number;
    /** Lock wait of the background check's connection. */
    timeoutMs: number;
    /** The background check found damage (after the writer was stopped). */
    onDamaged: (error: LogDamagedError) => void;
    /** Called once when the store closes (a writer releases its lock). */
    onClose?: () => void;
  }) {
    assert(Number.isSafeInteger(opts.appendBatchEventsMax), 'appendBatchEventsMax: an integer');
    assert(opts.appendBatchEventsMax > 0, 'appendBatchEventsMax must be positive');
    this.db = opts.db;
    this.path = opts.path;
    this.readonly = opts.db.readonly;
    this.codec = opts.codec;
    this.appendBatchEventsMax = opts.appendBatchEventsMax;
    this.onClose = opts.onClose;
    this.checksumsFromSeq = opts.checksumsFromSeq;
    this.timeoutMs = opts.timeoutMs;
    this.onDamaged = opts.onDamaged;
    this.reads = prepareReads(opts.db, Number.isFinite(opts.checksumsFromSeq));
    this.writes = this.readonly
      ? undefined
      : prepareWrites(opts.db, {
          head: this.reads.head,
          onConflict: (expectedSeq, actualSeq) => {
            throw new ExpectedSeqConflictError({ path: this.path, expectedSeq, actualSeq });
          },
        });
  }

  /** Append transactions committed through this store since it opened (tests, benchmarks). */
  get appendTransactionCount(): number {
    return this.transactionCount;
  }

  /** The last seq of the log, `{ seq: 0 }` when it is empty. */
  head(): { seq: Seq } {
    return { seq: Seq(this.readSafely(0, () => this.reads.head.get() ?? 0)) };
  }

  /**
   * Appends `events` after `expectedSeq`, giving them seqs expectedSeq + 1, + 2, … in order,
   * and returns the first and last. Every event is encoded and validated by the codec (with
   * its seq) before anything is written, so an invalid event writes nothing and the codec's
   * error is thrown as is. Each transaction re-reads the head under the write lock and throws
   * ExpectedSeqConflictError, writing nothing, when it is not `expectedSeq`.
   *
   * More than `appendBatchEventsMax` events are written as several transactions, each atomic
   * and each checking its own expected seq. If one of them fails (conflict, disk full, lock
   * timeout: SQLite's SqliteError is thrown as is), the earlier ones stay committed; `head()`
   * tells how far the batch got. The group committer never sends more than one transaction's
   * worth, so its batches are all-or-nothing.
   *
   * Empty batches and a negative or fractional expectedSeq are programming errors (assert).
   * A store opened read-only throws LogReadonlyError.
   */
  append(events: readonly Omit<E, 'seq'>[], opts: { expectedSeq: number }): AppendResult {
    this.writer('append'); // a read-only or halted store refuses before encoding
    const { expectedSeq } = opts;
    assert(events.length > 0, `${this.path}: append of an empty batch`);
    assertSeq(this.path, expectedSeq);
    const rows = events.map((event, index) => this.encode(event, expectedSeq + index + 1));
    return this.appendEncoded(rows, { expectedSeq });
  }

  /**
   * An event as a row of seq `seq`, encoded and validated by the codec (its error thrown as
   * is): what `append` writes, for a writer that encodes ahead (GroupCommitter.push).
   */
  encode(event: Omit<E, 'seq'>, seq: number): EventRow {
    return encodeEvent(this.codec, event, seq);
  }

  /**
   * Appends rows `encode` made, seqs expectedSeq + 1, + 2, … in order: `append` without
   * the encoding (its transactions, checks and errors).
   */
  appendEncoded(rows: readonly EventRow[], opts: { expectedSeq: number }): AppendResult {
    const writes = this.writer('append');
    const { expectedSeq } = opts;
    assert(rows.length > 0, `${this.path}: append of an empty batch`);
    assertSeq(this.path, expectedSeq);
    assert(
      rows.every((row, i) => row[0] === expectedSeq + i + 1),
      () => `${this.path}: rows encoded for other seqs than ${expectedSeq + 1}…`,
    );
    for (let start = 0; start < rows.length; start += this.appendBatchEventsMax) {
      const chunk = rows.slice(start, start + this.appendBatchEventsMax);
      this.commit(writes, chunk, expectedSeq + start);
    }
    return { firstSeq: Seq(expectedSeq + 1), lastSeq: Seq(expectedSeq + rows.length) };
  }

  private commit(writes: WriteStatements, rows: readonly EventRow[], expectedSeq: number): void {
    try {
      writes.appendBatch.immediate(rows, expectedSeq);
    } catch (error) {
      // better-sqlite3 rolls back a transaction function that throws; if SQLite had already
      // rolled back on its own and we were still "in" one, the connection would be unusable.
      assert(!this.db.inTransaction, `${this.path}: a failed append left a transaction open`);
      throw error;
    }
    this.transactionCount++;
  }

  /**
   * Streams events with fromSeq <= seq <= toSeq in seq order, at most `limit` (STYLE.md §11:
   * `stmt.iterate()`, never `all()`, so a million-event replay holds one row at a time).
   * Lazy: nothing is read before the first `next()`. Each row is decoded and validated by
   * the codec; a row it rejects throws LogReadError 'invalidEvent' naming the seq, a damaged
   * file LogReadError 'corrupt'. While an iteration is unfinished the connection is busy:
   * better-sqlite3 refuses writes on it (append, group-commit flush) until the iterator ends
   * or is closed with `break`/`return()`; it also pins a WAL snapshot, so finish promptly.
   */
  read(opts: ReadOptions = {}): IterableIterator<E> {
    const { fromSeq, toSeq, limit } = this.range(opts);
    return this.stream({ fromSeq, toSeq, limit });
  }

  /**
   * Calls `visit` with every event read() would yield, in order, and returns how many: the
   * same read without a generator between the rows and the caller, for replays of a whole
   * log (resuming a generator per row cost about a sixth of the read path). Read failures
   * are read()'s; whatever `visit` throws passes through as it is, and ends the read.
   */
  forEach(opts: ReadOptions, visit: (event: E) => void): number {
    const { fromSeq, toSeq, limit } = this.range(opts);
    let count = 0;
    let nextSeq = Math.max(fromSeq, 1); // where a read failure happened, for the message
    let visiting = false;
    try {
      for (const row of this.reads.range.iterate(fromSeq, toSeq, limit)) {
        const event = this.decode(row);
        nextSeq = row[0] + 1;
        visiting = true;
        visit(event);
        visiting = false;
        count++;
      }
    } catch (error) {
      if (visiting) throw error;
      throw toReadError(error, this.path, nextSeq);
    }
    return count;
  }

  /** read()'s options checked, with SQLite's "no limit" (a negative LIMIT) as the default. */
  private range(opts: ReadOptions): { fromSeq: number; toSeq: number; limit: number } {
    const fromSeq = opts.fromSeq ?? 1;
    const toSeq = opts.toSeq ?? Number.MAX_SAFE_INTEGER;
    assert(Number.isSafeInteger(fromSeq) && Number.isSafeInteger(toSeq), 'read: integer seqs');
    const { limit } = opts;
    assert(
      limit === undefined || (Number.isSafeInteger(limit) && limit >= 0),
      () => `read: limit ${limit} is not a count`,
    );
    return { fromSeq, toSeq, limit: limit ?? -1 };
  }

  private *stream(opts: { fromSeq: number; toSeq: number; limit: number }): Generator<E> {
    let nextSeq = Math.max(opts.fromSeq, 1); // where a read failure happened, for the message
    try {
      for (const row of this.reads.range.iterate(opts.fromSeq, opts.toSeq, opts.limit)) {
        const event = this.decode(row);
        nextSeq = row[0] + 1;
        yield event;
      }
    } catch (error) {
      throw toReadError(error, this.path, nextSeq);
    }
  }

  /** The event at `seq`, or undefined when there is none (0, past the head). */
  get(seq: number): E | undefined {
    assert(Number.isSafeInteger(seq), `get: seq ${seq} is not an integer`);
    const row = this.readSafely(seq, () => this.reads.one.get(seq));
    return row === undefined ? undefined : this.decode(row);
  }

  /**
   * The first and last events' seqs and timestamps (all 0 for an empty log). Two b-tree
   * descents, whatever the size: no MIN/MAX scan over ts_ms, which has no index.
   */
  bounds(): LogBounds {
    return this.readSafely(0, () => {
      const first = this.reads.first.get();
      const last = this.reads.last.get();
      if (first === undefined || last === undefined) {
        return { firstSeq: Seq(0), lastSeq: Seq(0), firstTsMs: 0, lastTsMs: 0 };
      }
      return {
        firstSeq: Seq(first.seq),
        lastSeq: Seq(last.seq),
        firstTsMs: first.tsMs,
        lastTsMs: last.tsMs,
      };
    });
  }

  /**
   * The last seq whose event happened at or before `tsMs`; 0 when the log is empty or
   * starts later. A bisection on seq (about 20 primary-key lookups for a million events),
   * valid because vole's clock stamps events with non-decreasing tsMs. The store does not
   * enforce that order (a wall clock stepped back must not stop the engine); over a stretch
   * where time went backwards the answer is some seq s with ts(s) <= tsMs < ts(s + 1).
   */
  seqAtOrBeforeTs(tsMs: number): Seq {
    const b = this.bounds();
    if (b.lastSeq === 0 || tsMs < b.firstTsMs) return Seq(0);
    if (tsMs >= b.lastTsMs) return b.lastSeq;
    let lo: number = b.firstSeq; // ts(lo) <= tsMs
    let hi: number = b.lastSeq; // ts(hi) > tsMs
    while (hi - lo > 1) {
      const mid = lo + Math.floor((hi - lo) / 2);
      if (this.tsAt(mid) <= tsMs) lo = mid;
      else hi = mid;
    }
    return Seq(lo);
  }

  private tsAt(seq: number): number {
    const tsMs = this.readSafely(seq, () => this.reads.tsAt.get(seq));
    // Seqs are assigned head + 1 and never deleted, so every seq up to the head exists.
    assert(tsMs !== undefined, `${this.path}: seq ${seq} is missing below the head`);
    return tsMs;
  }

  /**
   * Stores a snapshot of derived state at `seq` (replacing one at the same seq). Snapshots
   * are caches: never needed for correctness, always rebuildable from the events. A
   * snapshot ahead of the log is a programming error (assert). Read-only: LogReadonlyError.
   */
  saveSnapshot(snapshot: {
    seq: number;
    tsMs: number;
    format: number;
    data: Buffer | string;
  }): void {
    const writes = this.writer('saveSnapshot');
    const { seq, tsMs, format } = snapshot;
    assert(Number.isSafeInteger(seq) && seq >= 0, `saveSnapshot: seq ${seq} is not a seq`);
    assert(Number.isSafeInteger(tsMs), `saveSnapshot: tsMs ${tsMs} is not an integer`);
    assert(Number.isSafeInteger(format), `saveSnapshot: format ${format} is not an integer`);
    const headSeq = this.head().seq;
    assert(seq <= headSeq, `saveSnapshot: seq ${seq} is past the head ${headSeq}`);
    const data = Buffer.from(snapshot.data);
    writes.insertSnapshot.run(seq, tsMs, format, data, snapshotChecksum(data));
  }

  /** The snapshot with the highest seq at or before `atOrBeforeSeq` (default: any). */
  latestSnapshot(opts: { atOrBeforeSeq?: number } = {}): Snapshot | undefined {
    const atOrBeforeSeq = opts.atOrBeforeSeq ?? Number.MAX_SAFE_INTEGER;
    const row = this.readSafely(atOrBeforeSeq, () => this.reads.snapshot.get(atOrBeforeSeq));
    if (row === undefined) return undefined;
    const data = Buffer.isBuffer(row.data) ? row.data : Buffer.from(String(row.data));
    if (row.crc !== null && row.crc !== snapshotChecksum(data)) {
      throw this.damagedRow(row.seq, `the snapshot at seq ${row.seq} (${data.length} bytes)`);
    }
    return { seq: Seq(row.seq), tsMs: row.tsMs, format: row.format, data };
  }

  /** Drops snapshots after `seq` (a no-op when there are none). Read-only: LogReadonlyError. */
  deleteSnapshotsAfter(seq: number): void {
    const writes = this.writer('deleteSnapshotsAfter');
    assert(Number.isSafeInteger(seq), `deleteSnapshotsAfter: seq ${seq} is not an integer`);
    writes.deleteSnapshotsAfter.run(seq);
  }

  /**
   * Copies the WAL's committed pages into the database file (PRAGMA wal_checkpoint(PASSIVE):
   * it never waits for a lock; a reader still using old pages leaves them for the next one)
   * and fsyncs it, so the next commits restart the WAL from its start. Not needed for
   * durability (a commit at FULL has fsynced the WAL); the group committer calls it when
   * the writer is idle (store.ts walAutocheckpointPages is the backstop). Answers the WAL's
   * frames and how many of them are now in the database file.
   */
  checkpoint(): { walFrames: number; checkpointedFrames: number } {
    this.writer('checkpoint');
    const [row] = this.db.pragma('wal_checkpoint(PASSIVE)') as {
      log: number;
      checkpointed: number;
    }[];
    assert(row !== undefined, `${this.path}: wal_checkpoint returned no row`);
    return { walFrames: row.log, checkpointedFrames: row.checkpointed };
  }

  /** Closes the connection; a second call is a no-op. Flush any group committer first. */
  close(): void {
    if (!this.db.open) return;
    this.cancelCheck();
    if (this.writes !== undefined && !this.knownWhole()) this.closeUnchanged();
    else this.db.close();
    this.onClose?.();
  }

  /**
   * Closes the writer's connection without the checkpoint SQLite makes when the last
   * connection to a WAL database closes: that would copy a previous process's WAL into a
   * file not known whole (or known damaged). A read-only connection held open meanwhile
   * makes this one not the last, and a read-only connection never checkpoints; so the file
   * and its WAL stay byte for byte as they were.
   */
  private closeUnchanged(): void {
    let guard: Db | undefined;
    try {
      guard = new Database(this.path, { readonly: true, timeout: this.timeoutMs });
      guard.pragma('schema_version'); // a read transaction: it opens the WAL index
    } catch {
      // Unreadable as it is: no checkpoint can read it either.
    }
    this.db.close();
    guard?.close();
  }

  /**
   * The writer's statements, once the file is known whole: a write that comes before the
   * background check has answered runs the check here first, on this connection (never a
   * write to a file not known whole); a damaged file throws LogDamagedError.
   */
  private writer(operation: string): WriteStatements {
    if (this.writes === undefined) throw new LogReadonlyError({ path: this.path, operation });
    if (this.integrityState.kind === 'pending') this.checkNow();
    if (this.halted !== undefined) throw this.halted;
    return this.writes;
  }

  /** Why the writer was stopped (the background check found damage), if it was. */
  get haltedBy(): LogDamagedError | undefined {
    return this.halted;
  }

  /** Calls `listener` when the writer is stopped (once; group commit stops with it). */
  onHalt(listener: (error: LogDamagedError) => void): void {
    this.haltListeners.push(listener);
  }

  /** What the background check found so far (notRun: none was asked for). */
  get integrity(): IntegrityResult | { kind: 'pending' | 'notRun' } {
    return this.integrityState;
  }

  /**
   * Starts PRAGMA quick_check of the whole file on a worker (integrity.ts), at once, so it
   * runs while the main thread folds the snapshot and tail and plans: a synchronous start
   * (open, load, first plan) does not wait for it. Until it answers, the file is not known
   * whole: every write runs the check first on this connection (`writer`), and the group
   * committer holds its commits (and so every act on the host) until `done` settles.
   * Damage stops the writer: every later write throws LogDamagedError, and `onDamaged` is
   * told. Returns the result; a second call returns the first call's. Never settles if the
   * store is closed before the check ends.
   */
  checkInBackground(): Promise<IntegrityResult> {
    this.check.done ??= new Promise((resolve) => {
      this.integrityState = { kind: 'pending' };
      this.check.settle = resolve;
      const running = quickCheckInBackground(this.path, this.timeoutMs);
      this.check.running = running;
      void running.done.then((result) => {
        this.check.running = undefined;
        if (this.integrityState.kind !== 'pending') return; // checked here meanwhile
        // The worker could not run it (an I/O error, a lock): run it here instead.
        if (result.kind === 'failed') this.checkNow();
        else this.settleCheck(result);
      });
    });
    return this.check.done;
  }

  /**
   * The pending whole-file check, run now on this connection, blocking: what a write (or a
   * close with commits held) does before the worker has answered. Anything that stops
   * quick_check from reading the whole file counts as damage: nothing is written to a file
   * not known whole.
   */
  checkNow(): void {
    if (this.integrityState.kind !== 'pending') return;
    const started = performance.now();
    let result: IntegrityResult;
    try {
      const rows = this.db.pragma('quick_check(5)') as { quick_check: string }[];
      const problems = rows.map((row) => row.quick_check).filter((text) => text !== 'ok');
      const durationMs = performance.now() - started;
      result =
        problems.length === 0
          ? { kind: 'ok', durationMs }
          : { kind: 'damaged', problems, durationMs };
    } catch (error) {
      const code = String((error as { code?: unknown }).code);
      const problems = [`${code}: ${(error as Error).message}`];
      result = { kind: 'damaged', problems, durationMs: performance.now() - started };
    }
    this.check.running?.cancel();
    this.check.running = undefined;
    this.settleCheck(result);
  }

  /** False while the whole-file check is pending, or once it found damage. */
  private knownWhole(): boolean {
    return this.integrityState.kind !== 'pending' && this.halted === undefined;
  }

  private settleCheck(result: IntegrityResult): void {
    this.integrityState = result;
    if (result.kind === 'damaged') this.halt(result.problems);
    this.check.settle?.(result);
  }

  private cancelCheck(): void {
    this.check.running?.cancel();
    this.check = {};
  }

  private halt(problems: readonly string[]): void {
    if (this.halted !== undefined) return;
    this.halted = new LogDamagedError({ path: this.path, problems });
    for (const listener of this.haltListeners) listener(this.halted);
    this.onDamaged(this.halted);
  }

  /** A row or snapshot whose checksum says it changed after it was written. */
  private damagedRow(seq: number, what: string): LogReadError {
    return new LogReadError({
      code: 'corrupt',
      path: this.path,
      seq,
      message:
        `${this.path}: ${what} does not match the checksum written with it: the file is ` +
        `damaged or was changed outside vole. Nothing was written to it. Save what is still ` +
        `readable with \`vole export --salvage --db ${this.path} --out OUT\`, then ` +
        `\`vole import OUT --db NEW\`, or restore it from a backup.`,
    });
  }

  private decode(row: StoredRow): E {
    const [seq, tsMs, type, data, crc] = row;
    if (
      crc === null ? seq >= this.checksumsFromSeq : crc !== eventChecksum(seq, tsMs, type, data)
    ) {
      throw this.damagedRow(seq, `event seq ${seq} (${String(type).slice(0, 60)})`);
    }
    try {
      return decodeRow(this.codec, row);
    } catch (error) {
      throw new LogReadError({
        code: 'invalidEvent',
        path: this.path,
        seq,
        cause: error,
        message:
          `${this.path}: event seq ${seq} (${type}) cannot be read: ` +
          `${error instanceof Error ? error.message : String(error)}. It was written by ` +
          `another vole version or changed outside vole; read it with the vole that wrote ` +
          `it, or replay only up to seq ${seq - 1}.`,
      });
    }
  }

  /** Runs a read, turning SQLite failures into LogReadError at `seq`. */
  private readSafely<T>(seq: number, fn: () => T): T {
    try {
      return fn();
    } catch (error) {
      throw toReadError(error, this.path, seq);
    }
  }
}

function assertSeq(path: string, expectedSeq: number): void {
  assert(
    Number.isSafeInteger(expectedSeq) && expectedSeq >= 0,
    () => `${path}: append: expectedSeq ${expectedSeq} is not a seq`,
  );
}
