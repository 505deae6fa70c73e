/**
 * The annotations the kubelet's config layer puts on every pod it receives
 * (pkg/kubelet/config/config.go): `kubernetes.io/config.source`, the source's name (`api`
 * for the API server's pods), and `kubernetes.io/config.seen`, the time the node first saw
 * the pod (recordFirstSeenTime), kept across later updates of the pod (updateAnnotations
 * keeps its local annotations). They are on the pod the volume plugins read, so a
 * downwardAPI file of `metadata.annotations` lists them, as on a kubelet's node.
 */
import type { Pod } from '../events/k8s.js';

export const configSeenAnnotation = 'kubernetes.io/config.seen';
export const configSourceAnnotation = 'kubernetes.io/config.source';

/**
 * `ms` in the kubelet's Timestamp.GetString layout (logs.RFC3339NanoFixed: nine digits of
 * fraction), in UTC: `2026-12-07T23:13:07.955000000Z`. The clock gives milliseconds, so
 * the last six digits are zeros.
 */
export function kubeletTimestamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000000Z');
}

/**
 * The pod with the config annotations: `seenBefore` (what the log already holds for it)
 * when there is one, else `nowMs`.
 */
export function withConfigAnnotations(
  pod: Pod,
  seenBefore: string | undefined,
  nowMs: number,
): Pod {
  const annotations = {
    ...pod.metadata.annotations,
    [configSeenAnnotation]: seenBefore ?? kubeletTimestamp(nowMs),
    [configSourceAnnotation]: 'api',
  };
  return { ...pod, metadata: { ...pod.metadata, annotations } };
}
