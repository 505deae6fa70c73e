/**
 * The controller's event log in etcd: an event-store backend beside the SQLite file.
 *
 *   controller/log/e/<seq, 16 digits>   one event: the SQLite row [seq, tsMs, type, data]
 *   controller/log/head                 the last durable seq
 *   controller/log/snapshot             {seq, tsMs, format, chunks}: the latest snapshot
 *   controller/log/snapshot/<seq>/<n>   its data, in chunks under etcd's request limit
 *
 * One writer, fenced: each group commit is one transaction comparing the leader's term and
 * the expected head (the last seq the previous commit left), so a deposed leader, or a
 * second writer, is refused instead of forking the log. A commit larger than one request
 * (128 operations, 1.5 MiB) is split into several such transactions, in order.
 *
 * The sink is synchronous (the engine assigns seqs and folds at once); `durable()` is the
 * promise that everything pushed so far is in etcd: nothing touches the host before it.
 */
import type { Etcd3, IKeyValue } from 'etcd3';
import { Range } from 'etcd3';
import type { EventSink } from '../engine/sink.js';
import { eventCodec, type NewEvent, type VoleEvent } from '../events/index.js';
import { Seq } from '../ids.js';
import { decodeRow, encodeEvent } from '../log/codec.js';
import type { EventRow } from '../log/statements.js';
import { isNoSpace } from './client.js';
import type { ClusterKeys } from './keys.js';
import type { Leadership } from './leadership.js';

/** Events per transaction (etcd allows 128 operations; one is the head). */
export const eventsPerTxnMax = 100;
/** Bytes of event values per transaction (etcd's default request limit is 1.5 MiB). */
export const bytesPerTxnMax = 1024 * 1024;
const snapshotChunkBytes = 1024 * 1024;
/** Events per read page: a page stays under gRPC's 4 MiB message limit. */
const readPageSize = 1_000;

export class LogFenced extends Error {
  override name = 'LogFenced';
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

function rowOf(kv: IKeyValue): VoleEvent {
  return decodeRow(eventCodec, JSON.parse(kv.value.toString()) as EventRow);
}

/** Reads the head and the latest snapshot (without the events). */
export async function loadLogHead(client: Etcd3, keys: ClusterKeys): Promise<LoadedLog> {
  const head = Number((await client.get(keys.logHead).string()) ?? '0');
  const metaText = await client.get(keys.logSnapshot).string();
  const first = await client.getAll().prefix(keys.logEntries).sort('Key', 'Ascend').limit(1).keys();
  const firstSeq = first.length === 0 ? head + 1 : Number(first[0]!.slice(keys.logEntries.length));
  if (metaText === null) return { head, firstSeq };
  const meta = JSON.parse(metaText) as SnapshotMeta;
  // One chunk per request: a chunk is 1 MiB, gRPC answers at most 4 MiB.
  const parts: Buffer[] = [];
  for (let i = 0; i < meta.chunks; i++) {
    const part = await client.get(`${keys.logSnapshot}/${meta.seq}/${String(i).padStart(6, '0')}`).buffer();
    if (part === null) throw new Error(`the controller log's snapshot at seq ${meta.seq} lacks chunk ${i} of ${meta.chunks}`);
    parts.push(part);
  }
  const data = Buffer.concat(parts);
  return { head, firstSeq, snapshot: { meta, data } };
}

/** Streams the stored events from `fromSeq` to the head, in pages, each validated. */
export async function readLogEvents(
  client: Etcd3,
  keys: ClusterKeys,
  fromSeq: number,
  onEvent: (event: VoleEvent) => void,
): Promise<number> {
  let next = Math.max(1, fromSeq);
  let count = 0;
  while (true) {
    const page = await client
      .getAll()
      .inRange(new Range(keys.logEntry(next), `${keys.logEntries}\xff`))
      .sort('Key', 'Ascend')
      .limit(readPageSize)
      .exec();
    for (const kv of page.kvs) {
      const event = rowOf(kv);
      if (event.seq !== next)
        throw new Error(`the etcd log skips from seq ${next - 1} to ${event.seq} (${kv.key.toString()})`);
      onEvent(event);
      next++;
      count++;
    }
    if (page.kvs.length < readPageSize) return count;
  }
}

interface Pending {
  readonly rows: { key: string; value: string; seq: number }[];
}

export interface EtcdLogOptions {
  readonly client: Etcd3;
  readonly keys: ClusterKeys;
  readonly leadership: Leadership;
  /** The durable head this writer starts from (loadLogHead). */
  readonly head: number;
  /** A commit that cannot succeed any more (fenced): the writer must stop. */
  readonly onFatal: (error: Error) => void;
  /** A commit failed for now and is retried (NOSPACE, etcd unreachable). */
  readonly onTrouble?: (message: string) => void;
}

export class EtcdEventLog implements EventSink {
  private nextSeq: number;
  private committedSeq: number;
  private buffer: Pending['rows'] = [];
  private draining = false;
  private waiters: { seq: number; resolve: () => void; reject: (error: Error) => void }[] = [];
  private fatal: Error | null = null;
  private closed = false;
  /** Commits and their sizes (for benchmarks and the progress line). */
  readonly stats = { txns: 0, events: 0, bytes: 0, retries: 0 };

