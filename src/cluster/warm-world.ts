/**
 * The controller's world as a replica loads it (snapshot + tail), and a warm standby: a
 * replica that does not lead keeps that world current while it campaigns, so that winning
 * costs the last few segments instead of the whole snapshot.
 *
 * While standing by it loads the world once (the snapshot decoded in slices, the tail
 * folded in turns), then follows the log: a watch on the segment keys from the load's
 * revision + 1, each event folded in order, a turn of the event loop every few segments
 * (the campaign's watch and, once it wins, the lease's keepalives run on the same loop).
 * Anything it cannot fold in order — a gap, a segment that does not decode, a watch that
 * ends (the revision compacted away, the stream lost for good), a fold that throws, a
 * queue that outgrows its limit — makes the world stale: it is dropped, never patched, and
 * loaded again after a backoff.
 *
 * On winning (`takeOver`) it stops following and reads the rest of the log at a revision
 * taken after the win. That read is complete: the old leader's every write was a
 * transaction fenced on its term (the leader key's create revision), and our win created
 * the leader key anew, so each of its commits that succeeded did so at a revision before
 * our win; the head at any later revision is its last. A stale world, one not loaded yet,
 * or a tail that was compacted away meanwhile gives undefined: the caller loads cold.
 */
import { type Clock, type TimerHandle } from '../clock.js';
import type { ControllerWorld } from '../controller/types.js';
import { controllerCore } from '../engine/cores.js';
import { ClusterError } from './client.js';
import {
  loadLogHead,
  readLogEvents,
  SegmentDecoder,
  snapshotChunkBytes,
  snapshotChunkKey,
  type SnapshotMeta,
} from './etcd-log.js';
import type { ClusterKeys } from './keys.js';
import type { KeyValue, KvStore } from './store.js';

/** The world at the log's head, as a new leader starts from it. */
export interface LoadedWorld {
  readonly world: ControllerWorld;
  /** The log's head (the world's seq). */
  readonly head: number;
  /** The latest snapshot's seq and size (what the leader's snapshot pacer starts from). */
  readonly lastSnapshotSeq: number;
  readonly lastSnapshotBytes: number;
  /** The store revision the world was read at. */
  readonly revision: number;
}

/** The world at the log's head: the snapshot (when usable) plus the events after it. */
export async function loadControllerWorld(
  client: KvStore,
  keys: ClusterKeys,
): Promise<LoadedWorld> {
  const loaded = await loadLogHead(client, keys);
  const fromSnapshot =
    loaded.snapshot === undefined
      ? undefined
      : // in slices: a new leader keeps its lease alive while it reads a large world
        await controllerCore.snapshot.decodeSliced(
          loaded.snapshot.data,
          loaded.snapshot.meta.format,
        );
  const world = fromSnapshot ?? controllerCore.initialWorld();
  if (world.seq + 1 < loaded.firstSeq)
    throw new ClusterError(
      `the controller log in etcd starts at seq ${loaded.firstSeq} and its snapshot cannot be read by this version; ` +
        'run the version that wrote it, or start a new log under another --prefix',
    );
  const fold = (event: Parameters<typeof controllerCore.fold>[1]) =>
    controllerCore.fold(world, event);
  await readLogEvents(client, keys, world.seq + 1, fold, { revision: loaded.revision });
  if (world.seq !== loaded.head)
    throw new ClusterError(
      `the controller log in etcd ends at seq ${world.seq} but its head says ${loaded.head}`,
    );
  return {
    world,
    head: loaded.head,
    lastSnapshotSeq: loaded.snapshot?.meta.seq ?? 0,
    lastSnapshotBytes: loaded.snapshot?.data.length ?? 0,
    revision: loaded.revision,
  };
}

/** Segments folded between two turns of the event loop while following. */
const followSegmentsPerTurn = 8;
/**
 * Bytes of segments received and not yet folded: past this the standby has fallen behind
 * the leader for good (a leader commits at most 1 MiB a transaction); it loads again.
 */
const followQueueBytesMax = 64 * 1024 * 1024;
const reloadBackoffMsInitial = 200;
const reloadBackoffMsMax = 10_000;

export interface WarmWorldOptions {
  readonly store: KvStore;
  readonly keys: ClusterKeys;
  readonly clock: Clock;
  readonly say?: (line: string) => void;
}

