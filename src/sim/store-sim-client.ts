/**
 * One process's connection to the simulated store (store-sim.ts), as the store port
 * (src/cluster/store.ts): what the real cluster code is given in `vole chaos --cluster`
 * instead of an etcd client. A killed process gets no answer any more; a partitioned one
 * gets errors, and its watch events wait until the partition heals (etcd3 resumes a
 * broken watch from the last revision it delivered). Leases are kept alive every third of
 * their TTL, as etcd3 does, and reported lost when the store says they expired.
 */
import type { Clock, TimerHandle } from '../clock.js';
import type {
  Compare,
  KeyValue,
  KvStore,
  RangeRequest,
  RangeResult,
  StoreLease,
  StoreWatch,
  TxnOp,
  TxnResult,
  WatchHandlers,
  WatchRange,
} from '../cluster/store.js';
import { type BrokenRules, type SimStore, type StoreChange, StoreError } from './store-sim.js';

const never = <T>() => new Promise<T>(() => {});

export class SimStoreClient implements KvStore {
  private alive = true;
  private partitionedUntilMs = -1;
  private cut = false;
  private held: (() => void)[] = [];
  private readonly stops = new Set<() => void>();

  constructor(
    readonly store: SimStore,
    private readonly clock: Clock,
    readonly name: string,
    private readonly broken: BrokenRules = {},
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
    for (const stop of [...this.stops]) stop();
    this.stops.clear();
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
  async call<T>(run: () => T, opts: { writes: boolean }): Promise<T> {
    if (!this.alive) return never<T>();
    if (this.cut)
      throw new StoreError('unavailable', `${this.name} cannot reach the store (partitioned)`);
    try {
      const result = await this.store.request(run, opts);
      return this.alive ? result : never<T>();
    } catch (error) {
      if (!this.alive) return never<T>();
      throw error;
    }
  }

  get(key: string): Promise<KeyValue | undefined> {
    return this.call(() => this.store.get(key), { writes: false });
  }

  range(request: RangeRequest): Promise<RangeResult> {
    return this.call(() => this.store.range(request), { writes: false });
  }

  txn(
    compares: readonly Compare[],
    then: readonly TxnOp[],
    otherwise: readonly TxnOp[] = [],
  ): Promise<TxnResult> {
    const writes = [...then, ...otherwise].some((op) => !('get' in op));
    const guard = this.broken.ignoreCompares === true ? [] : compares;
    return this.call(() => this.store.txn(guard, then, otherwise), { writes });
  }

  async watch(
    range: WatchRange,
    fromRevision: number | undefined,
    handlers: WatchHandlers,
  ): Promise<StoreWatch> {
    if (!this.alive) return never<StoreWatch>();
    let open = true;
    const blind = this.broken.blindTo;
    const deliverNow = (change: StoreChange) => {
      if (!open || !this.alive || blind?.(change.key) === true) return;
      if (change.kv !== undefined) handlers.put(change.kv);
      else handlers.delete(change.key, change.revision);
    };
    const from = fromRevision ?? this.store.revision + 1;
    const cancelStore = this.store.watch(range, from, (change) => {
      if (this.cut) this.held.push(() => deliverNow(change));
      else queueMicrotask(() => deliverNow(change));
    });
    const stop = () => {
      open = false;
      cancelStore?.();
      this.stops.delete(stop);
    };
    if (cancelStore === undefined) {
      open = false;
      const error = new StoreError(
        'compacted',
        'etcdserver: mvcc: required revision has been compacted',
      );
      queueMicrotask(() => this.alive && handlers.error?.(error));
    } else this.stops.add(stop);
    await Promise.resolve();
    return { cancel: async () => stop() };
  }

  async grantLease(ttlS: number): Promise<StoreLease> {
    const id = await this.call(() => this.store.grant(ttlS * 1000), { writes: true });
    return new SimLease(this, this.clock, id, ttlS * 1000, this.broken.blindTo !== undefined);
  }

  /** Runs `fn` after `delayMs` unless the process died first; stopped with it. */
  later(delayMs: number, fn: () => void): () => void {
    let timer: TimerHandle | null = null;
    const stop = () => {
      if (timer !== null) this.clock.clearTimer(timer);
      this.stops.delete(stop);
    };
    timer = this.clock.setTimer(this.clock.nowMs() + delayMs, () => {
      this.stops.delete(stop);
      if (this.alive) fn();
    });
    this.stops.add(stop);
    return stop;
  }
}

/** A lease kept alive every third of its TTL through its client. */
class SimLease implements StoreLease {
  private readonly keptAlive: (() => void)[] = [];
  private readonly lostListeners: ((error: Error) => void)[] = [];
  private ended = false;
  private stopTimer: (() => void) | null = null;

  constructor(
    private readonly client: SimStoreClient,
    private readonly clock: Clock,
    readonly id: string,
    private readonly ttlMs: number,
    /** A broken lease (BrokenRules): its keepalives always seem to succeed. */
    private readonly neverLost: boolean,
  ) {
    this.schedule();
  }

  private schedule(): void {
    this.stopTimer = this.client.later(Math.floor(this.ttlMs / 3), () => {
      if (this.ended) return;
      const { store } = this.client;
      this.client
        .call(() => store.keepAlive(this.id), { writes: false })
        .then(
          () => this.tell(),
          (error: unknown) => {
            if (this.neverLost) return this.tell();
            if (error instanceof StoreError && error.kind === 'leaseNotFound') this.lose(error);
          },
        );
      this.schedule();
    });
  }

  private tell(): void {
    if (!this.ended) for (const listener of this.keptAlive) listener();
  }

  private lose(error: Error): void {
    if (this.ended) return;
    this.ended = true;
    this.stopTimer?.();
    for (const listener of this.lostListeners) listener(error);
  }

  onKeepAlive(listener: () => void): void {
    this.keptAlive.push(listener);
  }

  onLost(listener: (error: Error) => void): void {
    this.lostListeners.push(listener);
  }

  async revoke(): Promise<void> {
    this.ended = true;
    this.stopTimer?.();
    await this.client.call(() => this.client.store.revoke(this.id), { writes: true });
  }
}