  constructor(private readonly opts: EtcdLogOptions) {
    this.nextSeq = opts.head + 1;
    this.committedSeq = opts.head;
    opts.leadership.onLost((error) => this.fail(error));
  }

  get head(): number {
    return this.committedSeq;
  }

  push(event: NewEvent): Seq {
    if (this.fatal !== null) throw this.fatal;
    const seq = this.nextSeq++;
    const row = encodeEvent(eventCodec, event as Omit<VoleEvent, 'seq'>, seq);
    this.buffer.push({ key: this.opts.keys.logEntry(seq), value: JSON.stringify(row), seq });
    return Seq(seq);
  }

  /**
   * The engine's group commit point: starts committing what is buffered. While one
   * transaction is in flight, what is pushed and flushed meanwhile waits and goes in the
   * next one (at most 100 events or 1 MiB each).
   */
  flush(): void {
    if (this.fatal !== null || this.buffer.length === 0 || this.draining) return;
    this.draining = true;
    void this.drain();
  }

  /** Resolves once every event pushed so far is in etcd; rejects once this writer is fenced. */
  durable(): Promise<void> {
    this.flush();
    if (this.fatal !== null) return Promise.reject(this.fatal);
    const seq = this.nextSeq - 1;
    if (this.committedSeq >= seq) return Promise.resolve();
    return new Promise((resolve, reject) => this.waiters.push({ seq, resolve, reject }));
  }

  close(): void {
    this.flush();
    this.closed = true;
  }

  private fail(error: Error): void {
    if (this.fatal !== null) return;
    this.fatal = error;
    for (const waiter of this.waiters.splice(0)) waiter.reject(error);
    this.opts.onFatal(error);
  }

  private async drain(): Promise<void> {
    try {
      while (this.buffer.length > 0 && this.fatal === null) {
        let end = 0;
        let bytes = 0;
        while (
          end < this.buffer.length &&
          end < eventsPerTxnMax &&
          (end === 0 || bytes + this.buffer[end]!.value.length <= bytesPerTxnMax)
        )
          bytes += this.buffer[end++]!.value.length;
        const chunk = this.buffer.slice(0, end);
        await this.commitChunk(chunk, bytes);
        this.buffer.splice(0, end);
        const done = this.waiters.filter((w) => w.seq <= this.committedSeq);
        this.waiters = this.waiters.filter((w) => w.seq > this.committedSeq);
        for (const waiter of done) waiter.resolve();
      }
    } catch (error) {
      this.fail(error as Error);
    } finally {
      this.draining = false;
    }
  }

