/**
 * The etcd client of every cluster command: `--etcd URLS` (comma-separated client
 * endpoints) to an Etcd3 client, and etcd's errors to messages that say what to do.
 */
import { Etcd3 } from 'etcd3';
import type { Clock } from '../clock.js';
import { withoutResolutionNote } from '../csi/grpc-text.js';

export class ClusterError extends Error {
  override name = 'ClusterError';
}

/** `http://127.0.0.1:2379,http://…` → the list, each checked. */
function parseEndpoints(urls: string): string[] {
  const list = urls
    .split(',')
    .map((u) => u.trim())
    .filter((u) => u !== '');
  if (list.length === 0)
    throw new ClusterError('--etcd needs at least one client URL, e.g. http://127.0.0.1:2379');
  for (const url of list) {
    if (!/^https?:\/\/[^/\s]+\/?$/.test(url))
      throw new ClusterError(
        `--etcd: "${url}" is not a client URL; give http://HOST:PORT (comma-separated for several)`,
      );
  }
  return list;
}

export function connect(urls: string, opts: { dialTimeoutMs?: number } = {}): Etcd3 {
  return new Etcd3({ hosts: parseEndpoints(urls), dialTimeout: opts.dialTimeoutMs ?? 5_000 });
}

/** etcd's NOSPACE alarm: the backend quota is full. */
export function isNoSpace(error: unknown): boolean {
  return /database space exceeded|NOSPACE/i.test(String((error as Error)?.message ?? error));
}

export function describeEtcdError(error: unknown, urls: string): string {
  const message = withoutResolutionNote(String((error as Error)?.message ?? error));
  if (isNoSpace(error))
    return (
      `etcd at ${urls} is out of space (NOSPACE alarm: --quota-backend-bytes reached); ` +
      'compact and defragment it (etcdctl compact, etcdctl defrag), then etcdctl alarm disarm'
    );
  if (/unavailable|ECONNREFUSED|deadline|No connection|failed to connect/i.test(message))
    return `cannot reach etcd at ${urls}: ${message}; check the URLs and that a majority of members is up`;
  return `etcd at ${urls}: ${message}`;
}

/** Bounds a call: etcd3 retries unreachable hosts for long; a command should say so sooner. */
export async function withDeadline<T>(
  promise: Promise<T>,
  ms: number,
  what: string,
  clock: Clock,
): Promise<T> {
  let timer: ReturnType<Clock['setTimer']> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    const error = new ClusterError(`${what}: no answer from etcd within ${ms} ms`);
    timer = clock.setTimer(clock.nowMs() + ms, () => reject(error));
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    if (timer !== undefined) clock.clearTimer(timer);
  }
}