/** A standby's world, kept at the log's head while it waits to lead. */
export class WarmWorld {
  private loaded: LoadedWorld | null = null;
  /** Why the loaded world may not be used (null: it is current up to what was folded). */
  private staleWhy: string | null = null;
  private stopped = false;
  private loop: Promise<void> | null = null;
  private queue: KeyValue[] = [];
  private queuedBytes = 0;
  private draining: Promise<void> | null = null;
  private decoder: SegmentDecoder;
  /** Ends the current follow (stale or stopped). */
  private endFollow: (() => void) | null = null;
  private pauseTimer: { handle: TimerHandle; wake: () => void } | null = null;
  /** Which follow a watch handler belongs to: a cancelled watch's late events are ignored. */
  private generation = 0;
  /** Loads, and events folded while following (tests, the bench). */
  readonly stats = { loads: 0, stale: 0, followed: 0, tail: 0 };

  constructor(private readonly opts: WarmWorldOptions) {
    this.decoder = new SegmentDecoder(opts.keys);
  }

  private say(line: string): void {
    this.opts.say?.(line);
  }

  /** Starts loading and following, until `takeOver` or `stop`. */
  start(): void {
    if (this.loop !== null) return;
    this.loop = this.keepWarm();
  }

  /** Stops following and drops the world (the campaign ended without a win). */
  async stop(): Promise<void> {
    await this.halt();
    this.loaded = null;
  }

  /**
   * Stops following and brings the world to the head at a revision after the win: the
   * world to lead from, or undefined when it is stale, not loaded, or its tail is gone
   * (the caller then loads cold). Waits for a load under way: it is the cold load's work.
   */
  async takeOver(): Promise<LoadedWorld | undefined> {
    await this.halt();
    const loaded = this.loaded;
    this.loaded = null;
    if (loaded === null || this.staleWhy !== null) {
      const why = loaded === null ? 'no warm world yet' : `warm world stale: ${this.staleWhy}`;
      this.say(`standby: ${why}; loading cold`);
      return undefined;
    }
    try {
      const startedMs = this.opts.clock.nowMs();
      const current = await this.readTail(loaded);
      const tookMs = Math.round(this.opts.clock.nowMs() - startedMs);
      this.say(
        `standby: took over warm at seq ${current.head} (${this.stats.tail} events read after the win in ${tookMs} ms)`,
      );
      return current;
    } catch (error) {
      this.say(
        `standby: the warm world's tail cannot be read (${(error as Error).message}); loading cold`,
      );
      return undefined;
    }
  }

  private async halt(): Promise<void> {
    this.stopped = true;
    this.pauseTimer?.wake();
    this.endFollow?.();
    await this.loop;
  }

  /** Loads and follows; after the world goes stale, drops it and loads again (backoff). */
  private async keepWarm(): Promise<void> {
    let backoffMs = reloadBackoffMsInitial;
    while (!this.stopped) {
      const startedMs = this.opts.clock.nowMs();
      try {
        await this.warmOnce();
      } catch (error) {
        this.markStale((error as Error).message);
      }
      if (this.stopped) return; // taken over: the world stays for takeOver to judge
      this.stats.stale++;
      const what = this.loaded === null ? 'world not loaded' : 'warm world dropped';
      this.say(`standby: ${what} (${this.staleWhy}); loading again in ${backoffMs} ms`);
      this.loaded = null;
      this.staleWhy = null;
      // A world that stayed warm for a while resets the backoff.
      const keptMs = this.opts.clock.nowMs() - startedMs;
      await this.pause(backoffMs);
      backoffMs =
        keptMs > 2 * reloadBackoffMsMax
          ? reloadBackoffMsInitial
          : Math.min(2 * backoffMs, reloadBackoffMsMax);
    }
  }

  /** One load, then following until the world is stale or this standby stops. */
  private async warmOnce(): Promise<void> {
    const { clock } = this.opts;
    const startedMs = clock.nowMs();
    const loaded = await loadControllerWorld(this.opts.store, this.opts.keys);
    this.loaded = loaded;
    this.stats.loads++;
    const tookMs = Math.round(clock.nowMs() - startedMs);
    this.say(`standby: warm at seq ${loaded.head} (snapshot read in ${tookMs} ms)`);
    if (this.stopped) return;
    await this.follow(loaded.revision);
  }

  /** Folds the log's segments from `revision` + 1 as they come; resolves once it ends. */
  private async follow(revision: number): Promise<void> {
    const ended = new Promise<void>((resolve) => (this.endFollow = resolve));
    this.queue = [];
    this.queuedBytes = 0;
    this.decoder = new SegmentDecoder(this.opts.keys);
    const generation = ++this.generation;
    const watch = await this.opts.store.watch(
      { prefix: this.opts.keys.log.segments },
      revision + 1,
      {
        put: (kv) => {
          if (generation === this.generation) this.enqueue(kv);
        },
        delete: () => undefined, // a leader's compaction: segments already folded
        error: (error) => {
          if (generation === this.generation)
            this.markStale(`the watch on the log ended: ${error.message}`);
        },
      },
    );
    if (!this.stopped && this.staleWhy === null) await ended;
    this.endFollow = null;
    this.generation++;
    await watch.cancel().catch(() => undefined);
    await this.draining;
    this.queue = [];
    this.queuedBytes = 0;
  }