  private async commitChunk(rows: Pending['rows'], bytes: number): Promise<void> {
    const { client, keys, leadership } = this.opts;
    const last = rows[rows.length - 1]!.seq;
    let backoffMs = 50;
    while (true) {
      if (this.fatal !== null) throw this.fatal;
      try {
        const txn = leadership.fence();
        if (this.committedSeq === 0) txn.and(keys.logHead, 'Create', '==', 0);
        else txn.and(keys.logHead, 'Value', '==', String(this.committedSeq));
        const result = await txn
          .then(...rows.map((r) => client.put(r.key).value(r.value)), client.put(keys.logHead).value(String(last)))
          .commit();
        if (result.succeeded || (await this.appliedBefore(last))) {
          this.committedSeq = last;
          this.stats.txns++;
          this.stats.events += rows.length;
          this.stats.bytes += bytes;
          return;
        }
        const error = new LogFenced(
          `the controller log in etcd refused seqs ${rows[0]!.seq}–${last}: this replica no longer leads, or another writer moved the head past ${this.committedSeq}`,
        );
        leadership.lose(error.message);
        this.fail(error);
        throw error;
      } catch (error) {
        if (error instanceof LogFenced || this.fatal !== null) throw this.fatal ?? error;
        this.stats.retries++;
        this.opts.onTrouble?.(
          isNoSpace(error)
            ? 'etcd is out of space (NOSPACE): the controller log waits; compact, defragment and disarm the alarm'
            : `controller log commit failed, retrying: ${(error as Error).message}`,
        );
        await new Promise((resolve) => setTimeout(resolve, backoffMs));
        backoffMs = Math.min(backoffMs * 2, 2_000);
      }
    }
  }

  /** A refused commit whose earlier attempt went through (its answer was lost): the head says. */
  private async appliedBefore(last: number): Promise<boolean> {
    const { client, keys, leadership } = this.opts;
    const [head, leader] = await Promise.all([
      client.get(keys.logHead).string(),
      client.get(keys.leader).exec(),
    ]);
    return head === String(last) && leader.kvs[0]?.create_revision === leadership.term;
  }

  /**
   * Stores a snapshot of the world at `seq` (≤ the durable head) and, with `compact`, deletes
   * the entries up to it and the previous snapshot. Every write is fenced.
   */
  async saveSnapshot(snapshot: { seq: number; tsMs: number; format: number; data: Buffer }, opts: { compact: boolean }): Promise<void> {
    await this.durable();
    const { client, keys, leadership } = this.opts;
    const previous = await client.get(keys.logSnapshot).string();
    const chunks = Math.max(1, Math.ceil(snapshot.data.length / snapshotChunkBytes));
    for (let i = 0; i < chunks; i++) {
      const part = snapshot.data.subarray(i * snapshotChunkBytes, (i + 1) * snapshotChunkBytes);
      const key = `${keys.logSnapshot}/${snapshot.seq}/${String(i).padStart(6, '0')}`;
      const result = await leadership.fence().then(client.put(key).value(part)).commit();
      if (!result.succeeded) throw this.fenced('snapshot');
    }
    const meta: SnapshotMeta = { seq: snapshot.seq, tsMs: snapshot.tsMs, format: snapshot.format, chunks };
    const ops = [client.put(keys.logSnapshot).value(JSON.stringify(meta))];
    if (previous !== null) {
      const old = JSON.parse(previous) as SnapshotMeta;
      if (old.seq !== snapshot.seq) ops.push(client.delete().prefix(`${keys.logSnapshot}/${old.seq}/`) as never);
    }
    if (opts.compact)
      ops.push(client.delete().range(new Range(keys.logEntry(0), keys.logEntry(snapshot.seq + 1))) as never);
    const result = await leadership.fence().then(...ops).commit();
    if (!result.succeeded) throw this.fenced('snapshot');
  }

  private fenced(what: string): LogFenced {
    const error = new LogFenced(`the controller log in etcd refused a ${what}: this replica no longer leads`);
    this.opts.leadership.lose(error.message);
    this.fail(error);
    return error;
  }

  get isClosed(): boolean {
    return this.closed;
  }
}
