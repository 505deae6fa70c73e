/**
 * Member health for etcd3's connection pool: a member known dead is tried last, and a
 * connection that does not come up in time is given up.
 *
 * etcd3 1.1.2 picks a member at random for each call and each (re)started watch or lease
 * stream, and gRPC puts no bound on a connection attempt: a SYN to a member behind a
 * partition (packets dropped) stays unanswered, and the calls and streams queued on that
 * connection wait with it (etcd3 ignores its own `dialTimeout`). A watch restarted after
 * its member was cut off could land on that member again and stall for good
 * (test/cluster/partition.host.test.ts, `leader-with-etcd-leader-in-minority`). Here:
 * - a member whose connection has not been ready for `connectTimeoutMs` is marked dead
 *   and its channels closed, which fails what waits on them as UNAVAILABLE, so etcd3
 *   retries calls and restarts streams elsewhere;
 * - etcd3 resets a member's channels on every recoverable error (unreachable, no leader,
 *   keepalive timeout, deadline): that marks it dead too;
 * - the pool's member order puts the dead last (each call still tries every member), and
 *   a member is alive again once a connection to it is ready, or `quarantineMs` after it
 *   was marked, when it is tried in turn again.
 * etcd3 has no option for any of this: its pool's internals are wrapped, checked first.
 */
import type { Etcd3 } from 'etcd3';

interface ServiceClient {
  getChannel(): { getConnectivityState(tryToConnect: boolean): number };
}

interface PoolHost {
  cachedServices: Record<string, ServiceClient | undefined>;
  resetAllServices(): void;
  closed: boolean;
  host: string;
}

interface Pool {
  hosts: PoolHost[];
  shuffledHosts(): Generator<PoolHost, never, unknown>;
}

/** grpc-js connectivity states (`connectivityState`), as numbers. */
const IDLE = 0;
const CONNECTING = 1;
const READY = 2;
const TRANSIENT_FAILURE = 3;

export interface HostHealthOptions {
  /** A connection not ready after this long is given up and its member marked dead. */
  connectTimeoutMs: number;
  /** A dead member is tried first again this long after it was marked. */
  quarantineMs: number;
  /** How often the connections are looked at. */
  sweepMs?: number;
}

interface Health {
  deadSinceMs?: number;
  notReadySinceMs?: number;
  /** Sweeps that saw it not ready: a stalled event loop alone does not give up a member. */
  notReadySweeps: number;
}

function poolOf(client: Etcd3): Pool {
  const pool = (client as unknown as { pool?: Partial<Pool> }).pool;
  const host = pool?.hosts?.[0];
  if (
    pool === undefined ||
    typeof pool.shuffledHosts !== 'function' ||
    host === undefined ||
    typeof host.resetAllServices !== 'function' ||
    typeof host.cachedServices !== 'object'
  )
    throw new Error('etcd3 changed: its connection pool has no hosts with resetAllServices');
  return pool as Pool;
}

/** A channel's worst state: READY only if every one of the member's channels is. */
function hostState(host: PoolHost): number {
  let state = IDLE;
  for (const service of Object.values(host.cachedServices)) {
    if (service === undefined) continue;
    const s = service.getChannel().getConnectivityState(false);
    if (s === CONNECTING || s === TRANSIENT_FAILURE) return s;
    if (s === READY) state = READY;
  }
  return state;
}

function isComing(state: number): boolean {
  return state === CONNECTING || state === TRANSIENT_FAILURE;
}

export class HostHealth {
  private readonly health = new Map<PoolHost, Health>();
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(
    private readonly pool: Pool,
    private readonly opts: HostHealthOptions,
  ) {
    for (const host of pool.hosts) {
      this.health.set(host, { notReadySweeps: 0 });
      const reset = host.resetAllServices.bind(host);
      host.resetAllServices = () => {
        if (!host.closed) this.markDead(host);
        reset();
      };
    }
    pool.shuffledHosts = () => this.ordered();
    this.timer = setInterval(() => this.sweep(), opts.sweepMs ?? 500);
    this.timer.unref();
  }

  /** Members known dead now, by address (for tests and messages). */
  dead(nowMs = Date.now()): string[] {
    return this.pool.hosts.filter((h) => this.isDead(h, nowMs)).map((h) => h.host);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private isDead(host: PoolHost, nowMs: number): boolean {
    const since = this.health.get(host)?.deadSinceMs;
    return since !== undefined && nowMs - since < this.opts.quarantineMs;
  }

  private markDead(host: PoolHost): void {
    const health = this.health.get(host);
    if (health === undefined) return;
    health.deadSinceMs = Date.now();
    health.notReadySinceMs = undefined;
    health.notReadySweeps = 0;
  }

  /** Like etcd3's own order (endless, shuffled each round), the live members first. */
  private *ordered(): Generator<PoolHost, never, unknown> {
    for (;;) {
      const hosts = this.pool.hosts.slice();
      // etcd3's own switch for tests: the members in the order given.
      const inOrder = (this.pool.constructor as { deterministicOrder?: boolean })
        .deterministicOrder;
      for (let i = hosts.length - 1; i > 0 && inOrder !== true; i--) {
        const j = Math.floor((i + 1) * Math.random());
        [hosts[i], hosts[j]] = [hosts[j]!, hosts[i]!];
      }
      const nowMs = Date.now();
      const live = hosts.filter((h) => !this.isDead(h, nowMs));
      // Among the live, a member whose connection is still coming up goes after the
      // others: a call queued on it waits until the sweep gives it up.
      const coming = live.filter((h) => isComing(hostState(h)));
      yield* live.filter((h) => !coming.includes(h));
      yield* coming;
      yield* hosts.filter((h) => !live.includes(h));
    }
  }

  private sweep(): void {
    const nowMs = Date.now();
    for (const host of this.pool.hosts) {
      const health = this.health.get(host);
      if (health === undefined || host.closed) continue;
      const state = hostState(host);
      if (state === READY || state === IDLE) {
        if (state === READY) health.deadSinceMs = undefined;
        health.notReadySinceMs = undefined;
        health.notReadySweeps = 0;
        continue;
      }
      health.notReadySinceMs ??= nowMs;
      health.notReadySweeps += 1;
      if (nowMs - health.notReadySinceMs >= this.opts.connectTimeoutMs && health.notReadySweeps > 3)
        host.resetAllServices(); // marks it dead; what waited fails as UNAVAILABLE
    }
  }
}

/** Tracks the members of `client`'s pool until the client is closed. */
export function trackHostHealth(client: Etcd3, opts: HostHealthOptions): HostHealth {
  const health = new HostHealth(poolOf(client), opts);
  const close = client.close.bind(client);
  client.close = () => {
    health.stop();
    close();
  };
  return health;
}
