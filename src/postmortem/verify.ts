/**
 * Verify: re-fold a log with this version's code and re-run the planner at every
 * decision point. Reports each operation the current planner would not have started
 * there (a determinism check across versions), each event the current schema cannot
 * read, and each event the fold refuses (an invariant violation, naming pair and seq).
 */
import { InvariantError } from '../assert.js';
import type { VoleEvent } from '../events/index.js';
import { describeOperation, plan } from '../plan/index.js';
import { fold, initialWorld, InvariantChecker } from '../world/index.js';
import type { UniqueVolumeName } from '../ids.js';

export interface Divergence {
  readonly seq: number;
  readonly kind: 'decision' | 'unreadable' | 'invariant';
  readonly message: string;
}

export interface VerifyReport {
  readonly events: number;
  readonly decisions: number;
  readonly invariantChecks: number;
  readonly divergences: Divergence[];
  readonly ok: boolean;
}

/** Stops after this many divergences: one bug usually explains the rest. */
export const divergencesMax = 100;

export function verify(
  events: Iterable<VoleEvent>,
  opts: { onProgress?: (seq: number) => void } = {},
): VerifyReport {
  const world = initialWorld();
  const divergences: Divergence[] = [];
  const checker = new InvariantChecker();
  let decisions = 0;
  let count = 0;
  const iterator = events[Symbol.iterator]();
  for (;;) {
    let step: IteratorResult<VoleEvent>;
    try {
      step = iterator.next();
    } catch (error) {
      divergences.push({
        seq: world.seq + 1,
        kind: 'unreadable',
        message: (error as Error).message,
      });
      break;
    }
    if (step.done === true) break;
    const event = step.value;
    count++;
    if (count % 65_536 === 0) opts.onProgress?.(event.seq);
    if (event.type === 'OperationStarted') {
      decisions++;
      const planned = plan(world, event.tsMs, {
        volumes: [event.volume as UniqueVolumeName],
      }).operations;
      const same = planned.some(
        (o) => o.op === event.op && ('pod' in o ? o.pod : undefined) === event.pod,
      );
      if (!same) {
        const would = planned.length === 0 ? 'nothing' : planned.map(describeOperation).join(', ');
        divergences.push({
          seq: event.seq,
          kind: 'decision',
          message: `the log started ${event.op} ${event.volume}${event.pod === undefined ? '' : ` for pod ${event.pod}`}; this version would start ${would}`,
        });
      }
    }
    try {
      fold(world, event);
      checker.after(world);
      world.dirty.clear();
      if (checker.violations.length > 0) {
        for (const v of checker.violations.splice(0))
          divergences.push({
            seq: v.seq,
            kind: 'invariant',
            message: `${v.invariant}: ${v.message}`,
          });
      }
    } catch (error) {
      if (!(error instanceof InvariantError)) throw error;
      divergences.push({ seq: event.seq, kind: 'invariant', message: error.message });
      break; // The world is no longer trustworthy after a refused event.
    }
    if (divergences.length >= divergencesMax) break;
  }
  return {
    events: count,
    decisions,
    invariantChecks: checker.checks,
    divergences,
    ok: divergences.length === 0,
  };
}