  private markStale(why: string): void {
    if (this.staleWhy === null) this.staleWhy = why;
    this.endFollow?.();
  }

  /** A watch handler: must not throw (etcd3 rethrows outside any promise). */
  private enqueue(kv: KeyValue): void {
    if (this.stopped || this.staleWhy !== null) return;
    this.queue.push(kv);
    this.queuedBytes += kv.value.length;
    if (this.queuedBytes > followQueueBytesMax)
      return this.markStale(`${this.queuedBytes} bytes of the log wait to be folded`);
    this.draining ??= this.drain().finally(() => (this.draining = null));
  }

  /** Folds what the watch delivered, in order, a turn every few segments. */
  private async drain(): Promise<void> {
    let segments = 0;
    while (this.queue.length > 0 && !this.stopped && this.staleWhy === null) {
      const kv = this.queue.shift()!;
      this.queuedBytes -= kv.value.length;
      try {
        this.foldSegment(kv);
      } catch (error) {
        return this.markStale((error as Error).message);
      }
      if (++segments % followSegmentsPerTurn === 0)
        await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  private foldSegment(kv: KeyValue): void {
    const world = this.loaded?.world;
    if (world === undefined) throw new Error('a segment arrived with no world loaded');
    for (const event of this.decoder.take(kv.key, kv.value.toString())) {
      if (event.seq !== world.seq + 1)
        throw new Error(
          `the log's segment ${kv.key} holds seq ${event.seq} after the world's ${world.seq}`,
        );
      controllerCore.fold(world, event);
      this.stats.followed++;
    }
  }

  /** The events after the world's seq, read at one revision after the win, and the head there. */
  private async readTail(loaded: LoadedWorld): Promise<LoadedWorld> {
    const { store, keys } = this.opts;
    const { world } = loaded;
    const at = await store.range({ start: keys.log.head, end: `${keys.log.head}\0` });
    const { revision } = at;
    const head = Number(at.kvs[0]?.value.toString() ?? '0');
    this.stats.tail = await readLogEvents(
      store,
      keys,
      world.seq + 1,
      (event) => controllerCore.fold(world, event),
      { revision },
    );
    if (world.seq !== head)
      throw new ClusterError(`the log ends at seq ${world.seq} but its head says ${head}`);
    const last = await latestSnapshot(store, keys, revision, loaded.lastSnapshotSeq);
    return {
      world,
      head,
      lastSnapshotSeq: last?.seq ?? loaded.lastSnapshotSeq,
      lastSnapshotBytes: last?.bytes ?? loaded.lastSnapshotBytes,
      revision,
    };
  }

  /** Waits `delayMs`, or less when stopped meanwhile. */
  private pause(delayMs: number): Promise<void> {
    const { clock } = this.opts;
    return new Promise<void>((resolve) => {
      const wake = () => {
        if (this.pauseTimer !== null) clock.clearTimer(this.pauseTimer.handle);
        this.pauseTimer = null;
        resolve();
      };
      this.pauseTimer = { handle: clock.setTimer(clock.nowMs() + delayMs, wake), wake };
    });
  }
}

/**
 * The seq and size of the snapshot stored at `revision` (the leader may have written newer
 * ones while this standby followed): its meta, and its last chunk's size (the others are
 * whole). Undefined when there is none, or it is still the one at `knownSeq`.
 */
async function latestSnapshot(
  store: KvStore,
  keys: ClusterKeys,
  revision: number,
  knownSeq: number,
): Promise<{ seq: number; bytes: number } | undefined> {
  const at = (key: string) => store.range({ start: key, end: `${key}\0`, revision });
  const metaKv = (await at(keys.log.snapshot)).kvs[0];
  if (metaKv === undefined) return undefined;
  const meta = JSON.parse(metaKv.value.toString()) as SnapshotMeta;
  if (meta.seq === knownSeq) return undefined; // the one the warm world was loaded from
  const lastChunk = (await at(snapshotChunkKey(keys, meta.seq, meta.chunks - 1))).kvs[0];
  if (lastChunk === undefined)
    throw new ClusterError(`the log's snapshot at seq ${meta.seq} lacks its last chunk`);
  return { seq: meta.seq, bytes: (meta.chunks - 1) * snapshotChunkBytes + lastChunk.value.length };
}
