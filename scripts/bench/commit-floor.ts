/**
 * The disk's floor under the durable pod-ready figure. A SQLite run's own commits (the same
 * events, grouped as the engine grouped them) are written again to a fresh log by a group
 * committer alone, one every arrival gap, with nothing else in the process running: what
 * each commit costs on this disk at this moment without the engine around it. An engine
 * that added nothing to a pod but its one commit would have pods that take an in-memory
 * pod's time plus such a commit; the floor is the p99 of those sums over every pair of an
 * in-memory pod of the same run and a replayed commit (drawn independently, as a pause and
 * a slow fsync are). When the floor's ratio over the in-memory p99 is above a target, no
 * engine that makes a pod wait on one commit meets it on that disk at that moment.
 */
import { join } from 'node:path';
import { eventCodec, type VoleEvent } from '../../src/events/index.js';
import { GroupCommitter } from '../../src/log/group-commit.js';
import { openLog } from '../../src/log/store.js';
import { removeDb, sleepMs } from './util.js';

/** One commit of a run, as its log's onCommitted reported it. */
export interface CommitRecord {
  readonly ms: number;
  readonly events: number;
}

/** A listener for a sink's onCommitted that records into `into`. */
export function recordCommits(into: CommitRecord[]): (seconds: number, events: number) => void {
  return (seconds, events) => into.push({ ms: seconds * 1e3, events });
}

/**
 * Writes the events of `commits` (the run's commits after the first `skip`, at most `max`
 * of them) from the log at `logPath` to a fresh log in `dir`, one commit every `gapMs`, and
 * answers each one's duration (ms) as the committer timed it.
 */
export async function replayCommitsMs(
  logPath: string,
  commits: readonly CommitRecord[],
  opts: {
    readonly skip: number;
    readonly gapMs: number;
    readonly dir: string;
    readonly max: number;
  },
): Promise<number[]> {
  const replayed = commits.slice(opts.skip, opts.skip + opts.max);
  const fromSeq = 1 + commits.slice(0, opts.skip).reduce((sum, commit) => sum + commit.events, 0);
  const source = openLog<VoleEvent>(logPath, { codec: eventCodec, mode: 'readonly' });
  const freshPath = join(opts.dir, 'commit-floor.db');
  removeDb(freshPath);
  const fresh = openLog<VoleEvent>(freshPath, {
    codec: eventCodec,
    mode: 'create',
    durability: 'full',
    integrityCheck: 'none',
  });
  const committer = new GroupCommitter<VoleEvent>(fresh);
  const durationsMs: number[] = [];
  committer.onCommitted((seconds) => durationsMs.push(seconds * 1e3));
  try {
    const events = source.read({ fromSeq });
    for (const commit of replayed) {
      await sleepMs(opts.gapMs);
      for (let i = 0; i < commit.events; i++) {
        const next = events.next();
        if (next.done === true) throw new Error(`${logPath}: fewer events than its commits wrote`);
        const { seq: _seq, ...event } = next.value;
        committer.push(event);
      }
      await committer.whenDurable();
    }
    events.return?.();
  } finally {
    committer.close();
    fresh.close();
    source.close();
    removeDb(freshPath);
  }
  return durationsMs;
}

/**
 * The `q` quantile of `podsMs[i] + commitsMs[j]` over every pair: pods that each took an
 * in-memory pod's time and one commit more.
 */
export function floorQuantile(
  podsMs: readonly number[],
  commitsMs: readonly number[],
  q: number,
): number {
  const sums = new Float64Array(podsMs.length * commitsMs.length);
  let k = 0;
  for (const pod of podsMs) for (const commit of commitsMs) sums[k++] = pod + commit;
  sums.sort();
  const rank = Math.min(sums.length, Math.max(1, Math.ceil(q * sums.length)));
  return sums[rank - 1] ?? Number.NaN;
}
