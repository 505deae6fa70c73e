/**
 * An engine's log on SQLite: the store, its group committer as the engine's sink, and the
 * core's snapshots. The log belongs to one core: a log whose EngineStarted names another
 * mode is refused, so a node agent never folds a controller's log or the other way round.
 */
import type { Core, CoreOperation, CoreWorld } from '../engine/core.js';
import { coreOfLog } from '../engine/cores.js';
import type { EventSink } from '../engine/sink.js';
import { eventCodec, type NewEvent, type VoleEvent } from '../events/index.js';
import { SqliteError } from 'better-sqlite3';
import { LogOpenError } from '../log/errors.js';
import { GroupCommitter } from '../log/group-commit.js';
import type { GroupCommitterOptions } from '../log/group-commit-options.js';
import { type EventStore, openLog } from '../log/store.js';

export interface SqliteLog<W> {
  readonly store: EventStore<VoleEvent>;
  readonly sink: EventSink;
  /** Every event in the log, streamed (flushes what is buffered first). */
  readAll(): Iterable<VoleEvent>;
  /** The world at the end of the log: the latest usable snapshot plus the events after it. */
  loadWorld(): W;
  /** Stores a snapshot of the world (flushes first, so it never runs ahead of the log). */
  saveSnapshot(world: W): void;
  readonly lastSnapshotSeq: number;
  /** The seq of the snapshot loadWorld started from (0: it folded the log from the start). */
  readonly restoredFromSeq: number;
}

/** Opens (or creates) the log at `path`, refusing one another core wrote. */
function openStoreOfMode(
  path: string,
  mode: string,
  opts: Omit<Parameters<typeof openLog<VoleEvent>>[1], 'codec' | 'mode'>,
): ReturnType<typeof openLog<VoleEvent>> {
  const store = openLog<VoleEvent>(path, { codec: eventCodec, mode: 'create', ...opts });
  const written = coreOfLog(store.read({ limit: 16 })).mode;
  if (store.head().seq > 0 && written !== mode) {
    store.close();
    throw new LogOpenError({
      code: 'otherMode',
      path,
      message: `${path} is a ${written} log; a ${mode} cannot write to it (give another --db path)`,
    });
  }
  return store;
}

/** The engine's sink over the group committer. */
function committerSink(committer: GroupCommitter<VoleEvent>): EventSink {
  return {
    push: (event: NewEvent) => committer.push(event),
    flush: () => committer.flush(),
    afterTick: () => {},
    close: () => void committer.close(),
    whenDurable: (throughSeq) => committer.whenDurable(throughSeq),
    get writable() {
      return committer.writable;
    },
    get verified() {
      return committer.verified;
    },
    onWritable: (listener) => committer.onWritable(listener),
    onCommitted: (listener) => committer.onCommitted(listener),
  };
}
export function openSqliteLog<W extends CoreWorld, O extends CoreOperation>(
  path: string,
  core: Core<W, O>,
  opts: { durability?: 'full' | 'normal'; blocked?: GroupCommitterOptions } = {},
): SqliteLog<W> {
  const { blocked, ...openOpts } = opts;
  const store = openStoreOfMode(path, core.mode, {
    ...openOpts,
    // The committer's onHalted reports a damaged file; the store prints it otherwise.
    ...(blocked?.onHalted === undefined ? {} : { onDamaged: () => {} }),
  });
  const committer = new GroupCommitter<VoleEvent>(store, blocked);
  const sink = committerSink(committer);
  let latest: ReturnType<typeof store.latestSnapshot>;
  try {
    latest = store.latestSnapshot(); // checked against its checksum
  } catch (error) {
    committer.close();
    throw error;
  }
  let restoredFromSeq = 0;
  return {
    store,
    sink,
    lastSnapshotSeq: latest?.seq ?? 0,
    get restoredFromSeq() {
      return restoredFromSeq;
    },
    readAll: () => {
      committer.flush();
      return store.read();
    },
    loadWorld: () => {
      const fromSnapshot =
        latest === undefined ? undefined : core.snapshot.decode(latest.data, latest.format);
      const world = fromSnapshot ?? core.initialWorld();
      restoredFromSeq = fromSnapshot?.seq ?? 0;
      try {
        // The tail is checked against its checksums as it is read (src/log/checksum.ts).
        store.forEach({ fromSeq: world.seq + 1 }, (event) => core.fold(world, event));
      } catch (error) {
        // Refuse to start: nothing was pushed, so closing writes nothing.
        committer.close();
        throw error;
      }
      return world;
    },
    saveSnapshot: (world: W) => {
      committer.flush();
      // A snapshot is a cache: none while the log is blocked, and a failed one is skipped.
      // Events held until the whole-file check passes are pending too: none before then.
      if (!committer.writable || committer.pendingCount > 0) return;
      try {
        store.saveSnapshot({
          seq: world.seq,
          tsMs: world.tsMs,
          format: core.snapshot.format,
          data: core.snapshot.encode(world),
        });
      } catch (error) {
        if (!(error instanceof SqliteError)) throw error;
      }
    },
  };
}
