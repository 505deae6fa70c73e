/**
 * The controller's event log in etcd: an event-store backend beside the SQLite file.
 *
 *   controller/log/s/<seq, 16 digits>   a segment: the SQLite rows [seq, tsMs, type, data]
 *                                       of consecutive seqs from <seq>, one JSON row a line
 *   controller/log/head                 the last durable seq
 *   controller/log/snapshot             {seq, tsMs, format, chunks}: the latest snapshot
 *   controller/log/snapshot/<seq>/<n>   its data, in chunks under etcd's request limit
 *
 * Several events a key: etcd allows 128 operations a transaction, and each key costs it an
 * index entry and a revision of its own, so one key per event capped a commit at about 100
 * events. A group commit is one transaction of up to 1 MiB of rows in segments of up to
 * 32 KiB (a row larger than that is a segment of its own).
 *
 * One writer, fenced: each group commit is one transaction comparing the leader's term and
 * the expected head (the last seq the previous commit left), so a deposed leader, or a
 * second writer, is refused instead of forking the log.
 *
 * The sink is synchronous (the engine assigns seqs and folds at once); `whenDurable()` and
 * `durable()` wait until everything pushed so far is in etcd: nothing touches the host before.
 */
import { assert } from '../assert.js';
import { type Clock, sleep } from '../clock.js';
import type { EventSink } from '../engine/sink.js';
import { eventCodec, type NewEvent, type VoleEvent } from '../events/index.js';
import { Seq } from '../ids.js';
import { decodeRow, encodeEvent } from '../log/codec.js';
import type { EventRow } from '../log/statements.js';
import { SeqWaiters } from '../log/seq-waiters.js';
import { isNoSpace } from './client.js';
import { internKnownStrings } from './interned.js';
import type { ClusterKeys } from './keys.js';
import type { Leadership } from './leadership.js';
import { type KvStore, prefixEnd, type TxnOp } from './store.js';

/** Bytes of rows per transaction (etcd's default request limit is 1.5 MiB). */
const bytesPerTxnMax = 1024 * 1024;
/** Bytes of rows per segment: a read page of `readPageSegments` stays under gRPC's 4 MiB. */
const segmentBytesMax = 32 * 1024;
/** Segments per transaction (etcd allows 128 operations; one is the head). */
const segmentsPerTxnMax = 100;

/**
 * How the log cuts its rows: bytes per transaction (also the largest row), bytes per
 * segment, segments per transaction. The simulation uses small ones, so that its few
 * events still fill several segments, rows in parts and transactions in a row.
 */
export interface LogLimits {
  readonly txnBytes: number;
  readonly segmentBytes: number;
  readonly segmentsPerTxn: number;
}

const etcdLogLimits: LogLimits = {
  txnBytes: bytesPerTxnMax,
  segmentBytes: segmentBytesMax,
  segmentsPerTxn: segmentsPerTxnMax,
};
export const snapshotChunkBytes = 1024 * 1024;
/** Segments folded between two turns of the event loop when a reader reads the log. */
const segmentsPerTurn = 8;
/** Segments per read page: 3 MiB at most, under gRPC's 4 MiB message limit. */
const readPageSegments = 96;

class LogFenced extends Error {
  override name = 'LogFenced';
}

/** The entries a reader asked for were compacted away: read the snapshot again. */
export class LogCompactedPast extends Error {
  override name = 'LogCompactedPast';
}

export class LogRowTooLarge extends Error {
  override name = 'LogRowTooLarge';
}

export interface SnapshotMeta {
  readonly seq: number;
  readonly tsMs: number;
  readonly format: number;
  readonly chunks: number;
}

export interface LoadedLog {
  /** The last durable seq (0: an empty log). */
  readonly head: number;
  readonly snapshot?: { meta: SnapshotMeta; data: Buffer };
  /** The first seq still stored (1, or the one after the snapshot once compacted). */
  readonly firstSeq: number;
}

/**
 * Segments back to events: whole segments at once, a row larger than a segment once its
 * last part arrives (parts come in key order, from a range read or one transaction's watch
 * event). Every row is validated by the codec.
 */
