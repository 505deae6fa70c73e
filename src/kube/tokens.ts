/**
 * serviceAccountToken projections' tokens from the API server's TokenRequest API, bound to
 * the pod, as the kubelet's token manager gets them: one per (service account, audience,
 * expiry, pod), kept until 80 % of its lifetime has passed, then asked for again.
 */
import type { ServiceAccountTokens } from '../plugins/builtin/content.js';
import type { ServiceAccountTokenPart } from '../world/types.js';
import type { KubeHttp } from './http.js';

/** The share of a token's lifetime after which the kubelet asks for a new one. */
const refreshAfterLifetimeShare = 0.8;

export class TokenRequests implements ServiceAccountTokens {
  private readonly cache = new Map<string, { token: string; refreshAtMs: number }>();

  constructor(
    private readonly http: KubeHttp,
    private readonly nowMs: () => number = Date.now,
  ) {}

  async token(namespace: string, part: ServiceAccountTokenPart): Promise<string> {
    const key = [
      namespace,
      part.serviceAccountName,
      part.audience ?? '',
      part.expirationSeconds,
      part.podUid,
    ].join('\u0000');
    const cached = this.cache.get(key);
    if (cached !== undefined && this.nowMs() < cached.refreshAtMs) return cached.token;
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
    const issuedMs = this.nowMs();
    const expiresMs =
      Date.parse(status.expirationTimestamp ?? '') || issuedMs + part.expirationSeconds * 1000;
    const refreshAtMs = issuedMs + (expiresMs - issuedMs) * refreshAfterLifetimeShare;
    this.cache.set(key, { token: status.token, refreshAtMs });
    return status.token;
  }

  /** Forgets a pod's tokens (the pod is gone). */
  forgetPod(podUid: string): void {
    for (const key of this.cache.keys())
      if (key.endsWith(`\u0000${podUid}`)) this.cache.delete(key);
  }
}
