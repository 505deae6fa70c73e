/** The engine's log on SQLite: the store, its group committer as the engine's sink. */
import { eventCodec, type NewEvent, type VoleEvent } from '../events/index.js';
import { GroupCommitter } from '../log/group-commit.js';
import { type EventStore, openLog } from '../log/store.js';
import type { EventSink } from './sink.js';

export interface SqliteLog {
  readonly store: EventStore<VoleEvent>;
  readonly sink: EventSink;
  /** Every event in the log, streamed (flushes what is buffered first). */
  readAll(): Iterable<VoleEvent>;
}

export function openSqliteLog(path: string, opts: { durability?: 'full' | 'normal' } = {}): SqliteLog {
  const store = openLog<VoleEvent>(path, { codec: eventCodec, mode: 'create', ...opts });
  const committer = new GroupCommitter<VoleEvent>(store);
  const sink: EventSink = {
    push: (event: NewEvent) => committer.push(event as Omit<VoleEvent, 'seq'>),
    flush: () => committer.flush(),
    close: () => committer.close(),
  };
  return {
    store,
    sink,
    readAll: () => {
      committer.flush();
      return store.read();
    },
  };
}
