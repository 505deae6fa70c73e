/**
 * What the two facades share: where their events go (a log in memory or in SQLite), how a
 * restart folds the world back, and the one way they wait for the world to reach a state.
 * VolumeManager and ControllerManager differ only in their core (the kubelet's, the
 * attach/detach controller's) and in what they are told.
 */
import type { Clock } from '../clock.js';
import { snapshotEveryEvents } from '../constants.js';
import type { Core, CoreOperation, CoreWorld } from '../engine/core.js';
import type { EventListener } from '../engine/engine.js';
import { type EventSink, MemorySink } from '../engine/sink.js';
import type { VoleEvent } from '../events/index.js';
import type { GroupCommitterOptions } from '../log/group-commit-options.js';
import { openSqliteLog } from './sqlite-log.js';

/**
 * Where events go, with what the log held before (a restart): its events, or the world
 * already folded from them (a snapshot plus the tail). In memory by default.
 */
export interface LogOptions<W> {
  readonly sink: EventSink;
  readonly history: Iterable<VoleEvent>;
  readonly world?: W;
}

/** When the world is written as a snapshot, and where (open() sets it for SQLite logs). */
export interface SnapshotPolicy<W> {
  readonly everyEvents: number;
  readonly save: (world: W) => void;
  readonly lastSeq: number;
}

/** The SQLite log a facade's open() keeps its events in. */
export interface OpenOptions {
  /** The log's path: created when absent, folded back when it holds events (a restart). */
  readonly db: string;
  /** SQLite's synchronous setting: 'full' (default) survives a power cut, 'normal' a crash. */
  readonly durability?: 'full' | 'normal';
  /** A snapshot of the world every this many events (default 10,000). */
  readonly snapshotEveryEvents?: number;
  /** Told when the log cannot be written (disk full) and when it can again. */
  readonly logBlocked?: GroupCommitterOptions;
}

export interface WaitOptions {
  /** How long to wait before rejecting with what is still missing. */
  readonly timeoutMs?: number;
}

/** A facade's waitUntil: what is waited for, named in the time-out's error. */
export interface WaitUntilOptions extends WaitOptions {
  readonly what?: string;
}

/** A check for waitOnEvents that is done when `done()` holds and names `what` at the time-out. */
export function holds(done: () => boolean, what = 'the condition') {
  return (cause: WaitCause): WaitVerdict =>
    done() ? true : cause === 'timeout' ? new Error(`timed out waiting for ${what}`) : false;
}

/** A log opened for one core: what create() takes, and where the world was restored from. */
export interface OpenedLog<W> {
  readonly log: LogOptions<W>;
  readonly snapshot: SnapshotPolicy<W>;
  /** The seq of the snapshot the world was loaded from (0: none, folded from the start). */
  readonly restoredFromSeq: number;
}

/** Opens (or creates) the SQLite log at `opts.db` for `core`, folding back what it holds. */
export function openLogFor<W extends CoreWorld, O extends CoreOperation>(
  core: Core<W, O>,
  opts: OpenOptions,
): OpenedLog<W> {
  const log = openSqliteLog(opts.db, core, {
    ...(opts.durability === undefined ? {} : { durability: opts.durability }),
    ...(opts.logBlocked === undefined ? {} : { blocked: opts.logBlocked }),
  });
  const world = log.loadWorld();
  return {
    log: { sink: log.sink, history: [], world },
    snapshot: {
      everyEvents: opts.snapshotEveryEvents ?? snapshotEveryEvents,
      save: (w) => log.saveSnapshot(w),
      lastSeq: log.lastSnapshotSeq,
    },
    restoredFromSeq: log.restoredFromSeq,
  };
}

/** The log to write (in memory when none is given) and the world its history folds to. */
export function restoreWorld<W extends CoreWorld, O extends CoreOperation>(
  core: Core<W, O>,
  given: LogOptions<W> | undefined,
): { log: LogOptions<W>; world: W } {
  const log: LogOptions<W> = given ?? { sink: new MemorySink(), history: [] };
  const world = log.world ?? core.initialWorld();
  for (const event of log.history) if (event.seq > world.seq) core.fold(world, event);
  return { log, world };
}

/** Why a wait is checked: the start, an event, a re-check it asked for, or its timeout. */
export type WaitCause = 'start' | 'event' | 'recheck' | 'timeout';

/**
 * What a check says: `true` done, an Error to reject with, `false` not yet (at the
 * timeout, `false` rejects with a generic time-out).
 */
export type WaitVerdict = boolean | Error;

/**
 * Resolves once `check` says done, re-checking after every event (it does not poll); a
 * check may ask for one more look on the next turn (`again`), once what is being planned
 * now has been. Rejects with the check's Error, or after `timeoutMs`.
 */
export function waitOnEvents<W>(
  host: { readonly clock: Clock; subscribe(listener: EventListener<W>): () => void },
  timeoutMs: number,
  check: (cause: WaitCause, again: () => void) => WaitVerdict,
): Promise<void> {
  const { clock } = host;
  return new Promise((resolve, reject) => {
    let done = false;
    let recheckScheduled = false;
    const again = () => {
      if (recheckScheduled) return;
      recheckScheduled = true;
      setImmediate(() => {
        recheckScheduled = false;
        if (!done) look('recheck');
      });
    };
    const look = (cause: WaitCause) => {
      const verdict = check(cause, again);
      if (verdict === true) finish(resolve);
      else if (verdict instanceof Error) finish(() => reject(verdict));
      else if (cause === 'timeout')
        finish(() => reject(new Error('timed out waiting for the condition')));
    };
    const finish = (settle: () => void) => {
      if (done) return;
      done = true;
      unsubscribe();
      clock.clearTimer(timer);
      settle();
    };
    const timer = clock.setTimer(clock.nowMs() + timeoutMs, () => look('timeout'));
    const unsubscribe = host.subscribe(() => look('event'));
    look('start');
  });
}
