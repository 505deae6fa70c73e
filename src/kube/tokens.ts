/**
 * serviceAccountToken projections' tokens from the API server's TokenRequest API, bound to
 * the pod, as the kubelet's token manager gets them: one per (service account, audience,
 * expiry, pod), kept until it is older than 80 % of its lifetime or than 24 h, then asked
 * for again. A timer per pod says when: `onRefreshDue` records it in the log (the
 * TokensRefreshDue event), and the planner sets the pod's token projections up again.
 */
import { assert } from '../assert.js';
import type { Clock, TimerHandle } from '../clock.js';
import type { ServiceAccountTokens } from '../plugins/builtin/content.js';
import type { ServiceAccountTokenPart } from '../operations/volume-spec.js';
import type { KubeTransport } from './http.js';

/** The share of a token's lifetime after which the kubelet asks for a new one. */
const refreshAfterLifetimeShare = 0.8;
/** The kubelet's maxTTL: a token older than this is asked for again whatever its lifetime. */
export const tokenAgeMsMaxDefault = 24 * 60 * 60 * 1000;

/**
 * When a token issued at `issuedMs` and expiring at `expiresMs` is due for refresh: the
 * kubelet's requiresRefresh, older than 80 % of its lifetime or than `tokenAgeMsMax`.
 */
export function tokenRefreshAtMs(token: {
  issuedMs: number;
  expiresMs: number;
  tokenAgeMsMax: number;
}): number {
  const { issuedMs, expiresMs, tokenAgeMsMax } = token;
  assert(expiresMs > issuedMs, `a token expiring at ${expiresMs} was issued at ${issuedMs}`);
  assert(tokenAgeMsMax > 0, `tokenAgeMsMax must be positive, not ${tokenAgeMsMax}`);
  const lifetimeMs = expiresMs - issuedMs;
  return issuedMs + Math.min(lifetimeMs * refreshAfterLifetimeShare, tokenAgeMsMax);
}

export interface TokenRequestsOptions {
  readonly clock: Clock;
  /** A token of this pod is due for refresh (its timer fired): record it, remount. */
  readonly onRefreshDue?: (podUid: string) => void;
  /** Default 24 h (the kubelet's maxTTL); shorter in tests that watch a refresh. */
  readonly tokenAgeMsMax?: number;
}

export class TokenRequests implements ServiceAccountTokens {
  private readonly cache = new Map<string, { token: string; refreshAtMs: number }>();
  /** Per pod: the earliest refresh time of its tokens, and its timer. */
  private readonly timers = new Map<string, { atMs: number; handle: TimerHandle }>();
  private readonly clock: Clock;
  private readonly tokenAgeMsMax: number;

  constructor(
    private readonly http: Pick<KubeTransport, 'post'>,
    private readonly opts: TokenRequestsOptions,
  ) {
    this.clock = opts.clock;
    this.tokenAgeMsMax = opts.tokenAgeMsMax ?? tokenAgeMsMaxDefault;
  }

  async token(namespace: string, part: ServiceAccountTokenPart): Promise<string> {
    const key = [
      namespace,
      part.serviceAccountName,
      part.audience ?? '',
      part.expirationSeconds,
      part.podUid,
    ].join('\u0000');
    const cached = this.cache.get(key);
    if (cached !== undefined && this.clock.nowMs() < cached.refreshAtMs) {
      this.scheduleRefresh(part.podUid, cached.refreshAtMs);
      return cached.token;
    }
    const path =
      `/api/v1/namespaces/${encodeURIComponent(namespace)}` +
      `/serviceaccounts/${encodeURIComponent(part.serviceAccountName)}/token`;
    const answer = await this.http.post(path, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: {
        audiences: part.audience === undefined ? [] : [part.audience],
        expirationSeconds: part.expirationSeconds,
        boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: part.podName, uid: part.podUid },
      },
    });
    const status = (answer.status ?? {}) as { token?: string; expirationTimestamp?: string };
    if (typeof status.token !== 'string' || status.token === '')
      throw new Error('the TokenRequest answer holds no token');
    const issuedMs = this.clock.nowMs();
    const expiresMs =
      Date.parse(status.expirationTimestamp ?? '') || issuedMs + part.expirationSeconds * 1000;
    const refreshAtMs = tokenRefreshAtMs({
      issuedMs,
      expiresMs: Math.max(expiresMs, issuedMs + 1),
      tokenAgeMsMax: this.tokenAgeMsMax,
    });
    this.cache.set(key, { token: status.token, refreshAtMs });
    this.scheduleRefresh(part.podUid, refreshAtMs);
    return status.token;
  }

  /** One timer per pod, at its earliest due token: the pod's projections are all redone. */
  private scheduleRefresh(podUid: string, atMs: number): void {
    const onRefreshDue = this.opts.onRefreshDue;
    if (onRefreshDue === undefined) return;
    const existing = this.timers.get(podUid);
    if (existing !== undefined && existing.atMs > this.clock.nowMs() && existing.atMs <= atMs)
      return;
    if (existing !== undefined) this.clock.clearTimer(existing.handle);
    const handle = this.clock.setTimer(atMs, () => {
      this.timers.delete(podUid);
      onRefreshDue(podUid);
    });
    this.timers.set(podUid, { atMs, handle });
  }

  /** Forgets a pod's tokens and its refresh timer (the pod is gone). */
  forgetPod(podUid: string): void {
    for (const key of this.cache.keys())
      if (key.endsWith(`\u0000${podUid}`)) this.cache.delete(key);
    const timer = this.timers.get(podUid);
    if (timer !== undefined) this.clock.clearTimer(timer.handle);
    this.timers.delete(podUid);
  }

  /** Clears every timer (the agent stops). */
  stop(): void {
    for (const timer of this.timers.values()) this.clock.clearTimer(timer.handle);
    this.timers.clear();
  }
}
