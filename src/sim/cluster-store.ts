/**
 * A model of etcd for `vole chaos --cluster`, on the virtual clock: only what the cluster
 * code relies on (CLUSTER.md) — one revision counter, keys with create and mod revisions,
 * leases with a TTL, transactions comparing a key's create revision or value, a list at a
 * revision and a watch from a revision. Simulation only: production always uses real etcd.
 *
 * Faults, as the chaos run injects them:
 * - the store's leader member lost: every request fails — at once (unavailable) or after
 *   a timeout with an unknown outcome, a write then maybe applied when a leader is back;
 *   leases do not expire meanwhile and get a full TTL back (as etcd's new leader does);
 * - out of space (NOSPACE): transactions that write and lease grants are refused;
 * - a client cut off (partitioned): its requests fail, and its watch events wait.
 */
import type { Clock, TimerHandle } from '../clock.js';

export interface StoreKv {
  readonly key: string;
  readonly value: string;
  readonly createRevision: number;
  readonly modRevision: number;
  readonly lease: number;
}

/** A transaction's comparison: a key's create revision (0: absent) or its value (null: absent). */
export type Compare =
  | { readonly key: string; readonly create: number }
  | { readonly key: string; readonly value: string | null };

export type StoreOp =
  | { readonly put: string; readonly value: string; readonly lease?: number }
  | { readonly delete: string }
  | { readonly get: string };

export interface TxnResult {
  readonly succeeded: boolean;
  readonly revision: number;
  /** One entry per `get` op of the branch taken. */
  readonly gets: (StoreKv | undefined)[];
}

export interface WatchEvent {
  readonly type: 'put' | 'delete';
  readonly key: string;
  readonly kv?: StoreKv;
  readonly revision: number;
}

export class StoreError extends Error {
  override name = 'StoreError';
  constructor(
    readonly kind: 'unavailable' | 'timeout' | 'nospace' | 'leaseNotFound',
    message: string,
  ) {
    super(message);
  }
}

/** How long a client waits for an answer before it gives up (etcd3's request timeout). */
export const storeRequestTimeoutMs = 3_000;

interface LeaseRecord {
  readonly ttlMs: number;
  expiresAtMs: number;
  timer: TimerHandle | null;
}

export class SimStore {
  private revisionNow = 0;
  private readonly kvs = new Map<string, StoreKv>();
  private readonly leases = new Map<number, LeaseRecord>();
  private nextLease = 1;
  private readonly history: WatchEvent[] = [];
  private readonly watchers = new Set<{ prefix: string; deliver: (e: WatchEvent) => void }>();
  private leaderLostUntilMs = -1;
  private lost = false;
  private noSpace = false;
  private readonly afterRecovery: (() => void)[] = [];
  /** Requests answered, for the report. */
  requests = 0;

  constructor(
    private readonly clock: Clock,
    private readonly random: () => number,
  ) {}

  get revision(): number {
    return this.revisionNow;
  }

  get leaderLost(): boolean {
    return this.lost;
  }

  /** The store's leader member is lost for `durationMs`: requests fail meanwhile. */
  loseLeader(durationMs: number): void {
    const untilMs = Math.max(this.leaderLostUntilMs, this.clock.nowMs() + durationMs);
    this.leaderLostUntilMs = untilMs;
    this.lost = true;
    this.clock.setTimer(untilMs, () => {
      if (this.leaderLostUntilMs !== untilMs) return;
      this.lost = false;
      // A new leader: proposals it inherited are applied, leases get a full TTL back.
      for (const apply of this.afterRecovery.splice(0)) apply();
      for (const [id, lease] of this.leases) this.renew(id, lease);
    });
  }

  setNoSpace(on: boolean): void {
    this.noSpace = on;
  }

  /** Runs a request as the store answers it: at once, or failing under the current faults. */
  request<T>(run: () => T, opts: { writes: boolean }): Promise<T> {
    this.requests++;
    if (!this.leaderLost) return Promise.resolve().then(run);
    const timesOut = this.random() < 0.5;
    if (!timesOut)
      return Promise.reject(new StoreError('unavailable', 'etcdserver: no leader (unavailable)'));
    // Proposed before the leader was lost: applied once a new leader commits it, or never.
    if (opts.writes && this.random() < 0.5)
      this.afterRecovery.push(() => {
        try {
          run();
        } catch {
          // refused when applied (NOSPACE, a lease gone): nobody hears of it
        }
      });
    return new Promise((_, reject) =>
      this.clock.setTimer(this.clock.nowMs() + storeRequestTimeoutMs, () =>
        reject(
          new StoreError('timeout', 'etcdserver: request timed out; the outcome is unknown'),
        ),
      ),
    );
  }

  get(key: string): StoreKv | undefined {
    return this.kvs.get(key);
  }

  /** Every key under `prefix`, sorted, at the current revision. */
  range(prefix: string): { kvs: StoreKv[]; revision: number } {
    const kvs = [...this.kvs.values()]
      .filter((kv) => kv.key.startsWith(prefix))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    return { kvs, revision: this.revisionNow };
  }

  private holds(c: Compare): boolean {
    const kv = this.kvs.get(c.key);
    if ('create' in c) return (kv?.createRevision ?? 0) === c.create;
    return (kv?.value ?? null) === c.value;
  }

