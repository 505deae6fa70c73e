/**
 * Leader election on an etcd lease, done with one compare-and-swap, not with etcd3's
 * Election helper (docs/cluster.md: it has chosen two leaders). A candidate creates the leader
 * key bound to its lease only if the key does not exist; the key's create revision then
 * names this term. Every write of the leader is a transaction comparing that create
 * revision (`fence`), so a deposed leader cannot write even if it still believes it leads.
 *
 * The leader stops acting (`lost`) the moment any of these holds: etcd3 reports the lease
 * lost; no keepalive succeeded for the lease's TTL less a margin (etcd may already have
 * expired it); the leader key was deleted or recreated; a fenced write was refused.
 */
import { assert } from '../assert.js';
import type { Clock, TimerHandle } from '../clock.js';
import type { ClusterKeys } from './keys.js';
import type { Compare, KvStore, StoreLease, StoreWatch } from './store.js';

export interface LeadershipOptions {
  readonly identity: string;
  readonly ttlS: number;
  readonly clock: Clock;
  readonly signal?: AbortSignal;
  /** Progress lines (waiting for the current leader, …). */
  readonly say?: (line: string) => void;
}

/** How long after its last keepalive a lease of `ttlS` seconds is held: short of the TTL. */
function keepAliveLimitMs(ttlS: number): number {
  return ttlS * 1000 - Math.min(1000, (ttlS * 1000) / 4);
}

export class LeadershipLost extends Error {
  override name = 'LeadershipLost';
}

export class Leadership {
  private lastKeepAliveOkMs: number;
  private lostError: LeadershipLost | null = null;
  private readonly lostListeners = new Set<(error: LeadershipLost) => void>();
  private timer: TimerHandle | null = null;
  private unwatch: (() => void) | null = null;

  private constructor(
    private readonly store: KvStore,
    private readonly keys: ClusterKeys,
    private readonly lease: StoreLease,
    /** The leader key's create revision: this term. */
    readonly term: number,
    readonly ttlS: number,
    private readonly clock: Clock,
    grantedAtMs: number,
  ) {
    assert(term > 0, `a term is the leader key's create revision, not ${term}`);
    this.lastKeepAliveOkMs = grantedAtMs;
    lease.onKeepAlive(() => {
      this.lastKeepAliveOkMs = clock.nowMs();
    });
    lease.onLost((error) => this.lose(`lease lost: ${error.message}`));
    this.check();
  }

  get leaseId(): string {
    return this.lease.id;
  }

  /**
   * The lease may already be expired in the store: stop before it surely is. Checked when
   * the deadline from the last keepalive comes (again later if one came meanwhile).
   */
  private check(): void {
    const { clock, ttlS } = this;
    const limitMs = keepAliveLimitMs(ttlS);
    assert(limitMs > 0, `the keepalive deadline of a ${ttlS} s lease is ${limitMs} ms`);
    const sinceMs = clock.nowMs() - this.lastKeepAliveOkMs;
    if (sinceMs > limitMs) return this.lose(`no lease keepalive for ${sinceMs} ms (TTL ${ttlS} s)`);
    this.timer = clock.setTimer(this.lastKeepAliveOkMs + limitMs + 1, () => this.check());
  }

  /** Campaigns until this candidate leads (or the signal aborts: rejects). */
  static async campaign(
    store: KvStore,
    keys: ClusterKeys,
    opts: LeadershipOptions,
  ): Promise<Leadership> {
    assert(opts.identity !== '', 'a candidate names itself (identity): the leader key holds it');
    assert(
      Number.isInteger(opts.ttlS) && opts.ttlS > 0,
      `a lease TTL is a whole number of seconds above 0, not ${opts.ttlS}`,
    );
    let waitingSaid = false;
    while (true) {
      if (opts.signal?.aborted === true) throw new LeadershipLost('campaign aborted');
      const grantedAtMs = opts.clock.nowMs();
      const lease = await store.grantLease(opts.ttlS);
      // A grant that took most of the lease's deadline (its call waited on a member behind
      // a partition before it went elsewhere) would lead only to lose at once: grant again.
      if (opts.clock.nowMs() - grantedAtMs > keepAliveLimitMs(opts.ttlS) / 2) {
        await lease.revoke().catch(() => undefined);
        continue;
      }
      const result = await store.txn(
        [{ key: keys.leader, createRevision: 0 }],
        [{ put: keys.leader, value: opts.identity, lease: lease.id }],
        [{ get: keys.leader }],
      );
      if (result.succeeded) {
        assert(result.revision > 0, `a created leader key has a revision, not ${result.revision}`);
        const leadership = new Leadership(
          store,
          keys,
          lease,
          result.revision,
          opts.ttlS,
          opts.clock,
          grantedAtMs,
        );
        await leadership.watchKey(result.revision);
        return leadership;
      }
      await lease.revoke().catch(() => undefined);
      if (!waitingSaid) {
        opts.say?.(
          `standby: ${result.gets[0]?.value.toString() ?? 'another replica'} leads; waiting for its lease`,
        );
        waitingSaid = true;
      }
      await waitForDelete(store, keys.leader, result.revision, opts.signal);
    }
  }

  private async watchKey(revision: number): Promise<void> {
    const lost = () => this.lose('the leader key was deleted or replaced');
    const watcher = await this.store.watch({ key: this.keys.leader }, revision + 1, {
      delete: lost,
      put: (kv) => {
        if (kv.createRevision !== this.term) lost();
      },
      error: (error) => this.lose(`the watch on the leader key ended: ${error.message}`),
    });
    if (this.isLost) return void watcher.cancel().catch(() => undefined);
    this.unwatch = () => void watcher.cancel().catch(() => undefined);
  }

  /** The compare that makes a transaction succeed only while this term leads. */
  fence(): Compare[] {
    assert(this.term > 0, `term ${this.term}: a fence compares the leader key's create revision`);
    return [{ key: this.keys.leader, createRevision: this.term }];
  }

  get isLost(): boolean {
    return this.lostError !== null;
  }

  /** Called once when leadership ends (at once if it already has). */
  onLost(listener: (error: LeadershipLost) => void): void {
    if (this.lostError !== null) listener(this.lostError);
    else this.lostListeners.add(listener);
  }

  lose(why: string): void {
    assert(why !== '', `term ${this.term}: leadership is lost for a reason`);
    if (this.lostError !== null) return;
    this.lostError = new LeadershipLost(`leadership lost (term ${this.term}): ${why}`);
    if (this.timer !== null) this.clock.clearTimer(this.timer);
    this.unwatch?.();
    void this.lease.revoke().catch(() => undefined); // a standby need not wait for the TTL
    for (const listener of this.lostListeners) listener(this.lostError);
    this.lostListeners.clear();
  }

  /** Steps down: the key goes with the lease, a standby takes over at once. */
  async resign(): Promise<void> {
    if (this.lostError === null) this.lose('resigned');
    await this.lease.revoke().catch(() => undefined);
  }
}

async function waitForDelete(
  store: KvStore,
  key: string,
  revision: number,
  signal?: AbortSignal,
): Promise<void> {
  let watcher: StoreWatch | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      signal?.addEventListener('abort', () => resolve(), { once: true });
      store
        .watch({ key }, revision + 1, {
          put: () => undefined,
          delete: () => resolve(),
          error: () => resolve(),
        })
        .then((created) => {
          watcher = created;
          // A check after the watch exists: the key may have gone in between.
          return store.get(key).then((kv) => {
            if (kv === undefined) resolve();
          });
        })
        .catch(reject);
    });
  } finally {
    await watcher?.cancel().catch(() => undefined);
  }
}
