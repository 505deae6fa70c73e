/**
 * The store port (src/cluster/store.ts) simulated, for `vole chaos --cluster`: one etcd on
 * the virtual clock, deterministic for a seed. What the cluster code relies on
 * (docs/cluster.md): one revision counter, keys with create and mod revisions and their history
 * (a range at a past revision, a watch from one, both refused once compacted away), leases
 * with a TTL whose keys go when they expire, transactions guarded by compares.
 *
 * Faults, as the chaos run injects them:
 * - the store's leader member lost: requests fail — at once (unavailable), or after a
 *   timeout with an unknown outcome (a write applied before the answer was lost, or
 *   applied later when a leader is back, or never); leases do not expire meanwhile and get
 *   a full TTL back, as etcd's new leader gives them;
 * - out of space (NOSPACE): transactions that put, and lease grants, are refused;
 * - a client cut off (partitioned): its requests fail and its watch events wait;
 * - a client killed: it gets no answer any more, its watches and keepalives stop.
 */
import { type Clock, type TimerHandle } from '../clock.js';
import type {
  Compare,
  KeyValue,
  RangeRequest,
  RangeResult,
  TxnOp,
  TxnResult,
  WatchRange,
} from '../cluster/store.js';

export class StoreError extends Error {
  override name = 'StoreError';
  constructor(
    readonly kind: 'unavailable' | 'timeout' | 'nospace' | 'leaseNotFound' | 'compacted',
    message: string,
  ) {
    super(message);
  }
}

/** How long a client waits for an answer before it gives up (etcd3's request timeout). */
const storeRequestTimeoutMs = 3_000;

/** One change, as a watch delivers it. */
export interface StoreChange {
  readonly revision: number;
  readonly key: string;
  /** Absent: deleted. */
  readonly kv?: KeyValue;
}

interface LeaseRecord {
  readonly ttlMs: number;
  timer: TimerHandle | null;
}

/** Keys compare as etcd compares bytes: ASCII keys, bounds of any bytes (latin1). */
function keyOf(bound: string | Buffer): string {
  return typeof bound === 'string' ? bound : bound.toString('latin1');
}

