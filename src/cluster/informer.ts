/**
 * List, then watch: the whole prefix at a revision, then every change after it. A watch
 * that ends resumes from the last revision seen; when that revision was compacted away it
 * lists again (a reset). Restarts back off from 100 ms to 5 s. etcd3
 * reconnects a disconnected stream itself, from the last revision it delivered. Backoffs run
 * on the injected clock.
 */
import { type Clock, sleep, type TimerHandle } from '../clock.js';
import { type KeyValue, type KvStore, prefixEnd, type StoreWatch } from './store.js';

/** Keys per page of a list: a page stays well under gRPC's 4 MiB message limit. */
const listPageKeys = 1_000;

/** Keys as numbers (big-endian, zero-padded to this many bytes) for guessing page bounds. */
const boundBytes = 512;

function keyNumber(key: Buffer): bigint {
  const padded = Buffer.alloc(boundBytes);
  key.copy(padded, 0, 0, Math.min(key.length, boundBytes));
  return BigInt(`0x${padded.toString('hex')}`);
}

function numberKey(value: bigint): Buffer {
  return Buffer.from(value.toString(16).padStart(boundBytes * 2, '0'), 'hex');
}

/**
 * The end of the next page's range, guessed from the key span the last page covered:
 * etcd 3.4 walks the whole rest of a range to count it, whatever the limit, so pages over
 * an unbounded range cost O(keys left) each and a list of N keys O(N²) (0.8 s a page at
 * 200,000 keys on the benchmark machine). A bounded range costs what it holds.
 */
function guessEnd(start: Buffer, span: bigint | null, end: Buffer): Buffer {
  if (span === null || start.length > boundBytes) return end;
  const bound = numberKey(keyNumber(start) + span);
  return bound.length > boundBytes ||
    Buffer.compare(bound, end) >= 0 ||
    Buffer.compare(bound, start) <= 0
    ? end
    : bound;
}

/**
 * Everything under `prefix` at one revision, in pages (etcd's limit and a continue key,
 * as the kube-apiserver lists): a large prefix in one range answer would exceed gRPC's
 * message limit. Each page after the first asks a range bounded by a guess of where
 * `pageKeys` keys end (the span of the last page, widened when a page comes back short),
 * so each costs etcd about what it returns. `revision` defaults to the current one.
 */
export async function listPrefix(
  store: KvStore,
  prefix: string,
  opts: { revision?: number; pageKeys?: number } = {},
): Promise<{ kvs: KeyValue[]; revision: number }> {
  const pageKeys = opts.pageKeys ?? listPageKeys;
  const end = prefixEnd(prefix);
  const kvs: KeyValue[] = [];
  let start: Buffer = Buffer.from(prefix);
  let revision = opts.revision ?? 0;
  let span: bigint | null = null;
  while (true) {
    const bound = guessEnd(start, span, end);
    const page = await store.range({ start, end: bound, limit: pageKeys, revision });
    if (revision === 0) revision = page.revision;
    for (const kv of page.kvs) kvs.push(kv);
    if (page.more && page.kvs.length > 0) {
      const last = Buffer.from(page.kvs[page.kvs.length - 1]!.key);
      span = keyNumber(last) - keyNumber(start) + 1n; // what held pageKeys keys
      start = Buffer.concat([last, Buffer.from([0])]);
    } else {
      if (bound === end) return { kvs, revision };
      const grow = BigInt(Math.min(8, Math.ceil(pageKeys / Math.max(1, page.kvs.length))));
      span = (span ?? 1n) * grow;
      start = bound;
    }
  }
}

export interface PrefixHandlers {
  /** Everything under the prefix at `revision` (the first list, and after a compaction). */
  /** May take turns of the event loop (a large list): the watch starts once it resolves. */
  reset(kvs: readonly KeyValue[], revision: number): void | Promise<void>;
  put(kv: KeyValue): void;
  delete(key: string): void;
  /** A list or watch failed; it is retried (for progress lines and logs). */
  trouble?(message: string): void;
}

