/**
 * Leader election and the controller log of `vole chaos --cluster`, on the simulated store
 * (cluster-store.ts), with the rules of the etcd ones (src/cluster/leadership.ts,
 * src/cluster/etcd-log.ts):
 *
 * - a candidate creates the leader key bound to its lease only if the key is absent; the
 *   key's create revision names the term, and every write of the leader compares it;
 * - the leader stops acting the moment its lease is reported lost, no keepalive succeeded
 *   for the TTL less a margin, the leader key was deleted or recreated, or a fenced write
 *   was refused;
 * - each group commit is one transaction comparing the term and the expected head, with
 *   the events and the new head; a refused commit whose earlier attempt went through (its
 *   answer lost) is recognised by the head and the term.
 *
 * `unfenced` is a deliberately broken rule for the tests that show the checks bite: a
 * deposed leader that never notices, and a store that is never asked to compare.
 */
import { type Clock, sleep, type TimerHandle } from '../clock.js';
import type { EventSink } from '../engine/sink.js';
import { eventCodec, type NewEvent, type VoleEvent } from '../events/index.js';
import { Seq } from '../ids.js';
import { decodeRow, encodeEvent } from '../log/codec.js';
import type { EventRow } from '../log/statements.js';
import { SeqWaiters } from '../log/seq-waiters.js';
import type { ClusterKeys } from '../cluster/keys.js';
import { type Compare, type StoreClient, StoreError } from './cluster-store.js';

export interface LeadershipOptions {
  readonly identity: string;
  readonly ttlMs: number;
  readonly clock: Clock;
  readonly unfenced?: boolean;
}

/** How long before the TTL runs out a leader without keepalives stops (src/cluster/leadership.ts). */
const lossMarginMsMax = 1_000;
const campaignRetryMs = 500;

export class SimLeadership {
  private lostError: Error | null = null;
  private readonly listeners = new Set<(error: Error) => void>();
  private keepTimer: TimerHandle | null = null;
  private deadline: TimerHandle | null = null;
  private readonly unwatch: () => void;

  private constructor(
    private readonly client: StoreClient,
    private readonly keys: ClusterKeys,
    private readonly opts: LeadershipOptions,
    readonly leaseId: number,
    /** The leader key's create revision: this term. */
    readonly term: number,
  ) {
    this.unwatch = client.watch(keys.leader, term + 1, (event) => {
      if (event.type === 'delete') this.lose('the leader key was deleted');
      else if (event.kv?.createRevision !== term) this.lose('the leader key was replaced');
    });
    this.keptAlive();
    this.scheduleKeepAlive();
  }

  /** Campaigns until this candidate leads; never resolves once the process died. */
  static async campaign(client: StoreClient, keys: ClusterKeys, opts: LeadershipOptions): Promise<SimLeadership> {
    const store = client.store;
    while (true) {
      try {
        const leaseId = await client.call(() => store.grant(opts.ttlMs));
        const claim = { put: keys.leader, value: opts.identity, lease: leaseId };
        const result = await client.call(() =>
          store.txn([{ key: keys.leader, create: 0 }], [claim], [{ get: keys.leader }]),
        );
        if (result.succeeded) return new SimLeadership(client, keys, opts, leaseId, result.revision);
        await client.call(() => store.revoke(leaseId)).catch(() => undefined);
        await waitForDelete(client, keys.leader, result.revision + 1);
      } catch {
        await sleep(opts.clock, campaignRetryMs);
      }
    }
  }

  private keptAlive(): void {
    const { clock, ttlMs } = this.opts;
    if (this.deadline !== null) clock.clearTimer(this.deadline);
    const marginMs = Math.min(lossMarginMsMax, Math.floor(ttlMs / 4));
    const sinceMs = clock.nowMs();
    this.deadline = clock.setTimer(sinceMs + ttlMs - marginMs, () =>
      this.lose(`no lease keepalive for ${clock.nowMs() - sinceMs} ms (TTL ${ttlMs} ms)`),
    );
  }

  /** Keepalives every third of the TTL, as etcd3 sends them. */
  private scheduleKeepAlive(): void {
    const { clock, ttlMs } = this.opts;
    this.keepTimer = clock.setTimer(clock.nowMs() + Math.floor(ttlMs / 3), () => {
      if (this.isLost) return;
      this.client.call(() => this.client.store.keepAlive(this.leaseId), { writes: false }).then(
        () => this.keptAlive(),
        (error: unknown) => {
          if (error instanceof StoreError && error.kind === 'leaseNotFound') this.lose('lease lost: expired');
        },
      );
      this.scheduleKeepAlive();
    });
  }

  /** The comparison every write of this leader carries (none when unfenced). */
  fence(): Compare[] {
    return this.opts.unfenced === true ? [] : [{ key: this.keys.leader, create: this.term }];
  }

  get isLost(): boolean {
    return this.lostError !== null;
  }

  onLost(listener: (error: Error) => void): void {
    if (this.lostError !== null) listener(this.lostError);
    else this.listeners.add(listener);
  }

  lose(why: string, opts: { evenUnfenced?: boolean } = {}): void {
    if (this.lostError !== null) return;
    if (this.opts.unfenced === true && opts.evenUnfenced !== true) return;
    this.lostError = new Error(`leadership lost (term ${this.term}): ${why}`);
    const { clock } = this.opts;
    if (this.keepTimer !== null) clock.clearTimer(this.keepTimer);
    if (this.deadline !== null) clock.clearTimer(this.deadline);
    this.unwatch();
    void this.client.call(() => this.client.store.revoke(this.leaseId)).catch(() => undefined);
    for (const listener of this.listeners) listener(this.lostError);
    this.listeners.clear();
  }
}

