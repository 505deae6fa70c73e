/**
 * `vole judge`: a verdict on the volume decisions a real cluster's controllers made, from
 * the facts its log recorded. Two safety rules of the attach/detach controller
 * (pkg/controller/volume/attachdetach/reconciler/reconciler.go, `reconcile`):
 *  - a volume whose PersistentVolume allows neither ReadWriteMany nor ReadOnlyMany is
 *    attached to one node at a time (`isMultiAttachAllowed`, `reportMultiAttachError`);
 *  - a volume the node still lists in status.volumesInUse (`MountedByNode`) is not
 *    detached, unless maxWaitForUnmountDuration passed since the detach was first wanted
 *    (`SetDetachRequestTime`) with the node not Ready (`forceDetach`), or the node has the
 *    node.kubernetes.io/out-of-service taint.
 * And for every pod that waited on a volume, the condition that held it (held.ts). A pure
 * function of the events: the same verdict on every run.
 */
import type { VoleEvent } from '../events/index.js';
import { maxWaitForUnmountMsDefault } from '../controller/index.js';
import {
  type AttachChange,
  clockOf,
  detachRequestedAt,
  RecordedFacts,
  singleNodeOnly,
} from './judge-facts.js';
import { PodWaits, type PodVerdict } from './held.js';

export interface Violation {
  readonly rule: 'multiAttach' | 'detachWhileInUse';
  /** The PersistentVolume's name. */
  readonly volume: string;
  /** multiAttach: the node it was attached to first, then the second; else the one node. */
  readonly nodes: readonly string[];
  /** The event that broke the rule. */
  readonly atSeq: number;
  readonly atTsMs: number;
  /** The events that prove it, in seq order (the attachments, the node's status, …). */
  readonly seqs: readonly number[];
  readonly message: string;
}

/** A detach of a volume still in use that Kubernetes' rules allow. */
export interface ForcedDetach {
  readonly volume: string;
  readonly node: string;
  readonly atSeq: number;
  readonly atTsMs: number;
  readonly reason: 'timeout' | 'outOfService';
  /** When the detach was first wanted (the last pod there gone); null: before the log. */
  readonly requestedAtMs: number | null;
}

export interface Verdict {
  readonly fromSeq: number;
  readonly toSeq: number;
  readonly maxWaitForUnmountMs: number;
  readonly violations: readonly Violation[];
  readonly forcedDetaches: readonly ForcedDetach[];
  readonly pods: readonly PodVerdict[];
}

export interface JudgeOptions {
  /** The cluster's maxWaitForUnmountDuration (kube-controller-manager: 6 min). */
  readonly maxWaitForUnmountMs?: number;
}

/**
 * An attachment whose VolumeAttachment the attach/detach controller deleted on a node with
 * the node.kubernetes.io/out-of-service taint: the node is declared shut down, and a detach
 * that fails there leaves the attachment uncertain (operation_generator.go:
 * MarkVolumeAsUncertain), so Kubernetes attaches the volume elsewhere before it is gone.
 */
function forcedOff(facts: RecordedFacts, node: string, attachment: string): boolean {
  const deleting = facts.attachments.get(attachment)?.deleting ?? null;
  return deleting !== null && facts.nodes.get(node)?.outOfService === true;
}

function checkAttach(facts: RecordedFacts, change: AttachChange): Violation[] {
  if (!singleNodeOnly(facts, change.pv)) return [];
  const found: Violation[] = [];
  for (const [other, held] of facts.attachedNodes(change.pv)) {
    if (other === change.node || forcedOff(facts, other, held.via.name)) continue;
    found.push({
      rule: 'multiAttach',
      volume: change.pv,
      nodes: [other, change.node],
      atSeq: change.at.seq,
      atTsMs: change.at.tsMs,
      seqs: [held.since.seq, change.at.seq],
      message:
        `${change.pv} (ReadWriteOnce) attached to ${change.node} (${change.via.kind} ` +
        `${change.via.name}) at ${clockOf(change.at.tsMs)} while still attached to ${other} ` +
        `(${held.via.kind} ${held.via.name}, attached since ${clockOf(held.since.tsMs)})`,
    });
  }
  return found;
}

type DetachJudgement =
  | { kind: 'safe' }
  | { kind: 'forced'; forced: ForcedDetach }
  | { kind: 'violation'; violation: Violation };

function judgeDetach(facts: RecordedFacts, change: AttachChange, maxWaitMs: number) {
  const node = facts.nodes.get(change.node);
  const unique = facts.uniqueNameOf(change.pv);
  if (node === undefined || unique === undefined || !node.volumesInUse.has(unique))
    return { kind: 'safe' } as DetachJudgement;
  const requested = detachRequestedAt(facts, change.pv, change.node);
  const requestedAt = requested === 'wanted' ? change.at : requested;
  const base = { volume: change.pv, node: change.node, atSeq: change.at.seq };
  const forced = (reason: ForcedDetach['reason']): DetachJudgement => ({
    kind: 'forced',
    forced: { ...base, atTsMs: change.at.tsMs, reason, requestedAtMs: requestedAt?.tsMs ?? null },
  });
  if (node.outOfService) return forced('outOfService');
  const waited = requestedAt === null ? Infinity : change.at.tsMs - requestedAt.tsMs;
  const notReady = node.ready !== true;
  if (notReady && waited > maxWaitMs) return forced('timeout');
  const why = notReady
    ? `only ${Math.round(waited / 1000)} s after the detach was wanted (force detach after ${maxWaitMs / 1000} s)`
    : `${change.node} is Ready (since ${clockOf(node.readySince.tsMs)})`;
  const seqs = [node.inUseSeen.seq, change.at.seq];
  if (requestedAt !== null && requestedAt.seq !== change.at.seq) seqs.push(requestedAt.seq);
  return {
    kind: 'violation',
    violation: {
      rule: 'detachWhileInUse',
      ...base,
      nodes: [change.node],
      atTsMs: change.at.tsMs,
      seqs: [...new Set(seqs)].sort((a, b) => a - b),
      message:
        `${change.pv} detached from ${change.node} (${change.via.kind} ${change.via.name}) at ` +
        `${clockOf(change.at.tsMs)} while ${change.node} listed it in volumesInUse (status of ` +
        `${clockOf(node.inUseSeen.tsMs)}): ${why}`,
    },
  } as DetachJudgement;
}

/** The verdict on a recorded log: safety violations, forced detaches, and each pod's wait. */
export function judge(events: Iterable<VoleEvent>, opts: JudgeOptions = {}): Verdict {
  const maxWaitMs = opts.maxWaitForUnmountMs ?? maxWaitForUnmountMsDefault;
  const facts = new RecordedFacts();
  const waits = new PodWaits(facts, maxWaitMs);
  const violations: Violation[] = [];
  const forcedDetaches: ForcedDetach[] = [];
  for (const event of events) {
    for (const change of facts.apply(event)) {
      if (change.change === 'attached') violations.push(...checkAttach(facts, change));
      else {
        const judged = judgeDetach(facts, change, maxWaitMs);
        if (judged.kind === 'violation') violations.push(judged.violation);
        if (judged.kind === 'forced') forcedDetaches.push(judged.forced);
      }
    }
    waits.observe(event);
  }
  return {
    fromSeq: facts.first?.seq ?? 0,
    toSeq: facts.last.seq,
    maxWaitForUnmountMs: maxWaitMs,
    violations,
    forcedDetaches,
    pods: waits.verdicts(),
  };
}
