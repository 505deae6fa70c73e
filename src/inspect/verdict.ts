/**
 * The judge's verdict for the inspector's timeline (`/api/verdict`): on a cluster's log
 * (a recorded cluster, or vole controller's), the safety violations at the events that
 * broke the rules, the forced detaches, and each pod's wait with the condition that held
 * it, as `vole judge` gives them. A kubelet's log holds one node's operations, not a
 * cluster's objects: it is not judged.
 */
import { byCore } from '../engine/cores.js';
import { coreOfStore, judge, podVerdictText, type ReadableLog } from '../postmortem/index.js';
import type { VerdictPayload } from './protocol.js';

export function verdictOf(store: ReadableLog, toSeq: number): VerdictPayload {
  const judged =
    toSeq > 0 &&
    byCore(coreOfStore(store), {
      kubelet: () => false,
      controller: () => true,
    });
  if (!judged) return { judged, toSeq, violations: [], forcedDetaches: [], waits: [] };
  const verdict = judge(store.read({ toSeq }));
  return {
    judged,
    toSeq,
    violations: verdict.violations,
    forcedDetaches: verdict.forcedDetaches,
    waits: verdict.pods.map((wait) => ({ ...wait, text: podVerdictText(wait) })),
  };
}
