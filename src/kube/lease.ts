/**
 * Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does
 * it: a candidate takes the Lease when nobody holds it or its holder has not renewed it
 * for leaseDurationSeconds (judged on this process's clock, from when it last saw the
 * record change: no trust in other clocks); every take and renewal is a PUT with the
 * Lease's resourceVersion, so two candidates cannot both win. The leader stops acting
 * (`lost`) the moment a renewal is refused or none succeeded for the renew deadline.
 *
 * Fencing: `fence()` before each write made as leader rejects once leadership is lost,
 * and reads the Lease again to check that this identity still holds it at the
 * resourceVersion of its last renewal (a deposed leader that still believes it leads is
 * stopped by the read, not only by its own clock).
 */
import { type Clock, sleep, type TimerHandle } from '../clock.js';
import { KubeApiError, type JsonObject, type KubeTransport } from './http.js';

export interface KubeLeaseOptions {
  readonly http: Pick<KubeTransport, 'get' | 'post' | 'put'>;
  readonly clock: Clock;
  readonly namespace: string;
  readonly name: string;
  readonly identity: string;
  readonly leaseDurationMs: number;
  readonly signal?: AbortSignal;
  readonly say?: (line: string) => void;
}

export class KubeLeadershipLost extends Error {
  override name = 'KubeLeadershipLost';
}

interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