  /** One atomic transaction: one revision for all its writes. */
  txn(compares: readonly Compare[], then: readonly StoreOp[], otherwise: readonly StoreOp[] = []) {
    const succeeded = compares.every((c) => this.holds(c));
    const ops = succeeded ? then : otherwise;
    const writes = ops.some((op) => 'put' in op);
    if (writes && this.noSpace)
      throw new StoreError('nospace', 'etcdserver: mvcc: database space exceeded (NOSPACE)');
    for (const op of ops) {
      if ('put' in op && op.lease !== undefined && !this.leases.has(op.lease))
        throw new StoreError('leaseNotFound', `etcdserver: requested lease ${op.lease} not found`);
    }
    const gets = ops.filter((op) => 'get' in op).map((op) => this.kvs.get((op as { get: string }).get));
    if (ops.some((op) => !('get' in op))) {
      this.revisionNow++;
      for (const op of ops) {
        if ('put' in op) this.write(op.put, op.value, op.lease ?? 0);
        else if ('delete' in op) this.remove(op.delete);
      }
    }
    return { succeeded, revision: this.revisionNow, gets } satisfies TxnResult;
  }

  private write(key: string, value: string, lease: number): void {
    const before = this.kvs.get(key);
    const kv: StoreKv = {
      key,
      value,
      createRevision: before?.createRevision ?? this.revisionNow,
      modRevision: this.revisionNow,
      lease,
    };
    this.kvs.set(key, kv);
    this.emit({ type: 'put', key, kv, revision: this.revisionNow });
  }

  private remove(key: string): void {
    if (!this.kvs.delete(key)) return;
    this.emit({ type: 'delete', key, revision: this.revisionNow });
  }

  private emit(event: WatchEvent): void {
    this.history.push(event);
    for (const w of this.watchers) if (event.key.startsWith(w.prefix)) w.deliver(event);
  }

  /** Every change under `prefix` from `fromRevision` on (history first), until cancelled. */
  watch(prefix: string, fromRevision: number, deliver: (e: WatchEvent) => void): () => void {
    for (const event of this.history)
      if (event.revision >= fromRevision && event.key.startsWith(prefix)) deliver(event);
    const watcher = { prefix, deliver };
    this.watchers.add(watcher);
    return () => this.watchers.delete(watcher);
  }

  grant(ttlMs: number): number {
    if (this.noSpace)
      throw new StoreError('nospace', 'etcdserver: mvcc: database space exceeded (NOSPACE)');
    const id = this.nextLease++;
    const lease: LeaseRecord = { ttlMs, expiresAtMs: 0, timer: null };
    this.leases.set(id, lease);
    this.renew(id, lease);
    return id;
  }

  keepAlive(id: number): void {
    const lease = this.leases.get(id);
    if (lease === undefined) throw new StoreError('leaseNotFound', `lease ${id} not found (expired)`);
    this.renew(id, lease);
  }

  private renew(id: number, lease: LeaseRecord): void {
    lease.expiresAtMs = this.clock.nowMs() + lease.ttlMs;
    if (lease.timer !== null) this.clock.clearTimer(lease.timer);
    lease.timer = this.clock.setTimer(lease.expiresAtMs, () => {
      lease.timer = null;
      // No leader, no expiry: the next leader gives every lease a full TTL.
      if (!this.leaderLost) this.revoke(id);
    });
  }

  /** Ends the lease and deletes its keys (one revision). */
  revoke(id: number): void {
    const lease = this.leases.get(id);
    if (lease === undefined) return;
    if (lease.timer !== null) this.clock.clearTimer(lease.timer);
    this.leases.delete(id);
    const keys = [...this.kvs.values()].filter((kv) => kv.lease === id).map((kv) => kv.key);
    if (keys.length === 0) return;
    this.revisionNow++;
    for (const key of keys) this.remove(key);
  }
}

/**
 * One process's connection to the store: a killed process gets no answer any more, a
 * partitioned one gets errors, and its watch events wait until the partition heals.
 */
export class StoreClient {
  private alive = true;
  private partitionedUntilMs = -1;
  private cut = false;
  private held: (() => void)[] = [];
  private readonly cancels = new Set<() => void>();

  constructor(
    readonly store: SimStore,
    private readonly clock: Clock,
    readonly name: string,
  ) {}

  get isAlive(): boolean {
    return this.alive;
  }

  get partitioned(): boolean {
    return this.cut;
  }

  /** The process died: nothing reaches it any more. */
  kill(): void {
    this.alive = false;
    this.held = [];
    for (const cancel of this.cancels) cancel();
    this.cancels.clear();
  }

  /** Cut off from the store for `durationMs`. */
  partition(durationMs: number): void {
    const untilMs = Math.max(this.partitionedUntilMs, this.clock.nowMs() + durationMs);
    this.partitionedUntilMs = untilMs;
    this.cut = true;
    this.clock.setTimer(untilMs, () => {
      if (this.partitionedUntilMs !== untilMs) return;
      this.cut = false;
      for (const deliver of this.held.splice(0)) if (this.alive) deliver();
    });
  }

  /** A request; its answer never arrives once the process died. */
  async call<T>(run: () => T, opts: { writes: boolean } = { writes: true }): Promise<T> {
    if (!this.alive) return new Promise<T>(() => {});
    if (this.partitioned)
      throw new StoreError('unavailable', `${this.name} cannot reach the store (partitioned)`);
    try {
      const result = await this.store.request(run, opts);
      if (!this.alive) return new Promise<T>(() => {});
      return result;
    } catch (error) {
      if (!this.alive) return new Promise<T>(() => {});
      throw error;
    }
  }

  /** A watch whose events arrive in order, after the current turn; held while partitioned. */
  watch(prefix: string, fromRevision: number, on: (e: WatchEvent) => void): () => void {
    let open = true;
    const cancelStore = this.store.watch(prefix, fromRevision, (event) => {
      const deliver = () => {
        if (open && this.alive) on(event);
      };
      if (this.partitioned) this.held.push(deliver);
      else queueMicrotask(deliver);
    });
    const cancel = () => {
      open = false;
      cancelStore();
      this.cancels.delete(cancel);
    };
    this.cancels.add(cancel);
    return cancel;
  }
}
