/**
 * Group commit (docs/style.md rule 12, docs/performance.md): one fsync per event caps the engine near 14 k
 * events/s while 1,000 per transaction reach 61 k, and each commit blocks the event loop for
 * its fsync (0.2 ms to several ms on a shared disk). So a commit is made only when it is
 * needed (docs/reliability.md, "Durable points"):
 *
 * - `whenDurable()` (the executor before it touches the host) commits everything pushed so
 *   far in a microtask: every wait of the same turn (the operations one plan starts) shares
 *   one commit;
 * - events nobody waits on (a call's outcome, a pod from a source) ride along with the next
 *   such commit, or are committed `lazyCommitMs` after the first of them, whichever comes
 *   first; `flush()` commits at once (a snapshot, a stop).
 *
 * SQLite's WAL checkpoint (copy the WAL into the database file and fsync it) is made here too,
 * off every operation's path: once `checkpoint.afterCommits` commits or `afterEvents` events
 * have gone by, it runs when nothing has been pushed for `idleMs`, instead of inside the
 * commit that crosses SQLite's threshold, which some operation was waiting on.
 *
 * A log that cannot be written (disk full, I/O error, a lock another program holds: any
 * SqliteError) blocks the committer instead of stopping the process: the buffer is kept in
 * order, `writable` turns false (the engine starts no operation), the append is retried
 * with backoff, and whoever waits on `whenDurable()` resumes once it succeeds.
 *
 * Nothing is committed before the file is known whole: while the store's whole-file check
 * runs (a restart's, EventStore.checkInBackground) the committer buffers, and every
 * `whenDurable()`, even of events an earlier process made durable, waits for the check. As
 * every act on the host waits for its operation to be durable first, the engine may fold
 * and plan meanwhile but touches nothing; a damaged file halts the committer with nothing
 * written and every wait left pending for good.
 */
import { statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import { SqliteError } from 'better-sqlite3';
import { assert } from '../assert.js';
import { Seq } from '../ids.js';
import type { EventEnvelope } from './codec.js';
import type { LogDamagedError } from './errors.js';
import type { EventStore } from './event-store.js';
import type { EventRow } from './statements.js';
import { SeqWaiters } from './seq-waiters.js';
import type {
  CheckpointPolicy,
  GroupCommitterOptions,
  LogBlockage,
} from './group-commit-options.js';

/**
 * About as often as SQLite's default (1,000 pages: some 250 small commits), once the writer
 * has been idle 2 ms: pods arriving 10 ms apart leave it idle most of each gap.
 */
export const checkpointDefault: CheckpointPolicy = {
  afterCommits: 250,
  afterEvents: 4_000,
  idleMs: 2,
};

/**
 * The longest an event nobody waits on stays buffered: what a crash may lose of them (a
 * call's outcome, which the next start resolves again; a source's event, sent again).
 */
const lazyCommitMsDefault = 20;

interface Blocked {
  readonly sinceMs: number;
  readonly attempts: number;
  readonly delayMs: number;
  readonly timer: NodeJS.Timeout;
}

export class GroupCommitter<E extends EventEnvelope> {
  private readonly store: EventStore<E>;
  private buffer: Omit<E, 'seq'>[] = [];
  /** The buffer's first events as rows, in order (encodeThrough), made ahead or at a commit. */
  private rows: EventRow[] = [];
  private encodeQueued = false;
  private durable: Seq;
  /** The lazy commit of events nobody waits on. */
  private scheduled: NodeJS.Timeout | undefined;
  /** A commit some wait needs, queued as a microtask. */
  private commitQueued = false;
  private closed = false;
  private blocked: Blocked | undefined;
  private halted: LogDamagedError | undefined;
  /** Settles once the store's whole-file check has answered; undefined when it has. */
  private gate: Promise<void> | undefined;
  private readonly waiters = new SeqWaiters();
  private readonly writableListeners: (() => void)[] = [];
  private readonly committedListeners: ((seconds: number, events: number) => void)[] = [];
  private readonly checkpointPolicy: CheckpointPolicy | undefined;
  private sinceCheckpoint = { commits: 0, events: 0 };
  /** The idle checkpoint, armed once one is due; each push restarts it. */
  private idleTimer: NodeJS.Timeout | undefined;
  private checkpoints = 0;

  /** Takes over appending to `store`, which must be writable; nothing else may append to it. */
  constructor(
    store: EventStore<E>,
    private readonly opts: GroupCommitterOptions = {},
  ) {
    assert(!store.readonly, `${store.path}: group commit needs a writable store`);
    this.store = store;
    this.durable = store.head().seq;
    this.checkpointPolicy =
      opts.checkpoint === false ? undefined : (opts.checkpoint ?? checkpointDefault);
    store.onHalt((error) => this.halt(error));
    if (store.haltedBy !== undefined) this.halt(store.haltedBy);
    if (store.integrity.kind === 'pending')
      this.gate = store.checkInBackground().then(() => this.openGate());
  }

  /** The whole-file check has answered: commit what was held, unless it found damage. */
  private openGate(): void {
    if (this.gate === undefined) return;
    this.gate = undefined;
    if (this.halted !== undefined || this.closed) return;
    this.opts.onVerified?.();
    if (this.buffer.length > 0) this.flush();
  }

  /**
   * True once the log's file is known whole (its check passed, or none was due) and not
   * halted: until then nothing is committed.
   */
  get verified(): boolean {
    return this.gate === undefined && this.halted === undefined;
  }

  /** Why the log's writer was stopped for good, if it was (see onHalted). */
  get haltedBy(): LogDamagedError | undefined {
    return this.halted;
  }

  private halt(error: LogDamagedError): void {
    if (this.halted !== undefined) return;
    this.halted = error;
    if (this.scheduled !== undefined) clearTimeout(this.scheduled);
    this.scheduled = undefined;
    if (this.blocked !== undefined) clearTimeout(this.blocked.timer);
    this.disarmCheckpoint();
    this.opts.onHalted?.(error);
  }

  /** The last seq known to be committed. */
  get durableSeq(): Seq {
    return this.durable;
  }

  /** Events pushed but not yet committed. */
  get pendingCount(): number {
    return this.buffer.length;
  }

  /** False while the log is blocked (a write failed and is being retried) or halted. */
  get writable(): boolean {
    return this.blocked === undefined && this.halted === undefined;
  }

  /** Calls `listener` each time a blocked log is written again. */
  onWritable(listener: () => void): void {
    this.writableListeners.push(listener);
  }

  /** WAL checkpoints made so far (tests, benchmarks). */
  get checkpointCount(): number {
    return this.checkpoints;
  }

  /** Calls `listener` after each commit that wrote events, with its duration and their count. */
  onCommitted(listener: (seconds: number, events: number) => void): void {
    this.committedListeners.push(listener);
  }

  /**
   * Buffers `event` and returns the seq it will have, at once, so callers can refer to it
   * (an operation's cause). The first push after a commit schedules the lazy commit, unless a
   * wait commits first. A full buffer (the store's appendBatchEventsMax) is flushed first,
   * synchronously: backpressure, so a batch is one transaction. While the log is blocked the
   * buffer grows and the retry writes it.
   */
  push(event: Omit<E, 'seq'>): Seq {
    assert(!this.closed, `${this.store.path}: push after the group committer was closed`);
    if (this.buffer.length >= this.store.appendBatchEventsMax) this.flush();
    this.buffer.push(event);
    if (!this.encodeQueued) {
      this.encodeQueued = true;
      queueMicrotask(() => this.encodeAhead());
    }
    this.idleTimer?.refresh();
    this.scheduled ??= setTimeout(() => {
      this.scheduled = undefined;
      this.flush();
    }, this.opts.lazyCommitMs ?? lazyCommitMsDefault);
    return Seq(this.durable + this.buffer.length);
  }

  /**
   * Writes the buffer, in transactions of at most appendBatchEventsMax events, each
   * expecting the log to end where the last one did. A no-op when nothing is buffered or
   * while blocked (the retry timer writes then). An SqliteError blocks the log (see the
   * file's comment); anything else is thrown with the buffer kept (a codec's refusal; an
   * ExpectedSeqConflictError means another writer broke the single-writer rule).
   */
  flush(): void {
    if (this.scheduled !== undefined) clearTimeout(this.scheduled);
    this.scheduled = undefined;
    if (this.buffer.length === 0 || !this.writable || this.closed) return;
    if (this.gate !== undefined) return; // committed when the check passes (openGate)
    try {
      this.writeBuffer();
    } catch (error) {
      if (!(error instanceof SqliteError)) throw error;
      this.block(error);
    }
  }

  /**
   * Undefined when every event pushed so far is durable; otherwise a promise that resolves
   * once they are: after the commit queued as a microtask, which every wait of this turn
   * shares, or after the retry while the log is blocked.
   */
  whenDurable(throughSeq?: number): Promise<void> | undefined {
    // A halted log makes nothing durable again, nor lets an act rely on what an earlier
    // process made durable (a mount covered by its attach); neither does one not yet checked.
    if (this.halted !== undefined) return never;
    const gate = this.gate;
    if (gate !== undefined) return gate.then(() => this.whenDurable(throughSeq));
    const head = this.durable + this.buffer.length;
    const seq = throughSeq === undefined ? head : Math.min(throughSeq, head);
    const waiting = this.waiters.pending(seq, this.durable);
    if (waiting !== undefined && !this.commitQueued && this.writable) {
      this.commitQueued = true;
      queueMicrotask(() => {
        this.commitQueued = false;
        this.flush();
      });
    }
    return waiting;
  }

  private writeBuffer(): void {
    const max = this.store.appendBatchEventsMax;
    const startedNs = process.hrtime.bigint();
    const written = this.buffer.length;
    while (this.buffer.length > 0) {
      const count = Math.min(max, this.buffer.length);
      this.encodeThrough(count);
      const rows = this.rows.length > count ? this.rows.slice(0, count) : this.rows;
      const result = this.store.appendEncoded(rows, { expectedSeq: this.durable });
      const expected = this.durable + count;
      assert(result.lastSeq === expected, 'flush: append wrote a different count');
      this.durable = result.lastSeq;
      this.buffer = this.buffer.length === count ? [] : this.buffer.slice(count);
      this.rows = this.rows.length > count ? this.rows.slice(count) : [];
    }
    const seconds = Number(process.hrtime.bigint() - startedNs) / 1e9;
    for (const listener of this.committedListeners) listener(seconds, written);
    this.waiters.reach(this.durable);
    this.checkpointWhenIdle(written);
  }

  /**
   * Encodes the events pushed since, in a microtask after the turn that pushed them: the
   * fold and its listeners have seen them, and a commit a later turn waits on (the next
   * pod's) writes rows made already instead of encoding them then (about 20 µs an event).
   * A codec's refusal is left for the commit, which throws it with the buffer kept.
   */
  private encodeAhead(): void {
    this.encodeQueued = false;
    if (this.closed) return;
    try {
      this.encodeThrough(this.buffer.length);
    } catch {
      return;
    }
  }

  /** The buffer's first `count` events as rows: those not encoded yet, each with its seq. */
  private encodeThrough(count: number): void {
    for (let i = this.rows.length; i < count; i++)
      this.rows.push(this.store.encode(this.buffer[i]!, this.durable + i + 1));
  }

  /** Counts the commit and arms the idle checkpoint once one is due. */
  private checkpointWhenIdle(events: number): void {
    const policy = this.checkpointPolicy;
    if (policy === undefined) return;
    this.sinceCheckpoint.commits++;
    this.sinceCheckpoint.events += events;
    const due =
      this.sinceCheckpoint.commits >= policy.afterCommits ||
      this.sinceCheckpoint.events >= policy.afterEvents;
    if (!due || this.idleTimer !== undefined) return;
    this.idleTimer = setTimeout(() => this.idleCheckpoint(), policy.idleMs);
    // A due checkpoint does not keep the process alive: close() or the next open makes it.
    this.idleTimer.unref();
  }

  /** Checkpoints what is committed; events still buffered are not touched (no commit here). */
  private idleCheckpoint(): void {
    this.idleTimer = undefined;
    if (!this.writable || this.closed) return;
    try {
      this.store.checkpoint();
    } catch (error) {
      // A checkpoint is not needed for durability: a failed one is made again when due,
      // and a write failure shows on the next commit, which blocks the log.
      if (!(error instanceof SqliteError)) throw error;
      return;
    }
    this.checkpoints++;
    this.sinceCheckpoint = { commits: 0, events: 0 };
  }

  private disarmCheckpoint(): void {
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }

  private block(error: InstanceType<typeof SqliteError>): void {
    const retry = this.opts.retryMs ?? { first: 100, max: 5_000 };
    const previous = this.blocked;
    const delayMs =
      previous === undefined ? retry.first : Math.min(previous.delayMs * 2, retry.max);
    const state = {
      sinceMs: previous?.sinceMs ?? Date.now(),
      attempts: (previous?.attempts ?? 0) + 1,
      delayMs,
      timer: setTimeout(() => this.retry(), delayMs),
    };
    this.blocked = state;
    this.opts.onBlocked?.({
      path: this.store.path,
      code: error.code,
      message: error.message,
      freeBytes: freeBytesBeside(this.store.path),
      attempts: state.attempts,
      sinceMs: state.sinceMs,
      retryInMs: delayMs,
      pendingCount: this.buffer.length,
    });
  }

  private retry(): void {
    const blocked = this.blocked;
    if (blocked === undefined || this.closed || this.halted !== undefined) return;
    const before = this.durable;
    try {
      this.writeBuffer();
    } catch (error) {
      if (!(error instanceof SqliteError)) throw error;
      return this.block(error);
    }
    this.blocked = undefined;
    this.opts.onResumed?.({
      path: this.store.path,
      blockedMs: Date.now() - blocked.sinceMs,
      written: this.durable - before,
    });
    for (const listener of this.writableListeners) listener();
  }

  /**
   * Flushes, then closes the store. If the flush throws, nothing is closed. A blocked log
   * is closed with its buffer unwritten, as a crash would leave it (returned: how many
   * events were lost; their operations are resolved from the host at the next start).
   * Idempotent.
   */
  close(): number {
    if (this.closed) return 0;
    if (this.gate !== undefined) {
      // Closing before the check answered: check here, so what was held is written to a
      // file known whole, or not at all.
      this.store.checkNow();
      this.openGate();
    }
    this.flush();
    const lost = this.buffer.length;
    if (this.blocked !== undefined) clearTimeout(this.blocked.timer);
    this.blocked = undefined;
    this.disarmCheckpoint();
    this.closed = true;
    this.store.close();
    return lost;
  }
}

/** What a wait on a halted log gets: a promise that never settles. */
const never = new Promise<void>(() => {});

function freeBytesBeside(path: string): number | undefined {
  try {
    const stats = statfsSync(dirname(path));
    return stats.bavail * stats.bsize;
  } catch {
    return undefined;
  }
}