/** MicroTime as the API server writes it: RFC 3339 with six fractional digits. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

const status = (error: unknown) => (error instanceof KubeApiError ? error.statusCode : 0);

export class KubeLeadership {
  private lastRenewOkMs = 0;
  private resourceVersion = '';
  private lostError: KubeLeadershipLost | null = null;
  private readonly listeners = new Set<(error: KubeLeadershipLost) => void>();
  private timer: TimerHandle | null = null;
  private fenceRead: Promise<JsonObject> | null = null;

  private constructor(private readonly opts: KubeLeaseOptions) {}

  private nowMs(): number {
    return this.opts.clock.nowMs();
  }

  private after(delayMs: number, fn: () => void): TimerHandle {
    return this.opts.clock.setTimer(this.nowMs() + delayMs, fn);
  }

  private get path(): string {
    const { namespace, name } = this.opts;
    return `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${name}`;
  }

  /** client-go's proportions: renew deadline 2/3 and retry period 1/5 of the duration. */
  private get retryMs(): number {
    return Math.max(100, Math.floor(this.opts.leaseDurationMs / 5));
  }

  /**
   * How often a standby reads the Lease: finer than the leader renews, so that it sees the
   * last renewal soon after it is made and takes an expired Lease within the duration plus
   * about two polls (at most 250 ms each), not plus two retry periods.
   */
  private get pollMs(): number {
    return Math.min(this.retryMs, 250);
  }

  private get renewDeadlineMs(): number {
    return Math.floor((this.opts.leaseDurationMs * 2) / 3);
  }

  /** Tries until this identity holds the Lease (or the signal aborts: rejects). */
  static async campaign(opts: KubeLeaseOptions): Promise<KubeLeadership> {
    const leadership = new KubeLeadership(opts);
    const observed = { key: '', sinceMs: opts.clock.nowMs() };
    let waitingSaid = false;
    while (true) {
      if (opts.signal?.aborted === true) throw new KubeLeadershipLost('campaign aborted');
      try {
        const holder = await leadership.tryAcquire(observed);
        if (holder === null) {
          leadership.startRenewing();
          return leadership;
        }
        if (!waitingSaid)
          opts.say?.(`standby: ${holder} holds the Lease; waiting for it to expire`);
        waitingSaid = true;
      } catch (error) {
        opts.say?.(`leader election: ${(error as Error).message}`);
      }
      await sleep(opts.clock, leadership.pollMs);
    }
  }

  /** null when this identity now holds the Lease; else the holder that keeps it. */
  private async tryAcquire(observed: { key: string; sinceMs: number }): Promise<string | null> {
    const { http, identity, namespace, name } = this.opts;
    const nowMs = this.nowMs();
    // Built only to write: a standby reads the Lease four times a second and mostly waits.
    const specNow = (): LeaseSpec => ({
      holderIdentity: identity,
      leaseDurationSeconds: Math.ceil(this.opts.leaseDurationMs / 1000),
      acquireTime: microTime(nowMs),
      renewTime: microTime(nowMs),
      leaseTransitions: 0,
    });
    let current: JsonObject;
    try {
      current = await http.get(this.path);
    } catch (error) {
      if (status(error) !== 404) throw error;
      const lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', spec: specNow() };
      const created = await http
        .post(`/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`, {
          ...lease,
          metadata: { name, namespace },
        })
        .catch((e: unknown) => (status(e) === 409 ? null : Promise.reject(e)));
      if (created === null) return 'another candidate';
      this.renewed(created, nowMs);
      return null;
    }
    const held = (current.spec ?? {}) as LeaseSpec;
    const key = `${held.holderIdentity ?? ''}\n${held.renewTime ?? ''}`;
    if (key !== observed.key) Object.assign(observed, { key, sinceMs: nowMs });
    const holder = held.holderIdentity ?? '';
    const durationMs = (held.leaseDurationSeconds ?? 0) * 1000;
    const free = holder === '' || holder === identity || nowMs - observed.sinceMs > durationMs;
    if (!free) return holder;
    const transitions = (held.leaseTransitions ?? 0) + (holder === identity ? 0 : 1);
    const next = { ...current, spec: { ...specNow(), leaseTransitions: transitions } };
    const taken = await http
      .put(this.path, next)
      .catch((e: unknown) => (status(e) === 409 ? null : Promise.reject(e)));
    if (taken === null) return holder || 'another candidate';
    this.renewed(taken, nowMs);
    this.opts.say?.(`leading: took the Lease ${namespace}/${name} (was ${holder || 'free'})`);
    return null;
  }

  private renewed(lease: JsonObject, atMs: number): void {
    const metadata = (lease.metadata ?? {}) as { resourceVersion?: string };
    this.resourceVersion = metadata.resourceVersion ?? '';
    this.lastRenewOkMs = atMs;
  }

  private startRenewing(): void {
    const tick = async () => {
      if (this.lostError !== null) return;
      await this.renew();
      if (this.lostError === null) this.timer = this.after(this.retryMs, () => void tick());
    };
    this.timer = this.after(this.retryMs, () => void tick());
  }

  private async renew(): Promise<void> {
    const { http, identity } = this.opts;
    const startMs = this.nowMs();
    try {
      const current = await http.get(this.path);
      const spec = (current.spec ?? {}) as LeaseSpec;
      const metadata = (current.metadata ?? {}) as { resourceVersion?: string };
      if (spec.holderIdentity !== identity || metadata.resourceVersion !== this.resourceVersion)
        return this.lose(`the Lease is now held by ${spec.holderIdentity ?? 'nobody'}`);
      const next = { ...current, spec: { ...spec, renewTime: microTime(startMs) } };
      this.renewed(await http.put(this.path, next), startMs);
    } catch (error) {
      if (status(error) === 409 || status(error) === 404)
        return this.lose(`renewal refused: ${(error as Error).message}`);
    }
    const sinceMs = this.nowMs() - this.lastRenewOkMs;
    if (sinceMs > this.renewDeadlineMs)
      this.lose(`no renewal for ${sinceMs} ms (renew deadline ${this.renewDeadlineMs} ms)`);
  }

  /** Rejects unless this identity still holds the Lease as of its last renewal. */
  async fence(): Promise<void> {
    if (this.lostError !== null) throw this.lostError;
    if (this.nowMs() - this.lastRenewOkMs > this.renewDeadlineMs) {
      this.lose('renew deadline passed');
      throw this.lostError ?? new KubeLeadershipLost('lost');
    }
    // Writes fenced at the same moment share one read: one that joins may get a read sent
    // up to one round trip before it asked (the window below is a round trip either way).
    this.fenceRead ??= this.opts.http.get(this.path).finally(() => (this.fenceRead = null));
    const current = await this.fenceRead;
    const spec = (current.spec ?? {}) as LeaseSpec;
    const rv = ((current.metadata ?? {}) as { resourceVersion?: string }).resourceVersion;
    // A renewal may land between: the holder decides, the version is only a hint.
    if (spec.holderIdentity !== this.opts.identity)
      this.lose(`the Lease is held by ${spec.holderIdentity ?? 'nobody'}`);
    else if (rv !== this.resourceVersion && this.lostError === null)
      this.resourceVersion = rv ?? '';
    if (this.lostError !== null) throw this.lostError;
  }

  get isLost(): boolean {
    return this.lostError !== null;
  }

  onLost(listener: (error: KubeLeadershipLost) => void): void {
    if (this.lostError !== null) listener(this.lostError);
    else this.listeners.add(listener);
  }

  lose(why: string): void {
    if (this.lostError !== null) return;
    this.lostError = new KubeLeadershipLost(`leadership lost: ${why}`);
    if (this.timer !== null) this.opts.clock.clearTimer(this.timer);
    for (const listener of this.listeners) listener(this.lostError);
    this.listeners.clear();
  }

  /** Steps down: the Lease is emptied so a standby takes it at once. */
  async resign(): Promise<void> {
    const wasLeading = this.lostError === null;
    this.lose('resigned');
    if (!wasLeading) return;
    try {
      const current = await this.opts.http.get(this.path);
      const spec = (current.spec ?? {}) as LeaseSpec;
      if (spec.holderIdentity !== this.opts.identity) return;
      await this.opts.http.put(this.path, {
        ...current,
        spec: { ...spec, holderIdentity: '', renewTime: microTime(this.nowMs()) },
      });
    } catch {
      // the Lease expires by itself
    }
  }
}
