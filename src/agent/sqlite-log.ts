/** The engine's log on SQLite: the store, its group committer as the engine's sink. */
import { eventCodec, type NewEvent, type VoleEvent } from '../events/index.js';
import { SqliteError } from 'better-sqlite3';
import { GroupCommitter, type GroupCommitterOptions } from '../log/group-commit.js';
import { type EventStore, openLog } from '../log/store.js';
import type { EventSink } from './sink.js';
import { decodeWorldSnapshot, encodeWorldSnapshot, worldSnapshotFormat } from '../log/world-snapshot.js';
import { fold, initialWorld } from '../world/index.js';
import type { World } from '../world/types.js';

export interface SqliteLog {
  readonly store: EventStore<VoleEvent>;
  readonly sink: EventSink;
  /** Every event in the log, streamed (flushes what is buffered first). */
  readAll(): Iterable<VoleEvent>;
  /** The world at the end of the log: the latest usable snapshot plus the events after it. */
  loadWorld(): World;
  /** Stores a snapshot of the world (flushes first, so it never runs ahead of the log). */
  saveSnapshot(world: World): void;
  readonly lastSnapshotSeq: number;
}

export function openSqliteLog(
  path: string,
  opts: { durability?: 'full' | 'normal'; blocked?: GroupCommitterOptions } = {},
): SqliteLog {
  const { blocked, ...openOpts } = opts;
  const store = openLog<VoleEvent>(path, { codec: eventCodec, mode: 'create', ...openOpts });
  const committer = new GroupCommitter<VoleEvent>(store, blocked);
  const sink: EventSink = {
    push: (event: NewEvent) => committer.push(event as Omit<VoleEvent, 'seq'>),
    flush: () => committer.flush(),
    close: () => void committer.close(),
    whenDurable: () => committer.whenDurable(),
    get writable() {
      return committer.writable;
    },
    onWritable: (listener) => committer.onWritable(listener),
  };
  const latest = store.latestSnapshot();
  return {
    store,
    sink,
    lastSnapshotSeq: latest?.seq ?? 0,
    readAll: () => {
      committer.flush();
      return store.read();
    },
    loadWorld: () => {
      const fromSnapshot =
        latest === undefined ? undefined : decodeWorldSnapshot(latest.data, latest.format);
      const world = fromSnapshot ?? initialWorld();
      store.forEach({ fromSeq: world.seq + 1 }, (event) => fold(world, event));
      return world;
    },
    saveSnapshot: (world: World) => {
      committer.flush();
      // A snapshot is a cache: none while the log is blocked, and a failed one is skipped.
      if (!committer.writable || committer.pendingCount > 0) return;
      try {
        store.saveSnapshot({
          seq: world.seq,
          tsMs: world.tsMs,
          format: worldSnapshotFormat,
          data: encodeWorldSnapshot(world),
        });
      } catch (error) {
        if (!(error instanceof SqliteError)) throw error;
      }
    },
  };
}
