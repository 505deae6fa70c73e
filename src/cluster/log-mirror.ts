/**
 * The controller log in etcd, followed live for a reader (`vole inspect --etcd`): loaded as
 * a new leader loads it (the latest snapshot and the entries after it, through the etcd log
 * reader), then kept current by a watch on its segments — each watch event only says "the
 * log grew"; the new entries are read from the mirror's head with the same reader, in
 * order, so no entry is skipped or taken twice whatever the watch delivers (and once a
 * second without one, in case the watch missed a beat). Readers get
 * the synchronous interface of a read-only SQLite log (head, read, get, bounds,
 * latestSnapshot); it never writes to etcd.
 */
import type { Clock, TimerHandle } from '../clock.js';
import type { VoleEvent } from '../events/index.js';
import { Seq } from '../ids.js';
import { loadLogHead, LogCompactedPast, readLogEvents } from './etcd-log.js';
import type { ClusterKeys } from './keys.js';
import type { KvStore, StoreWatch } from './store.js';

export interface MirrorOptions {
  /** Problems worth telling the reader (a failed read, a lost watch). */
  readonly warn?: (message: string) => void;
  /** How often the tail is read even without a watch event (default 1 s). */
  readonly pollMs?: number;
}

const mirrorPollMsDefault = 1_000;

export class EtcdLogMirror {
  /** The events from `firstSeq` on, by seq − firstSeq. */
  private events: VoleEvent[] = [];
  private firstSeq = 1;
  private snapshot: { seq: number; tsMs: number; format: number; data: Buffer } | undefined;
  private watcher: StoreWatch | null = null;
  private poll: TimerHandle | null = null;
  private reading: Promise<void> = Promise.resolve();
  private again = false;
  private closed = false;
  /** The log's writer is the controller: its core folds it, even when compacted. */
  readonly mode = 'controller';

  private constructor(
    private readonly store: KvStore,
    private readonly keys: ClusterKeys,
    private readonly clock: Clock,
    private readonly opts: MirrorOptions,
  ) {}

  /**
   * Loads the log (an unreachable etcd fails here, at once), then follows it: the catch-up
   * once the watch is established reads what was committed between the load and the watch.
   */
  static async open(
    store: KvStore,
    keys: ClusterKeys,
    clock: Clock,
    opts: MirrorOptions = {},
  ): Promise<EtcdLogMirror> {
    const mirror = new EtcdLogMirror(store, keys, clock, opts);
    await mirror.load();
    mirror.watcher = await store.watch({ prefix: keys.log.segments }, undefined, {
      put: () => mirror.catchUp(),
      delete: () => undefined,
      error: (error: Error) => mirror.warn(`watching the controller log: ${error.message}`),
    });
    mirror.catchUp(); // what was committed between the load and the watch
    mirror.schedulePoll();
    return mirror;
  }

  /** A safety net for a watch that misses a beat (reconnecting): a read of the tail now and then. */
  private schedulePoll(): void {
    if (this.closed) return;
    const atMs = this.clock.nowMs() + (this.opts.pollMs ?? mirrorPollMsDefault);
    this.poll = this.clock.setTimer(atMs, () => {
      this.catchUp();
      this.schedulePoll();
    });
  }

  private warn(message: string): void {
    this.opts.warn?.(message);
  }

  /** Loads the latest snapshot (once compacted) and the events after it, all at one revision. */
  private async load(): Promise<void> {
    const loaded = await loadLogHead(this.store, this.keys);
    let firstSeq = 1;
    let snapshot: typeof this.snapshot;
    if (loaded.snapshot !== undefined && loaded.firstSeq > 1) {
      const { meta, data } = loaded.snapshot;
      snapshot = { seq: meta.seq, tsMs: meta.tsMs, format: meta.format, data };
      firstSeq = meta.seq + 1;
    }
    const events: VoleEvent[] = [];
    const push = (event: VoleEvent) => events.push(event);
    await readLogEvents(this.store, this.keys, firstSeq, push, { revision: loaded.revision });
    this.events = events;
    this.firstSeq = firstSeq;
    this.snapshot = snapshot;
  }

  private push(event: VoleEvent): void {
    if (event.seq !== this.headSeq + 1) return; // read already (a catch-up overlapping a watch event)
    this.events.push(event);
  }

  private get headSeq(): number {
    return this.firstSeq - 1 + this.events.length;
  }

  /** Reads what was appended after the head; one read at a time, again if asked meanwhile. */
  private catchUp(): void {
    if (this.closed) return;
    this.again = true;
    this.reading = this.reading.then(async () => {
      if (!this.again || this.closed) return;
      this.again = false;
      try {
        await readLogEvents(this.store, this.keys, this.headSeq + 1, (event) => this.push(event));
      } catch (error) {
        if (error instanceof LogCompactedPast) {
          // Compacted while this reader was behind: start again from the latest snapshot.
          this.warn(`${error.message}; loading the latest snapshot again`);
          return this.load().catch((again: Error) =>
            this.warn(`reloading the log: ${again.message}`),
          );
        }
        this.warn(
          `reading the controller log after seq ${this.headSeq}: ${(error as Error).message}`,
        );
      }
    });
  }

  /** Resolves once every read asked for so far has finished (for tests). */
  settled(): Promise<void> {
    return this.reading;
  }

  head(): { seq: Seq } {
    return { seq: Seq(this.headSeq) };
  }

  *read(
    opts: { fromSeq?: number; toSeq?: number; limit?: number } = {},
  ): IterableIterator<VoleEvent> {
    const from = Math.max(opts.fromSeq ?? 1, this.firstSeq);
    const to = Math.min(opts.toSeq ?? this.headSeq, this.headSeq);
    let left = opts.limit ?? Infinity;
    for (let seq = from; seq <= to && left > 0; seq++, left--)
      yield this.events[seq - this.firstSeq]!;
  }

  get(seq: number): VoleEvent | undefined {
    return seq < this.firstSeq ? undefined : this.events[seq - this.firstSeq];
  }

  bounds(): { firstSeq: Seq; lastSeq: Seq; firstTsMs: number; lastTsMs: number } {
    const first = this.events[0];
    const last = this.events.at(-1);
    if (first === undefined || last === undefined)
      return { firstSeq: Seq(0), lastSeq: Seq(0), firstTsMs: 0, lastTsMs: 0 };
    return {
      firstSeq: Seq(first.seq),
      lastSeq: Seq(last.seq),
      firstTsMs: first.tsMs,
      lastTsMs: last.tsMs,
    };
  }

  /** The snapshot the log was loaded from (a compacted log), when at or before `atOrBeforeSeq`. */
  latestSnapshot(
    opts: { atOrBeforeSeq?: number } = {},
  ): { seq: Seq; tsMs: number; format: number; data: Buffer } | undefined {
    const snapshot = this.snapshot;
    if (snapshot === undefined || snapshot.seq > (opts.atOrBeforeSeq ?? Infinity)) return undefined;
    return { ...snapshot, seq: Seq(snapshot.seq) };
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.poll !== null) this.clock.clearTimer(this.poll);
    await this.watcher?.cancel().catch(() => undefined);
    await this.reading.catch(() => undefined);
  }
}
