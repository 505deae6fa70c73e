/**
 * The planner's verdict on an operator's request (vole detach / release / retry), as both
 * cores' planners decide it (src/kubelet/plan-operator.ts, src/controller/operator.ts), and
 * `vole retry`, which either core decides alike. Pure.
 */
import type { OperationBook, OperatorRequestRecord } from './types.js';

export type Verdict = { verdict: 'accepted' | 'refused'; message: string };

export const refused = (message: string): Verdict => ({ verdict: 'refused', message });
export const accepted = (message: string): Verdict => ({ verdict: 'accepted', message });

/** `vole retry`, for either core: accepted when a failed operation of the volume waits. */
export function decideRetry(world: Pick<OperationBook, 'ops'>, r: OperatorRequestRecord): Verdict {
  const failed = (world.ops.get(r.volume) ?? []).filter(
    (rec) =>
      !rec.pending &&
      rec.lastError !== null &&
      (r.pod === null || rec.key.pod === '' || rec.key.pod === r.pod),
  );
  const of = `${r.volume}${r.pod === null ? '' : ` for pod ${r.pod}`}`;
  if (failed.length === 0)
    return refused(`nothing of ${of} is in backoff: there is nothing to retry`);
  return accepted(
    `backoff of ${failed.map((f) => f.opName).join(', ')} on ${of} cleared: it runs again now`,
  );
}