export class SegmentDecoder {
  private parts: string[] = [];

  constructor(private readonly keys: ClusterKeys) {}

  take(key: string, value: string): VoleEvent[] {
    const part = /\+(\d{4})\/(\d{4})$/.exec(key);
    if (part === null) return value.split('\n').map(decodeLine);
    if (Number(part[1]) !== this.parts.length)
      throw new Error(
        `the etcd log's row at ${key} lacks its earlier parts (${this.parts.length} read)`,
      );
    this.parts.push(value);
    if (this.parts.length < Number(part[2])) return [];
    const line = this.parts.join('');
    this.parts = [];
    return [decodeLine(line)];
  }

  /** The first seq a segment key holds. */
  seqOf(key: string): number {
    return Number(key.slice(this.keys.log.segments.length, this.keys.log.segments.length + 16));
  }
}

function decodeLine(line: string): VoleEvent {
  const event = decodeRow(eventCodec, JSON.parse(line) as EventRow);
  // A replica replaying the log keeps these objects: their well-known strings shared.
  if (event.type === 'ObjectUpserted') internKnownStrings(event.object);
  return event;
}

/**
 * Where to start reading for `seq`: the last segment starting at or before it (the one
 * holding it), from its first part when it is a row in parts; undefined when none is.
 */
async function segmentHolding(
  store: KvStore,
  keys: ClusterKeys,
  seq: number,
  revision?: number,
): Promise<string | undefined> {
  const found = await store.range({
    start: keys.log.segment(0),
    end: keys.log.segment(seq + 1),
    descending: true,
    limit: 1,
    keysOnly: true,
    ...(revision === undefined ? {} : { revision }),
  });
  return found.kvs[0]?.key.slice(0, keys.log.segments.length + 16);
}

/** The value of `key` at `revision`, or undefined when absent then. */
async function getAt(store: KvStore, key: string, revision: number): Promise<Buffer | undefined> {
  const { kvs } = await store.range({ start: key, end: `${key}\0`, revision });
  return kvs[0]?.value;
}

/**
 * Reads the head and the latest snapshot (without the events), all at one revision: a
 * compaction committed meanwhile (a new snapshot, the segments before it deleted) is not
 * seen half. `revision` of the answer is that revision (read the events at it too).
 */
export async function loadLogHead(
  store: KvStore,
  keys: ClusterKeys,
): Promise<LoadedLog & { revision: number }> {
  const first = await store.range({ ...segmentsRange(keys), limit: 1, keysOnly: true });
  const { revision } = first;
  const head = Number((await getAt(store, keys.log.head, revision))?.toString() ?? '0');
  const metaText = (await getAt(store, keys.log.snapshot, revision))?.toString();
  const firstKey = first.kvs[0]?.key;
  const firstSeq = firstKey === undefined ? head + 1 : new SegmentDecoder(keys).seqOf(firstKey);
  if (metaText === undefined) return { head, firstSeq, revision };
  const meta = JSON.parse(metaText) as SnapshotMeta;
  // One chunk per request: a chunk is 1 MiB, gRPC answers at most 4 MiB.
  const parts: Buffer[] = [];
  for (let i = 0; i < meta.chunks; i++) {
    const part = await getAt(store, snapshotChunkKey(keys, meta.seq, i), revision);
    if (part === undefined)
      throw new Error(
        `the controller log's snapshot at seq ${meta.seq} lacks chunk ${i} of ${meta.chunks}`,
      );
    parts.push(part);
  }
  const data = Buffer.concat(parts);
  return { head, firstSeq, revision, snapshot: { meta, data } };
}

function segmentsRange(keys: ClusterKeys): { start: string; end: Buffer } {
  return { start: keys.log.segments, end: prefixEnd(keys.log.segments) };
}

export function snapshotChunkKey(keys: ClusterKeys, seq: number, chunk: number): string {
  return `${keys.log.snapshot}/${seq}/${String(chunk).padStart(6, '0')}`;
}

