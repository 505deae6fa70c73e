/**
 * Leader election on an etcd lease, done with one compare-and-swap, not with etcd3's
 * Election helper (CLUSTER.md: it has chosen two leaders). A candidate creates the leader
 * key bound to its lease only if the key does not exist; the key's create revision then
 * names this term. Every write of the leader is a transaction comparing that create
 * revision (`fence`), so a deposed leader cannot write even if it still believes it leads.
 *
 * The leader stops acting (`lost`) the moment any of these holds: etcd3 reports the lease
 * lost; no keepalive succeeded for the lease's TTL less a margin (etcd may already have
 * expired it); the leader key was deleted or recreated; a fenced write was refused.
 */
import type { ComparatorBuilder, Etcd3, Lease } from 'etcd3';
import type { ClusterKeys } from './keys.js';

export interface LeadershipOptions {
  readonly identity: string;
  readonly ttlS: number;
  readonly signal?: AbortSignal;
  /** Progress lines (waiting for the current leader, …). */
  readonly say?: (line: string) => void;
}

export class LeadershipLost extends Error {
  override name = 'LeadershipLost';
}

/** Checks the local lease deadline this often. */
const checkEveryMs = 100;

export class Leadership {
  private lastKeepAliveOkMs: number;
  private lostError: LeadershipLost | null = null;
  private readonly lostListeners = new Set<(error: LeadershipLost) => void>();
  private readonly timer: NodeJS.Timeout;
  private unwatch: (() => void) | null = null;

  private constructor(
    private readonly client: Etcd3,
    private readonly keys: ClusterKeys,
    private readonly lease: Lease,
    readonly leaseId: string,
    /** The leader key's create revision: this term. */
    readonly term: string,
    readonly ttlS: number,
    grantedAtMs: number,
  ) {
    this.lastKeepAliveOkMs = grantedAtMs;
    lease.on('keepaliveSucceeded', () => {
      this.lastKeepAliveOkMs = Date.now();
    });
    lease.on('lost', (error) => this.lose(`lease lost: ${error.message}`));
    this.timer = setInterval(() => {
      // The lease may already be expired in etcd: stop before it surely is.
      const marginMs = Math.min(1000, (ttlS * 1000) / 4);
      if (Date.now() - this.lastKeepAliveOkMs > ttlS * 1000 - marginMs)
        this.lose(`no lease keepalive for ${Date.now() - this.lastKeepAliveOkMs} ms (TTL ${ttlS} s)`);
    }, checkEveryMs);
  }

  /** Campaigns until this candidate leads (or the signal aborts: rejects). */
  static async campaign(client: Etcd3, keys: ClusterKeys, opts: LeadershipOptions): Promise<Leadership> {
    let waitingSaid = false;
    while (true) {
      if (opts.signal?.aborted === true) throw new LeadershipLost('campaign aborted');
      const lease = client.lease(opts.ttlS, { autoKeepAlive: true });
      lease.on('lost', () => undefined); // handled once leading; a grant failure rejects below
      const grantedAtMs = Date.now();
      const leaseId = await lease.grant();
      const result = await client
        .if(keys.leader, 'Create', '==', 0)
        .then(client.put(keys.leader).value(opts.identity).lease(leaseId))
        .else(client.get(keys.leader))
        .commit();
      if (result.succeeded) {
        const leadership = new Leadership(client, keys, lease, leaseId, result.header.revision, opts.ttlS, grantedAtMs);
        await leadership.watchKey(Number(result.header.revision));
        return leadership;
      }
      await lease.revoke().catch(() => undefined);
      const holder = result.responses[0]?.response_range?.kvs[0];
      if (!waitingSaid) {
        opts.say?.(`standby: ${holder?.value.toString() ?? 'another replica'} leads; waiting for its lease`);
        waitingSaid = true;
      }
      await waitForDelete(client, keys.leader, Number(result.header.revision), opts.signal);
    }
  }

  private async watchKey(revision: number): Promise<void> {
    const watcher = await this.client.watch().key(this.keys.leader).startRevision(String(revision + 1)).create();
    const lost = () => this.lose('the leader key was deleted or replaced');
    watcher.on('delete', lost);
    watcher.on('put', (kv) => {
      if (kv.create_revision !== this.term) lost();
    });
    this.unwatch = () => void watcher.cancel().catch(() => undefined);
  }

  /** Starts a transaction that succeeds only while this term leads. */
  fence(): ComparatorBuilder {
    return this.client.if(this.keys.leader, 'Create', '==', this.term);
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
    if (this.lostError !== null) return;
    this.lostError = new LeadershipLost(`leadership lost (term ${this.term}): ${why}`);
    clearInterval(this.timer);
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

async function waitForDelete(client: Etcd3, key: string, revision: number, signal?: AbortSignal): Promise<void> {
  const watcher = await client.watch().key(key).startRevision(String(revision + 1)).create();
  try {
    await new Promise<void>((resolve) => {
      watcher.on('delete', () => resolve());
      watcher.on('error', () => resolve());
      signal?.addEventListener('abort', () => resolve(), { once: true });
      // A check after the watch exists: the key may have gone in between.
      void client.get(key).then((value) => {
        if (value === null) resolve();
      });
    });
  } finally {
    await watcher.cancel().catch(() => undefined);
  }
}
