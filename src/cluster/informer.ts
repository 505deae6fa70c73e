/**
 * List, then watch: the whole prefix at a revision, then every change after it. A watch
 * that ends resumes from the last revision seen; when that revision was compacted away it
 * lists again (a reset). Restarts back off from 100 ms to 5 s. etcd3
 * reconnects a disconnected stream itself, from the last revision it delivered. Backoffs run
 * on the injected clock. A running informer can be handed over to other handlers (a
 * standby's cache to the new leader's inputs: inputs-cache.ts), who get what the first
 * ones hold as a list, then every change after it.
 */
import { assert } from '../assert.js';
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

/** A change the watch delivered. */
type Change = { readonly put: KeyValue } | { readonly delete: string };

export class PrefixInformer {
  private watcher: StoreWatch | null = null;
  private revision = 0;
  private stopped = false;
  private backoffMs = backoffMsMin;
  private timer: TimerHandle | null = null;
  private listed = false;
  private handlers: PrefixHandlers;
  /** A list's reset is running (on the handlers it was given). */
  private resetting = false;
  /** Told when a list's reset has returned, or the informer stopped. */
  private waiters: (() => void)[] = [];
  /** Changes that came while a handover's reset ran, delivered after it in order. */
  private held: Change[] | null = null;
  /** A handover under way: a watch that restarts lists again only after it. */
  private handing: Promise<void> | null = null;

  constructor(
    private readonly store: KvStore,
    readonly prefix: string,
    handlers: PrefixHandlers,
    private readonly clock: Clock,
  ) {
    this.handlers = handlers;
  }

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

  /** A list has been applied and no other list is under way: the handlers hold the state at `lastRevision`. */
  get current(): boolean {
    return this.listed && !this.resetting;
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
    this.resetting = true;
    try {
      await this.handlers.reset(kvs, this.revision);
    } finally {
      this.resetting = false;
      this.wake();
    }
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter();
  }

  /**
   * Hands this running informer to `next`: `next.reset` gets `cached()` — every key as the
   * handlers so far hold it at the informer's revision (called at the moment of the
   * switch) — and then every change after that revision, in order. Changes that arrive
   * while the reset runs (it may take turns) are held and delivered after it: none lost,
   * none twice. Before a list has been applied, `next` just gets that list's reset.
   */
  async handOver(next: PrefixHandlers, cached: () => readonly KeyValue[]): Promise<void> {
    assert(this.handing === null, `informer ${this.prefix}: handed over twice at once`);
    while (!this.stopped && this.resetting) await new Promise<void>((r) => this.waiters.push(r));
    this.handlers = next;
    if (this.stopped) return;
    if (!this.listed) return void (await new Promise<void>((r) => this.waiters.push(r)));
    const held: Change[] = [];
    this.held = held;
    const handing = (async () => {
      try {
        await next.reset(cached(), this.revision);
      } finally {
        // Delivered in one go: nothing arrives between two of them.
        this.held = null;
        for (const change of held) this.deliver(change);
      }
    })();
    this.handing = handing.catch(() => undefined);
    try {
      await handing;
    } finally {
      this.handing = null;
    }
  }

  private deliver(change: Change): void {
    if (this.held !== null) return void this.held.push(change);
    if ('put' in change) this.handlers.put(change.put);
    else this.handlers.delete(change.delete);
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
        this.deliver({ put: kv });
      },
      delete: (key, modRevision) => {
        if (ended) return;
        this.revision = Math.max(this.revision, modRevision);
        this.deliver({ delete: key });
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
    await this.handing; // a list's reset goes to the handlers once the handover is done
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
    this.wake();
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