/**
 * Streams the stored events from `fromSeq` to the head, in pages of segments, each
 * validated; every page at one revision (`revision`, else the first page's), so a
 * compaction committed meanwhile does not pull segments from under the reader.
 */
export async function readLogEvents(
  store: KvStore,
  keys: ClusterKeys,
  fromSeq: number,
  onEvent: (event: VoleEvent) => void,
  opts: { revision?: number } = {},
): Promise<number> {
  let next = Math.max(1, fromSeq);
  let count = 0;
  const decoder = new SegmentDecoder(keys);
  const { end } = segmentsRange(keys);
  let revision = opts.revision ?? 0;
  let start = (await segmentHolding(store, keys, next, revision)) ?? keys.log.segment(next);
  while (true) {
    // Every key holds at most segmentBytesMax: a page stays under gRPC's 4 MiB limit.
    const page = await store.range({ start, end, limit: readPageSegments, revision });
    revision = page.revision;
    for (const [i, kv] of page.kvs.entries()) {
      // A turn of the event loop every few segments (about a thousand events): a new
      // leader folding a long tail keeps its lease's keepalives going.
      if (i > 0 && i % segmentsPerTurn === 0)
        await new Promise<void>((resolve) => setImmediate(resolve));
      const key = kv.key;
      for (const event of decoder.take(key, kv.value.toString())) {
        if (event.seq < next) continue; // the part of the first segment before fromSeq
        if (event.seq !== next && count === 0 && event.seq > fromSeq)
          throw new LogCompactedPast(
            `the etcd log's seq ${next} was compacted away (it starts at ${event.seq})`,
          );
        if (event.seq !== next)
          throw new Error(`the etcd log skips from seq ${next - 1} to ${event.seq} (${key})`);
        onEvent(event);
        next++;
        count++;
      }
    }
    if (!page.more || page.kvs.length === 0) return count;
    start = `${page.kvs[page.kvs.length - 1]!.key}\0`;
  }
}

/** A row waiting for its commit: its seq, its JSON and that JSON's size in UTF-8. */
export interface PendingRow {
  readonly seq: number;
  readonly value: string;
  readonly bytes: number;
}

/**
 * `value` in parts of at most `maxBytes` in UTF-8, cut between characters (never inside a
 * surrogate pair), so each part is valid text of its own.
 */
function splitUtf8(value: string, maxBytes: number): string[] {
  const parts: string[] = [];
  let at = 0;
  while (at < value.length) {
    let end = Math.min(value.length, at + maxBytes);
    let bytes = Buffer.byteLength(value.slice(at, end));
    while (bytes > maxBytes) {
      end = at + Math.max(1, Math.floor(((end - at) * maxBytes) / bytes) - 1);
      bytes = Buffer.byteLength(value.slice(at, end));
    }
    const last = value.charCodeAt(end - 1);
    if (end < value.length && end - at > 1 && last >= 0xd800 && last <= 0xdbff) end--; // a high surrogate
    parts.push(value.slice(at, end));
    at = end;
  }
  return parts;
}

/** One transaction's worth of rows: its segments (by first seq; a row in parts by part) and how many rows. */
export interface TxnPlan {
  readonly segments: { firstSeq: number; part?: { part: number; parts: number }; value: string }[];
  readonly rows: number;
  readonly bytes: number;
}

/**
 * The next transaction of `rows` from index `from`: up to bytesPerTxnMax of rows (at least
 * one), cut into segments of up to segmentBytesMax, at most segmentsPerTxnMax of them; a
 * row larger than a segment is written in parts of segmentBytesMax.
 */