/** The first index in sorted `keys` not below `key`. */
function lowerBound(keys: readonly string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (keys[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export class SimStore {
  private revisionNow = 0;
  /** Every key ever written, sorted; each with its versions (null: deleted then). */
  private readonly keys: string[] = [];
  private readonly versions = new Map<string, { revision: number; kv: KeyValue | null }[]>();
  private compactedRevision = 0;
  private readonly leases = new Map<string, LeaseRecord>();
  private nextLease = 1;
  private readonly history: StoreChange[] = [];
  private readonly watchers = new Set<{ range: WatchRange; deliver: (c: StoreChange) => void }>();
  private leaderLostUntilMs = -1;
  private lost = false;
  private noSpace = false;
  private readonly afterRecovery: (() => void)[] = [];
  /** Requests answered, for settling and the report. */
  requests = 0;
  /** Told of every change as it commits (the harness's view, not a client's). */
  onChange: ((change: StoreChange) => void) | null = null;

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

  /**
   * Runs a request as the store answers it: at once, or failing under the current faults.
   * A write that times out may have been applied (the answer lost), be applied once a
   * leader is back, or never be.
   */
  request<T>(run: () => T, opts: { writes: boolean }): Promise<T> {
    this.requests++;
    if (!this.lost) return Promise.resolve().then(run);
    if (this.random() < 0.5)
      return Promise.reject(new StoreError('unavailable', 'etcdserver: no leader (unavailable)'));
    const fate = opts.writes ? this.random() : 1;
    if (fate < 0.25) this.applyQuietly(run);
    else if (fate < 0.5) this.afterRecovery.push(() => this.applyQuietly(run));
    return new Promise((_, reject) =>
      this.clock.setTimer(this.clock.nowMs() + storeRequestTimeoutMs, () =>
        reject(new StoreError('timeout', 'etcdserver: request timed out; the outcome is unknown')),
      ),
    );
  }

  private applyQuietly(run: () => unknown): void {
    try {
      run();
    } catch {
      // refused when applied (NOSPACE, a lease gone): nobody hears of it
    }
  }

  get(key: string): KeyValue | undefined {
    return this.versions.get(key)?.at(-1)?.kv ?? undefined;
  }

  range(request: RangeRequest): RangeResult {
    const revision = request.revision ?? 0;
    if (revision > this.revisionNow)
      throw new StoreError(
        'unavailable',
        `etcdserver: mvcc: required revision is a future revision`,
      );
    if (revision > 0 && revision <= this.compactedRevision)
      throw new StoreError('compacted', 'etcdserver: mvcc: required revision has been compacted');
    const at = revision > 0 ? revision : this.revisionNow;
    const start = keyOf(request.start);
    const endKey = keyOf(request.end);
    const unbounded = endKey === '\0';
    const found: KeyValue[] = [];
    for (let i = lowerBound(this.keys, start); i < this.keys.length; i++) {
      const key = this.keys[i]!;
      if (!unbounded && key >= endKey) break;
      const kv = this.valueAt(key, at);
      if (kv !== undefined)
        found.push(request.keysOnly === true ? { ...kv, value: Buffer.alloc(0) } : kv);
    }
    if (request.byModRevision === true) found.sort((a, b) => a.modRevision - b.modRevision);
    if (request.descending === true) found.reverse();
    const limit = request.limit ?? 0;
    const more = limit > 0 && found.length > limit;
    return { kvs: more ? found.slice(0, limit) : found, more, revision: at, count: found.length };
  }

  private valueAt(key: string, revision: number): KeyValue | undefined {
    const list = this.versions.get(key)!;
    for (let i = list.length - 1; i >= 0; i--)
      if (list[i]!.revision <= revision) return list[i]!.kv ?? undefined;
    return undefined;
  }

  private holds(c: Compare): boolean {
    const kv = this.get(c.key);
    if ('createRevision' in c) return (kv?.createRevision ?? 0) === c.createRevision;
    if ('modRevision' in c) return (kv?.modRevision ?? 0) === c.modRevision;
    return kv !== undefined && kv.value.toString() === c.value;
  }

  /** One atomic transaction: one revision for all its writes. */
  txn(
    compares: readonly Compare[],
    then: readonly TxnOp[],
    otherwise: readonly TxnOp[] = [],
  ): TxnResult {
    const succeeded = compares.every((c) => this.holds(c));
    const ops = succeeded ? then : otherwise;
    if (this.noSpace && ops.some((op) => 'put' in op))
      throw new StoreError('nospace', 'etcdserver: mvcc: database space exceeded (NOSPACE)');
    for (const op of ops) {
      if ('put' in op && op.lease !== undefined && !this.leases.has(op.lease))
        throw new StoreError('leaseNotFound', `etcdserver: requested lease ${op.lease} not found`);
    }
    const gets = ops.filter((op) => 'get' in op).map((op) => this.get((op as { get: string }).get));
    let deleted = 0;
    if (ops.some((op) => !('get' in op))) {
      this.revisionNow++;
      for (const op of ops) {
        if ('put' in op) this.write(op.put, Buffer.from(op.value), op.lease ?? '0');
        else if ('delete' in op) deleted += this.deleteRange(op.delete, op.end);
      }
    }
    return { succeeded, revision: this.revisionNow, gets, deleted };
  }

  private deleteRange(start: string, end: string | Buffer | undefined): number {
    if (end === undefined) return this.remove(start) ? 1 : 0;
    const keys = this.range({ start, end, keysOnly: true }).kvs.map((kv) => kv.key);
    for (const key of keys) this.remove(key);
    return keys.length;
  }

  private write(key: string, value: Buffer, lease: string): void {
    const before = this.get(key);
    const kv: KeyValue = {
      key,
      value,
      createRevision: before?.createRevision ?? this.revisionNow,
      modRevision: this.revisionNow,
      lease,
    };
    let list = this.versions.get(key);
    if (list === undefined) {
      list = [];
      this.versions.set(key, list);
      this.keys.splice(lowerBound(this.keys, key), 0, key);
    }
    list.push({ revision: this.revisionNow, kv });
    this.emit({ revision: this.revisionNow, key, kv });
  }

  private remove(key: string): boolean {
    if (this.get(key) === undefined) return false;
    this.versions.get(key)!.push({ revision: this.revisionNow, kv: null });
    this.emit({ revision: this.revisionNow, key });
    return true;
  }

  private emit(change: StoreChange): void {
    this.history.push(change);
    this.onChange?.(change);
    for (const w of this.watchers) if (inRange(w.range, change.key)) w.deliver(change);
  }

  /**
   * etcd's compaction: the history up to `revision` is forgotten (the latest value of each
   * key stays); a range or watch from a revision at or before it is refused.
   */
  compact(revision: number): void {
    const upTo = Math.min(revision, this.revisionNow);
    if (upTo <= this.compactedRevision) return;
    this.compactedRevision = upTo;
    for (const [key, list] of this.versions) {
      let keep = list.length - 1;
      while (keep > 0 && list[keep]!.revision > upTo) keep--;
      if (keep > 0) list.splice(0, keep);
      if (list.length === 1 && list[0]!.kv === null) {
        this.versions.delete(key);
        this.keys.splice(lowerBound(this.keys, key), 1);
      }
    }
    let drop = 0;
    while (drop < this.history.length && this.history[drop]!.revision <= upTo) drop++;
    this.history.splice(0, drop);
  }

  get compacted(): number {
    return this.compactedRevision;
  }

  /**
   * Every change in `range` from `fromRevision` on (history first), until cancelled;
   * undefined when that revision was compacted away.
   */
  watch(
    range: WatchRange,
    fromRevision: number,
    deliver: (c: StoreChange) => void,
  ): (() => void) | undefined {
    if (fromRevision <= this.compactedRevision) return undefined;
    for (const change of this.history)
      if (change.revision >= fromRevision && inRange(range, change.key)) deliver(change);
    const watcher = { range, deliver };
    this.watchers.add(watcher);
    return () => this.watchers.delete(watcher);
  }

  grant(ttlMs: number): string {
    if (this.noSpace)
      throw new StoreError('nospace', 'etcdserver: mvcc: database space exceeded (NOSPACE)');
    const id = String(this.nextLease++);
    const lease: LeaseRecord = { ttlMs, timer: null };
    this.leases.set(id, lease);
    this.renew(id, lease);
    return id;
  }

  keepAlive(id: string): void {
    const lease = this.leases.get(id);
    if (lease === undefined)
      throw new StoreError('leaseNotFound', `lease ${id} not found (expired)`);
    this.renew(id, lease);
  }

  hasLease(id: string): boolean {
    return this.leases.has(id);
  }

  private renew(id: string, lease: LeaseRecord): void {
    if (lease.timer !== null) this.clock.clearTimer(lease.timer);
    lease.timer = this.clock.setTimer(this.clock.nowMs() + lease.ttlMs, () => {
      lease.timer = null;
      // No leader, no expiry: the next leader gives every lease a full TTL.
      if (!this.lost) this.revoke(id);
    });
  }

  /** Ends the lease and deletes its keys (one revision). */
  revoke(id: string): void {
    const lease = this.leases.get(id);
    if (lease === undefined) return;
    if (lease.timer !== null) this.clock.clearTimer(lease.timer);
    this.leases.delete(id);
    const keys = this.keys.filter((key) => this.get(key)?.lease === id);
    if (keys.length === 0) return;
    this.revisionNow++;
    for (const key of keys) this.remove(key);
  }
}

function inRange(range: WatchRange, key: string): boolean {
  return 'key' in range ? key === range.key : key.startsWith(range.prefix);
}

/** Options of one client that make a deliberately broken cluster (the checks must bite). */
export interface BrokenRules {
  /** Compares always hold: a deposed leader's writes are never refused. */
  readonly ignoreCompares?: boolean;
  /** Watch events on these keys never arrive, and its leases are never lost. */
  readonly blindTo?: (key: string) => boolean;
}