const backoffMsMin = 100;
const backoffMsMax = 5_000;

export class PrefixInformer {
  private watcher: StoreWatch | null = null;
  private revision = 0;
  private stopped = false;
  private backoffMs = backoffMsMin;
  private timer: TimerHandle | null = null;
  private listed = false;

  constructor(
    private readonly store: KvStore,
    readonly prefix: string,
    private readonly handlers: PrefixHandlers,
    private readonly clock: Clock,
  ) {}

  /** Lists and starts watching; resolves after the first successful list. */
  async start(): Promise<void> {
    while (!this.stopped && !this.listed) {
      try {
        await this.list();
      } catch (error) {
        this.handlers.trouble?.(`list ${this.prefix}: ${(error as Error).message}`);
        await sleep(this.clock, this.nextBackoff());
      }
    }
    if (!this.stopped) await this.watchFrom(this.revision + 1);
  }

  get lastRevision(): number {
    return this.revision;
  }

  private nextBackoff(): number {
    const ms = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, backoffMsMax);
    return ms;
  }

  private async list(): Promise<void> {
    const { kvs, revision } = await listPrefix(this.store, this.prefix);
    this.revision = revision;
    this.listed = true;
    await this.handlers.reset(kvs, this.revision);
  }

  private async watchFrom(revision: number): Promise<void> {
    let ended = false;
    const watcher = await this.store.watch({ prefix: this.prefix }, revision, {
      connected: () => {
        this.backoffMs = backoffMsMin;
      },
      put: (kv) => {
        if (ended) return;
        this.revision = Math.max(this.revision, kv.modRevision);
        this.handlers.put(kv);
      },
      delete: (key, modRevision) => {
        if (ended) return;
        this.revision = Math.max(this.revision, modRevision);
        this.handlers.delete(key);
      },
      error: (error) => {
        if (ended) return;
        ended = true;
        this.restart(String(error.message ?? error));
      },
    });
    if (this.stopped) return void (await watcher.cancel().catch(() => undefined));
    this.watcher = watcher;
  }

  /**
   * The watch ended: resume after the last revision, or list again if that revision was
   * compacted (etcd cancels such a watch; etcd3 passes no reason, so the range at the last
   * revision is asked).
   */
  private restart(why: string): void {
    if (this.stopped) return;
    const old = this.watcher;
    this.watcher = null;
    void old?.cancel().catch(() => undefined);
    this.timer = this.clock.setTimer(this.clock.nowMs() + this.nextBackoff(), () => {
      this.timer = null;
      void this.resume(why).catch((error: Error) => this.restart(error.message));
    });
  }

  private async resume(why: string): Promise<void> {
    let compacted = /compact/i.test(why);
    if (!compacted && this.listed) {
      try {
        const end = prefixEnd(this.prefix);
        await this.store.range({
          start: this.prefix,
          end,
          revision: this.revision,
          limit: 1,
          keysOnly: true,
        });
      } catch (error) {
        compacted = /compact/i.test((error as Error).message);
        if (!compacted) throw error;
      }
    }
    this.handlers.trouble?.(
      `watch ${this.prefix}: ${why}${compacted ? ' (compacted: listing again)' : ''}`,
    );
    if (compacted) this.listed = false;
    await this.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) this.clock.clearTimer(this.timer);
    const watcher = this.watcher;
    this.watcher = null;
    await watcher?.cancel().catch(() => undefined);
  }
}

/** Keys a list's handler applies between two turns of the event loop. */
const resetKeysPerTurn = 1_000;

/**
 * Applies `each` to every listed key, giving the event loop a turn every
 * `resetKeysPerTurn`: a new leader's list of 455,000 keys folded in one go held the event
 * loop (and the lease's keepalives) for seconds.
 */
export async function eachInTurns<T>(items: readonly T[], each: (item: T) => void): Promise<void> {
  for (let i = 0; i < items.length; i++) {
    if (i > 0 && i % resetKeysPerTurn === 0)
      await new Promise<void>((resolve) => setImmediate(resolve));
    each(items[i]!);
  }
}