export function planTxn(
  rows: readonly PendingRow[],
  from: number,
  limits: LogLimits = etcdLogLimits,
): TxnPlan {
  const { txnBytes, segmentBytes: segmentMax, segmentsPerTxn } = limits;
  assert(
    from >= 0 && from < rows.length,
    `a transaction plans rows from index ${from}, but ${rows.length} are pending`,
  );
  const segments: TxnPlan['segments'] = [];
  let lines: string[] = [];
  let segmentBytes = 0;
  let bytes = 0;
  let i = from;
  const close = () => {
    segments.push({ firstSeq: rows[i - lines.length]!.seq, value: lines.join('\n') });
    lines = [];
    segmentBytes = 0;
  };
  for (; i < rows.length; i++) {
    const row = rows[i]!;
    const size = row.bytes + 1;
    if (bytes > 0 && bytes + size > txnBytes) break;
    if (lines.length > 0 && segmentBytes + size > segmentMax) close();
    const parts = size > segmentMax ? splitUtf8(row.value, segmentMax) : undefined;
    if (bytes > 0 && segments.length + (parts?.length ?? 1) > segmentsPerTxn) break;
    if (parts !== undefined) {
      parts.forEach((value, part) =>
        segments.push({ firstSeq: row.seq, part: { part, parts: parts.length }, value }),
      );
    } else {
      lines.push(row.value);
      segmentBytes += size;
    }
    bytes += size;
  }
  if (lines.length > 0) close();
  assert(i > from, `a transaction takes at least one row (from index ${from})`);
  assert(
    segments.length <= segmentsPerTxn,
    `a transaction of ${segments.length} segments (at most ${segmentsPerTxn})`,
  );
  return { segments, rows: i - from, bytes };
}

export interface EtcdLogOptions {
  readonly store: KvStore;
  readonly keys: ClusterKeys;
  readonly clock: Clock;
  readonly leadership: Leadership;
  /** The durable head this writer starts from (loadLogHead). */
  readonly head: number;
  /** A commit that cannot succeed any more (fenced): the writer must stop. */
  readonly onFatal: (error: Error) => void;
  /** A commit failed for now and is retried (NOSPACE, etcd unreachable). */
  readonly onTrouble?: (message: string) => void;
  /** How rows are cut (default: etcdLogLimits). */
  readonly limits?: LogLimits;
}

export class EtcdEventLog implements EventSink {
  private nextSeq: number;
  private committedSeq: number;
  /** Rows pushed and not yet committed: `buffer` from index `start`. */
  private buffer: PendingRow[] = [];
  private start = 0;
  private draining = false;
  private readonly waiters = new SeqWaiters();
  private closed = false;
  /** Commits and their sizes (for benchmarks and the progress line). */
  readonly stats = { txns: 0, segments: 0, events: 0, bytes: 0, retries: 0 };

  private readonly limits: LogLimits;

  constructor(private readonly opts: EtcdLogOptions) {
    this.limits = opts.limits ?? etcdLogLimits;
    assert(
      Number.isInteger(opts.head) && opts.head >= 0,
      `the controller log's durable head is a seq ≥ 0, not ${opts.head}`,
    );
    const { txnBytes, segmentBytes, segmentsPerTxn } = this.limits;
    assert(
      Math.ceil(txnBytes / segmentBytes) < segmentsPerTxn,
      'the largest row in parts must fit one transaction',
    );
    this.nextSeq = opts.head + 1;
    this.committedSeq = opts.head;
    opts.leadership.onLost((error) => this.fail(error));
  }

  get head(): number {
    return this.committedSeq;
  }

  push(event: NewEvent): Seq {
    if (this.waiters.fatal !== null) throw this.waiters.fatal;
    const seq = this.nextSeq++;
    const value = JSON.stringify(encodeEvent(eventCodec, event as Omit<VoleEvent, 'seq'>, seq));
    const bytes = Buffer.byteLength(value);
    const rowBytesMax = this.limits.txnBytes;
    if (bytes > rowBytesMax) {
      this.nextSeq--;
      throw new LogRowTooLarge(
        `${event.type} is ${bytes} bytes as a log row; the controller log in etcd takes rows up to ${rowBytesMax} ` +
          "(one transaction under etcd's 1.5 MiB request limit): shrink the object (its annotations, its spec)",
      );
    }
    this.buffer.push({ seq, value, bytes });
    return Seq(seq);
  }

