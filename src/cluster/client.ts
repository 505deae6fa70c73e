/**
 * The etcd client of every cluster command: `--etcd URLS` (comma-separated client
 * endpoints) to an Etcd3 client, and etcd's errors to messages that say what to do.
 */
import type { Metadata } from '@grpc/grpc-js';
import { Etcd3 } from 'etcd3';
import type { Clock } from '../clock.js';
import { withoutResolutionNote } from '../csi/grpc-text.js';
import { trackHostHealth } from './etcd-hosts.js';

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

/**
 * gRPC keepalive pings while calls are open: a connection to a member behind a network
 * partition (packets dropped, no reset) is found dead within about 9 s, and its calls fail
 * and its watches start again (on a member not known dead: etcd-hosts.ts). Without them a
 * standby's watch on the leader key stayed silent for good on a member cut off from it,
 * and it never took over (test/cluster/partition.host.test.ts).
 * etcd's server refuses pings more often than --grpc-keepalive-min-time (5 s by default),
 * and any ping while no call is open (its permit-without-stream is off).
 */
const grpcKeepalive = {
  'grpc.keepalive_time_ms': 6_000,
  'grpc.keepalive_timeout_ms': 3_000,
  'grpc.keepalive_permit_without_calls': 0,
};

/**
 * A member healed after a partition is tried again within 5 s (gRPC's backoff between
 * connection attempts otherwise grows to 120 s).
 */
const grpcReconnect = {
  'grpc.initial_reconnect_backoff_ms': 500,
  'grpc.max_reconnect_backoff_ms': 5_000,
};

/**
 * `dialTimeoutMs` bounds each connection attempt to a member (etcd3 ignores its own
 * `dialTimeout`: src/cluster/etcd-hosts.ts does it); a member that failed is tried last
 * for `quarantineMs`.
 */
export function connect(
  urls: string,
  opts: { dialTimeoutMs?: number; quarantineMs?: number } = {},
): Etcd3 {
  const client = new Etcd3({
    hosts: parseEndpoints(urls),
    grpcOptions: { ...grpcKeepalive, ...grpcReconnect },
  });
  requireLeader(client);
  trackHostHealth(client, {
    connectTimeoutMs: opts.dialTimeoutMs ?? 3_000,
    quarantineMs: opts.quarantineMs ?? 20_000,
  });
  return client;
}

/** The part of etcd3's connection pool that gives each call its metadata (not exported). */
interface PoolWithMetadata {
  pool?: { authenticator?: { getMetadata?: () => Promise<Metadata> } };
}

/**
 * Every call and stream asks for a member with a leader (gRPC metadata `hasleader: true`,
 * as Go's clientv3.WithRequireLeader and the kube-apiserver's watches do): a member cut
 * off from the majority answers "no leader" at once instead of waiting for its own timeout,
 * so the call is retried on another member, and etcd ends the watch streams of a member
 * that lost its leader, so they start again. With it, a deposed leader cut off with an
 * etcd minority exits in about 2 s instead of hanging on its last calls, and the agents'
 * heartbeats stop flapping (test/cluster/partition.host.test.ts). etcd3 has no option for
 * call metadata: its pool's metadata source is wrapped, checked to be there.
 */
function requireLeader(client: Etcd3): void {
  const authenticator = (client as unknown as PoolWithMetadata).pool?.authenticator;
  const getMetadata = authenticator?.getMetadata?.bind(authenticator);
  if (authenticator === undefined || getMetadata === undefined)
    throw new Error('etcd3 changed: its connection pool has no authenticator.getMetadata');
  authenticator.getMetadata = async () => {
    const metadata = (await getMetadata()).clone();
    metadata.set('hasleader', 'true');
    return metadata;
  };
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
