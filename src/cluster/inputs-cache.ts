/**
 * What a standby controller replica keeps while it waits for the leader key: the four
 * prefixes the leader's inputs read (heartbeats, agents' status, objects, pods), listed
 * once and watched, every key's latest KeyValue held. When the replica wins, each informer
 * is handed over running to the new leader's inputs (controller-inputs.ts): they get the
 * held keys at the informer's revision as if listed, then every change after it, so a new
 * leader does not list the cluster (at 50,000 pods: 2–4 s of etcd's pages, on the
 * takeover's path). A compaction while standing by lists into the cache again.
 */
import { type Clock, sleep } from '../clock.js';
import { PrefixInformer, type PrefixHandlers } from './informer.js';
import type { ClusterKeys } from './keys.js';
import { type KeyValue, type KvStore, prefixRange } from './store.js';

/** Checks that a cache holds what etcd holds before it is handed over, then a list. */
const freshChecksMax = 3;
/** Time for the watch to deliver what a check found newer than the cache. */
const freshWaitMs = 50;

/** One watched prefix: its informer and its keys as the informer last delivered them. */
interface CachedPrefix {
  readonly informer: PrefixInformer;
  readonly kvs: Map<string, KeyValue>;
  /** Its first list and the start of its watch; rejects as PrefixInformer.start would. */
  running: Promise<void> | null;
  /** Its start failed (a watch that could not be created): the leader lists it itself. */
  failed: boolean;
  /** Handed over: the leader's inputs own the informer now. */
  taken: boolean;
}

const beyondBmpOrSurrogates = /[\ud800-\uffff]/;

/**
 * The keys in etcd's order (their UTF-8 bytes), as a list gives them: UTF-16's order (a
 * string compare) is the same unless a key holds characters from U+D800 on, when the
 * bytes are compared.
 */
function sortedByKey(kvs: Iterable<KeyValue>): KeyValue[] {
  const sorted = [...kvs];
  if (!sorted.some((kv) => beyondBmpOrSurrogates.test(kv.key)))
    return sorted.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return sorted.sort((a, b) => Buffer.compare(Buffer.from(a.key), Buffer.from(b.key)));
}

export class InputsCache {
  private readonly prefixes = new Map<string, CachedPrefix>();

  constructor(
    private readonly client: KvStore,
    keys: ClusterKeys,
    private readonly clock: Clock,
    private readonly say: (line: string) => void,
  ) {
    const trouble = (message: string) => say(`etcd (standby): ${message}`);
    for (const prefix of [keys.heartbeats, keys.status, keys.objects, keys.pods]) {
      const kvs = new Map<string, KeyValue>();
      const handlers: PrefixHandlers = {
        reset: (listed) => {
          kvs.clear();
          for (const kv of listed) kvs.set(kv.key, kv);
        },
        put: (kv) => void kvs.set(kv.key, kv),
        delete: (key) => void kvs.delete(key),
        trouble,
      };
      const informer = new PrefixInformer(client, prefix, handlers, clock);
      this.prefixes.set(prefix, { informer, kvs, running: null, failed: false, taken: false });
    }
  }

  /** Lists and watches every prefix, in the background: a campaign need not wait for it. */
  start(): void {
    for (const [prefix, cached] of this.prefixes) {
      if (cached.running !== null) continue;
      cached.running = cached.informer.start();
      cached.running.catch((error: Error) => {
        cached.failed = true;
        if (!cached.taken) this.say(`etcd (standby): ${prefix} not kept: ${error.message}`);
        void cached.informer.stop();
      });
    }
  }

  /**
   * Hands the informer of `prefix` to `handlers` (see PrefixInformer.handOver): it is
   * theirs from now on, to stop; `ready` resolves once their reset has run (and rejects as
   * the informer's start would). Null when this cache cannot give it (not started, failed,
   * stopped, already given) or holds less than etcd does now (`fresh`): the caller lists
   * as without a cache.
   */
  async take(
    prefix: string,
    handlers: PrefixHandlers,
  ): Promise<{ informer: PrefixInformer; ready: Promise<void> } | null> {
    const cached = this.prefixes.get(prefix);
    if (cached?.running === null || cached === undefined || cached.failed || cached.taken)
      return null;
    const fresh = await this.fresh(prefix, cached);
    if (cached.taken || cached.failed) return null; // stopped (or failed) meanwhile
    cached.taken = true;
    const { informer, kvs, running } = cached;
    if (!fresh) {
      this.say(`etcd (standby): the cache of ${prefix} is behind etcd: listing it`);
      kvs.clear();
      await informer.stop();
      return null;
    }
    const handedOver = informer.handOver(handlers, () => {
      const sorted = sortedByKey(kvs.values());
      kvs.clear(); // the leader's inputs hold what they need of it from now on
      return sorted;
    });
    // then its watch started (a failure fails the leader's start, as a list's would)
    return { informer, ready: handedOver.then(() => running) };
  }

  /**
   * Whether the cache holds what etcd holds now, asked up to `freshChecksMax` times, the
   * watch given `freshWaitMs` between: no key under the prefix written after the
   * informer's revision (the newest mod revision, etcd sorting the range by it) and as
   * many keys as held (so none deleted: a delete and a new key would show the key's
   * revision). A list began after the new leader read its log, so it holds every input
   * the old leader logged; a watch may still be delivering one (the old leader resigned
   * just after it): then the cache would give an older state than a list. Before the
   * first list is in, the handlers get that list: fresh.
   */
  private async fresh(prefix: string, cached: CachedPrefix): Promise<boolean> {
    for (let check = 1; check <= freshChecksMax; check++) {
      if (!cached.informer.current) return true;
      const revision = cached.informer.lastRevision;
      const keyCount = cached.kvs.size;
      try {
        const newest = await this.client.range({
          ...prefixRange(prefix),
          byModRevision: true,
          descending: true,
          limit: 1,
          keysOnly: true,
        });
        const newestRevision = newest.kvs[0]?.modRevision ?? 0;
        if (newest.count === keyCount && newestRevision <= revision) return true;
      } catch (error) {
        this.say(`etcd (standby): ${prefix}: ${(error as Error).message}`);
        return false;
      }
      if (check < freshChecksMax) await sleep(this.clock, freshWaitMs);
    }
    return false;
  }

  /** Resolves once every prefix has been listed and its watch started (benches, tests). */
  async listed(): Promise<void> {
    await Promise.all([...this.prefixes.values()].map((cached) => cached.running));
  }

  /** Keys held and revision reached, by prefix (logs and tests). */
  get stats(): { prefix: string; keyCount: number; revision: number }[] {
    return [...this.prefixes].map(([prefix, { kvs, informer }]) => ({
      prefix,
      keyCount: kvs.size,
      revision: informer.lastRevision,
    }));
  }

  /** Stops every informer not handed over (those are their new owner's to stop). */
  async stop(): Promise<void> {
    for (const cached of this.prefixes.values()) {
      if (cached.taken) continue;
      cached.taken = true; // none is handed over once stopping
      cached.kvs.clear();
      await cached.informer.stop();
    }
  }
}