  /**
   * The engine's group commit point: starts committing what is buffered. While one
   * transaction is in flight, what is pushed and flushed meanwhile waits and goes in the
   * next one (up to 1 MiB each).
   */
  flush(): void {
    if (this.waiters.fatal !== null || this.start === this.buffer.length || this.draining) return;
    this.draining = true;
    void this.drain();
  }

  /** Resolves once every event pushed so far is in etcd; rejects once this writer is fenced. */
  durable(): Promise<void> {
    this.flush();
    return this.waiters.pending(this.nextSeq - 1, this.committedSeq) ?? Promise.resolve();
  }

  /**
   * The engine's wait before a plugin call (EventSink.whenDurable): undefined when every
   * event pushed so far is in etcd, else a promise that resolves once they are (a commit in
   * flight, or retried while etcd is out of space or unreachable) and rejects once this
   * writer is fenced (the engine is stopped by then).
   */
  whenDurable(): Promise<void> | undefined {
    this.flush();
    return this.waiters.pending(this.nextSeq - 1, this.committedSeq);
  }

  close(): void {
    this.flush();
    this.closed = true;
  }

  private fail(error: Error): void {
    if (this.waiters.fail(error)) this.opts.onFatal(error);
  }

  private async drain(): Promise<void> {
    try {
      while (this.start < this.buffer.length && this.waiters.fatal === null) {
        const txn = planTxn(this.buffer, this.start, this.limits);
        await this.commitTxn(txn, this.buffer[this.start + txn.rows - 1]!.seq);
        this.start += txn.rows;
        this.dropCommitted();
        this.waiters.reach(this.committedSeq);
      }
    } catch (error) {
      this.fail(error as Error);
    } finally {
      this.draining = false;
    }
  }

  /**
   * Committed rows leave the buffer: at once when all are, else once they are half of it
   * (under a steady load it never empties, and would keep every row ever pushed).
   */
  private dropCommitted(): void {
    if (this.start === this.buffer.length) this.buffer = [];
    else if (this.start >= 1_024 && 2 * this.start >= this.buffer.length)
      this.buffer = this.buffer.slice(this.start);
    else return;
    this.start = 0;
  }

  private async commitTxn(txn: TxnPlan, last: number): Promise<void> {
    const { store, keys, leadership } = this.opts;
    assert(
      last > this.committedSeq,
      `a commit ends past the durable head (${last} ≤ ${this.committedSeq})`,
    );
    const firstSeq = txn.segments[0]?.firstSeq;
    assert(
      firstSeq === this.committedSeq + 1,
      `a commit starts right after the durable head ${this.committedSeq}, not at seq ${firstSeq}`,
    );
    assert(
      last - firstSeq + 1 === txn.rows,
      `a commit of ${txn.rows} rows holds seqs ${firstSeq}–${last}: no seq skipped or repeated`,
    );
    const compares = [
      ...leadership.fence(),
      this.committedSeq === 0
        ? { key: keys.log.head, createRevision: 0 }
        : { key: keys.log.head, value: String(this.committedSeq) },
    ];
    const puts: TxnOp[] = txn.segments.map((s) => ({
      put:
        s.part === undefined
          ? keys.log.segment(s.firstSeq)
          : keys.log.segmentPart(s.firstSeq, s.part.part, s.part.parts),
      value: s.value,
    }));
    puts.push({ put: keys.log.head, value: String(last) });
    let backoffMs = 50;
    while (true) {
      if (this.waiters.fatal !== null) throw this.waiters.fatal;
      try {
        const result = await store.txn(compares, puts);
        if (result.succeeded || (await this.appliedBefore(last))) {
          this.committedSeq = last;
          this.stats.txns++;
          this.stats.segments += txn.segments.length;
          this.stats.events += txn.rows;
          this.stats.bytes += txn.bytes;
          return;
        }
        const first = txn.segments[0]!.firstSeq;
        const error = new LogFenced(
          `the controller log in etcd refused seqs ${first}–${last}: this replica no longer leads, or another writer moved the head past ${this.committedSeq}`,
        );
        leadership.lose(error.message);
        this.fail(error);
        throw error;
      } catch (error) {
        if (error instanceof LogFenced || this.waiters.fatal !== null)
          throw this.waiters.fatal ?? error;
        this.stats.retries++;
        this.opts.onTrouble?.(
          isNoSpace(error)
            ? 'etcd is out of space (NOSPACE): the controller log waits; compact, defragment and disarm the alarm'
            : `controller log commit failed, retrying: ${(error as Error).message}`,
        );
        await sleep(this.opts.clock, backoffMs);
        backoffMs = Math.min(backoffMs * 2, 2_000);
      }
    }
  }

