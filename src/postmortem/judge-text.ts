/** The verdict in words: what `vole judge` prints, and the wait `vole why` adds for a pod. */
import { clockOf } from './judge-facts.js';
import type { HeldSpan, PodVerdict } from './held.js';
import type { Verdict } from './judge.js';

/** `6m09s`, `42s`: a duration as people read it. */
export function durationText(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  return m < 60
    ? `${m}m${String(s % 60).padStart(2, '0')}s`
    : `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

const seqList = (seqs: readonly number[]) => seqs.join(', ');

function heldLine(span: HeldSpan): string {
  const said =
    span.kubeEvent === undefined
      ? ''
      : ` (Event ${span.kubeEvent.reason}: ${span.kubeEvent.message})`;
  return `${span.kind} (${span.outerVolumeSpecName}): ${span.message}${said} [events ${seqList(span.proofSeqs)}]; ${span.clears}`;
}

/** One pod's wait: the span, the condition that held it, and the others it went through. */
export function podVerdictText(wait: PodVerdict): string[] {
  const ended = { ready: 'ready', podGone: 'pod gone', tornDown: 'torn down' };
  const end =
    wait.endedAtTsMs === null || wait.endedBy === null
      ? ', still waiting at the end of the log'
      : ` to ${clockOf(wait.endedAtTsMs)} (${ended[wait.endedBy]}, ${durationText(wait.endedAtTsMs - wait.waitedFromTsMs)})`;
  const what = wait.waitedFor === 'teardown' ? 'Terminating, its teardown waited' : 'waited';
  const lines = [
    `${wait.pod} on ${wait.node ?? '(no node)'}: ${what} from ${clockOf(wait.waitedFromTsMs)} (seq ${wait.waitedFromSeq})${end}`,
    `  held by ${heldLine(wait.held)}`,
  ];
  for (const other of wait.conditions)
    if (other !== wait.held)
      lines.push(
        `  also held by ${other.kind} for ${durationText(other.heldMs)} from seq ${other.sinceSeq}`,
      );
  return lines;
}

/** The whole verdict: violations, forced detaches, each pod's wait, and the outcome line. */
export function verdictText(verdict: Verdict): string {
  const lines = [
    `verdict on seqs ${verdict.fromSeq}..${verdict.toSeq} (maxWaitForUnmountDuration ${durationText(verdict.maxWaitForUnmountMs)})`,
    `safety violations: ${verdict.violations.length}`,
  ];
  for (const v of verdict.violations)
    lines.push(`  VIOLATION ${v.rule} at seq ${v.atSeq}: ${v.message} [events ${seqList(v.seqs)}]`);
  lines.push(`forced detaches: ${verdict.forcedDetaches.length}`);
  for (const f of verdict.forcedDetaches) {
    const why =
      f.reason === 'outOfService'
        ? `${f.node} has the node.kubernetes.io/out-of-service taint`
        : `${f.node} not Ready, detach wanted since ${f.requestedAtMs === null ? 'before the log' : clockOf(f.requestedAtMs)}`;
    lines.push(
      `  ${f.volume} from ${f.node} at seq ${f.atSeq} (${clockOf(f.atTsMs)}) while in use: ${why}`,
    );
  }
  lines.push(`pods that waited on a volume: ${verdict.pods.length}`);
  for (const wait of verdict.pods) lines.push(...podVerdictText(wait).map((l) => `  ${l}`));
  lines.push(
    verdict.violations.length === 0
      ? 'ok: no safety rule broken'
      : `BROKEN: ${verdict.violations.length} safety violation(s)`,
  );
  return lines.join('\n');
}

/** The waits of one pod (by UID, namespace/name or a unique name). */
export function waitsOfPod(verdict: Verdict, subject: string): PodVerdict[] {
  const byUid = verdict.pods.filter((p) => p.uid === subject || p.pod === subject);
  if (byUid.length > 0) return byUid;
  const byName = verdict.pods.filter((p) => p.pod.split('/')[1] === subject);
  return new Set(byName.map((p) => p.uid)).size === 1 ? byName : [];
}
