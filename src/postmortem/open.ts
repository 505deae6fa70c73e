/**
 * Opening a log for reading and the world at a moment of it: what the post-mortem commands
 * and the inspector share.
 */
import { eventCodec, type VoleEvent } from '../events/index.js';
import { openLog } from '../log/store.js';
import { decodeWorldSnapshot } from '../log/world-snapshot.js';
import { describeWorld, replayTo, type WorldView } from './replay.js';

/** The log at `path`, read-only: never appended to, never migrated. */
export function openReadonly(path: string) {
  return openLog(path, { codec: eventCodec, mode: 'readonly' });
}

export type ReadonlyLog = ReturnType<typeof openReadonly>;

/** Wraps the events a read folds, e.g. to show progress; `fromSeq..toSeq` is the range read. */
export type ReadWrapper = (
  events: Iterable<VoleEvent>,
  range: { fromSeq: number; toSeq: number },
) => Iterable<VoleEvent>;

/** The world at `seq`: from the latest usable snapshot at or before it, plus the events after. */
export function worldAt(store: ReadonlyLog, seq: number, wrap?: ReadWrapper): WorldView {
  const snapshot = store.latestSnapshot({ atOrBeforeSeq: seq });
  const start =
    snapshot === undefined ? undefined : decodeWorldSnapshot(snapshot.data, snapshot.format);
  const fromSeq = (start?.seq ?? 0) + 1;
  const events = store.read({ fromSeq, toSeq: seq });
  return describeWorld(
    replayTo(wrap === undefined ? events : wrap(events, { fromSeq, toSeq: seq }), {}, start),
  );
}