  /** A refused commit whose earlier attempt went through (its answer was lost): the head says. */
  private async appliedBefore(last: number): Promise<boolean> {
    const { store, keys, leadership } = this.opts;
    const [head, leader] = await Promise.all([store.get(keys.log.head), store.get(keys.leader)]);
    return head?.value.toString() === String(last) && leader?.createRevision === leadership.term;
  }

  /**
   * Stores a snapshot of the world at `seq` (≤ the durable head) and deletes the previous
   * one; with `compact`, also the segments wholly before it. Every write is fenced.
   */
  async saveSnapshot(
    snapshot: { seq: number; tsMs: number; format: number; data: Buffer },
    opts: { compact: boolean },
  ): Promise<void> {
    await this.durable();
    const { store, keys, leadership } = this.opts;
    assert(
      snapshot.seq <= this.committedSeq,
      `a snapshot at seq ${snapshot.seq} past the durable head`,
    );
    const chunks = Math.max(1, Math.ceil(snapshot.data.length / snapshotChunkBytes));
    for (let i = 0; i < chunks; i++) {
      const part = snapshot.data.subarray(i * snapshotChunkBytes, (i + 1) * snapshotChunkBytes);
      const result = await store.txn(leadership.fence(), [
        { put: snapshotChunkKey(keys, snapshot.seq, i), value: part },
      ]);
      if (!result.succeeded) throw this.fenced('snapshot');
    }
    const meta: SnapshotMeta = {
      seq: snapshot.seq,
      tsMs: snapshot.tsMs,
      format: snapshot.format,
      chunks,
    };
    // The meta names the new chunks last: a snapshot cut off before it is never read, and
    // every other chunk (the previous snapshot's, one cut off earlier) goes with it.
    const chunksBase = `${keys.log.snapshot}/`;
    const own = `${chunksBase}${snapshot.seq}/`;
    const ops: TxnOp[] = [
      { put: keys.log.snapshot, value: JSON.stringify(meta) },
      { delete: chunksBase, end: own },
      { delete: prefixEnd(own).toString('latin1'), end: prefixEnd(chunksBase) },
    ];
    const upTo = opts.compact ? await this.compactionEnd(snapshot.seq) : undefined;
    if (upTo !== undefined) ops.push({ delete: keys.log.segment(0), end: upTo });
    const result = await store.txn(leadership.fence(), ops);
    if (!result.succeeded) throw this.fenced('snapshot');
  }

  /**
   * Where compaction at `seq` stops: every segment ending at or before `seq` goes. The
   * segment holding seq + 1 stays (with the rows before it when seq is inside it); when
   * seq is the durable head, nothing holds seq + 1 yet and every segment up to it goes.
   */
  private async compactionEnd(seq: number): Promise<string | undefined> {
    const { store, keys } = this.opts;
    const holding = await segmentHolding(store, keys, seq + 1);
    if (holding === undefined) return undefined;
    const startsAfter = new SegmentDecoder(keys).seqOf(holding) === seq + 1;
    return startsAfter || this.committedSeq === seq ? keys.log.segment(seq + 1) : holding;
  }

  private fenced(what: string): LogFenced {
    const error = new LogFenced(
      `the controller log in etcd refused a ${what}: this replica no longer leads`,
    );
    this.opts.leadership.lose(error.message);
    this.fail(error);
    return error;
  }

  get isClosed(): boolean {
    return this.closed;
  }
}