function waitForDelete(client: StoreClient, key: string, fromRevision: number): Promise<void> {
  return new Promise((resolve) => {
    const cancel = client.watch(key, fromRevision, (event) => {
      if (event.type !== 'delete') return;
      cancel();
      resolve();
    });
  });
}

export class LogFenced extends Error {
  override name = 'LogFenced';
}

/** The stored value of one event: the SQLite row, as the etcd log stores it. */
export function encodeLogValue(event: NewEvent, seq: number): string {
  return JSON.stringify(encodeEvent(eventCodec, event as Omit<VoleEvent, 'seq'>, seq));
}

export function decodeLogValue(value: string): VoleEvent {
  return decodeRow(eventCodec, JSON.parse(value) as EventRow);
}

export interface SimLogOptions {
  readonly client: StoreClient;
  readonly keys: ClusterKeys;
  readonly leadership: SimLeadership;
  readonly clock: Clock;
  /** The durable head this writer starts from. */
  readonly head: number;
  readonly unfenced?: boolean;
  readonly onFatal: (error: Error) => void;
}

/** Events per transaction, as the etcd log (src/cluster/etcd-log.ts eventsPerTxnMax). */
const eventsPerTxnMax = 100;

/** The controller log on the simulated store: an EventSink, like EtcdEventLog. */
export class SimControllerLog implements EventSink {
  private nextSeq: number;
  private committedSeq: number;
  private buffer: { key: string; value: string; seq: number }[] = [];
  private draining = false;
  private readonly waiters = new SeqWaiters();
  /** What this writer pushed, by seq: its view of the log beyond the head it loaded. */
  readonly pushed = new Map<number, string>();

  constructor(private readonly opts: SimLogOptions) {
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
    const value = encodeLogValue(event, seq);
    this.pushed.set(seq, value);
    this.buffer.push({ key: this.opts.keys.logSegment(seq), value, seq });
    return Seq(seq);
  }

  flush(): void {
    if (this.waiters.fatal !== null || this.buffer.length === 0 || this.draining) return;
    this.draining = true;
    void this.drain();
  }

  durable(): Promise<void> {
    this.flush();
    return this.waiters.pending(this.nextSeq - 1, this.committedSeq) ?? Promise.resolve();
  }

  /** The executor's wait before a call: undefined once durable; never rejects (a fenced log stops the engine). */
  whenDurable(): Promise<void> | undefined {
    this.flush();
    return this.waiters.pending(this.nextSeq - 1, this.committedSeq)?.catch(() => undefined);
  }

  close(): void {
    this.flush();
  }

  private fail(error: Error): void {
    if (this.waiters.fail(error)) this.opts.onFatal(error);
  }

  private async drain(): Promise<void> {
    try {
      while (this.buffer.length > 0 && this.waiters.fatal === null) {
        const chunk = this.buffer.slice(0, eventsPerTxnMax);
        await this.commitChunk(chunk);
        this.buffer.splice(0, chunk.length);
        this.waiters.reach(this.committedSeq);
      }
    } catch (error) {
      this.fail(error as Error);
    } finally {
      this.draining = false;
    }
  }

  private headCompare(): Compare[] {
    if (this.opts.unfenced === true) return [];
    const { logHead } = this.opts.keys;
    return [this.committedSeq === 0 ? { key: logHead, create: 0 } : { key: logHead, value: String(this.committedSeq) }];
  }

  private async commitChunk(rows: { key: string; value: string; seq: number }[]): Promise<void> {
    const { client, keys, leadership, clock } = this.opts;
    const last = rows[rows.length - 1]!.seq;
    let backoffMs = 50;
    while (true) {
      if (this.waiters.fatal !== null) throw this.waiters.fatal;
      try {
        const compares = [...leadership.fence(), ...this.headCompare()];
        const puts = [...rows.map((r) => ({ put: r.key, value: r.value })), { put: keys.logHead, value: String(last) }];
        const result = await client.call(() => client.store.txn(compares, puts));
        if (result.succeeded || (await this.appliedBefore(last))) {
          this.committedSeq = last;
          return;
        }
        const error = new LogFenced(
          `the controller log refused seqs ${rows[0]!.seq}–${last}: this replica no longer leads, ` +
            `or another writer moved the head past ${this.committedSeq}`,
        );
        leadership.lose(error.message, { evenUnfenced: true });
        throw error;
      } catch (error) {
        if (error instanceof LogFenced || this.waiters.fatal !== null) throw this.waiters.fatal ?? error;
        await sleep(clock, backoffMs);
        backoffMs = Math.min(backoffMs * 2, 2_000);
      }
    }
  }

  /** A refused commit whose earlier attempt went through (its answer was lost): the head says. */
  private async appliedBefore(last: number): Promise<boolean> {
    const { client, keys, leadership } = this.opts;
    const [head, leader] = await client.call(() => [client.store.get(keys.logHead), client.store.get(keys.leader)], {
      writes: false,
    });
    return head?.value === String(last) && leader?.createRevision === leadership.term;
  }
}

/** The log in the store, checked: its head and every entry up to it, with no gap. */
export async function loadSimLog(client: StoreClient, keys: ClusterKeys): Promise<{ head: number; values: string[] }> {
  return client.call(
    () => {
      const store = client.store;
      const head = Number(store.get(keys.logHead)?.value ?? '0');
      const values = store.range(keys.logSegments).kvs.map((kv) => kv.value);
      if (values.length !== head)
        throw new Error(`the controller log holds ${values.length} entries but its head says ${head}`);
      return { head, values };
    },
    { writes: false },
  );
}
