/** `vole why POD|VOLUME --db F [--at T]`: what each of the pod's volumes waits on, and why. */
import {
  describeEvent,
  describeNodeOperation,
  judge,
  type NodeOperation,
  nodeOperationsOfPod,
  type PodVerdict,
  podVerdictText,
  waitsOfPod,
  type WhyAnswer,
  whyText,
  worldOfLogAt,
} from '../postmortem/index.js';
import { openReadonly, type ReadonlyLog } from '../postmortem/open.js';
import { withProgress } from './progress.js';
import { resolveMoment, UsageError } from './postmortem.js';
import { recordedMode } from '../engine/cores.js';
import { isClusterLog } from './judge.js';

/** The answer of a kubelet's log, or of the controller's (claims, pods, volumes). */
function answerAt(store: ReadonlyLog, seq: number, subject: string): WhyAnswer | undefined {
  const world = worldOfLogAt(store, seq, (events, fromSeq) =>
    withProgress(events, { label: 'replaying', fromSeq, toSeq: seq }),
  );
  return world.why(subject);
}

/**
 * A recorded cluster's log also says, from the objects the API server served, what held
 * the pod in each of its waits up to `seq` (vole judge's answer for it). vole's own logs
 * answer from its own decisions alone: a controller's log holds the claims it bound as its
 * decisions, not as the API's objects, so the waits read from the objects would lag them.
 */
function waitsAt(store: ReadonlyLog, seq: number, subject: string): PodVerdict[] {
  if (!isClusterLog(store) || !isRecordedLog(store)) return [];
  return waitsOfPod(judge(store.read({ toSeq: seq })), subject);
}

/** A recorded log's node operations on the pod's volumes, from the nodes' own logs. */
function nodeOperationsAt(store: ReadonlyLog, seq: number, subject: string): NodeOperation[] {
  if (!isRecordedLog(store)) return [];
  return nodeOperationsOfPod(store.read({ toSeq: seq }), subject);
}

/** A log `vole record` or `vole import --audit-log` wrote (EngineStarted mode recorded). */
function isRecordedLog(store: ReadonlyLog): boolean {
  const started = [...store.read({ limit: 16 })].find((e) => e.type === 'EngineStarted');
  return started?.type === 'EngineStarted' && started.mode === recordedMode;
}

export function whyCommand(
  db: string,
  subject: string,
  opts: { at?: string; json?: boolean },
): number {
  const store = openReadonly(db);
  try {
    const seq = resolveMoment(store, opts.at);
    const answer = answerAt(store, seq, subject);
    const waits = waitsAt(store, seq, subject);
    const nodeOps = nodeOperationsAt(store, seq, subject);
    if (answer === undefined && waits.length === 0 && nodeOps.length === 0)
      throw new UsageError(
        `no pod, claim or volume "${subject}" at seq ${seq}: give a pod UID, namespace/name ` +
          `or name, a claim's namespace/name, or a UniqueVolumeName ` +
          `(vole status --db ${db} lists them)`,
      );
    if (opts.json === true) {
      const extra = {
        ...(waits.length === 0 ? {} : { waits }),
        ...(nodeOps.length === 0 ? {} : { nodeOperations: nodeOps }),
      };
      const json =
        Object.keys(extra).length === 0 ? answer : { ...(answer ?? { subject }), ...extra };
      process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
      return 0;
    }
    const lines = waits.flatMap(podVerdictText);
    if (nodeOps.length > 0) {
      lines.push(`what the nodes' logs say of its volumes (${nodeOps.length} operation(s)):`);
      const originMs = store.bounds().firstTsMs;
      for (const op of nodeOps)
        lines.push(
          `  seq ${op.seq} (+${Math.round((op.tsMs - originMs) / 1000)}s) ${describeNodeOperation(op)}`,
        );
    }
    if (answer !== undefined)
      lines.push(
        whyText(answer, {
          originMs: store.bounds().firstTsMs,
          tsOf: (s) => store.get(s)?.tsMs,
          describe: (s) => {
            const event = store.get(s);
            return event === undefined ? undefined : describeEvent(event);
          },
        }),
      );
    process.stdout.write(`${lines.join('\n')}\n`);
    return 0;
  } finally {
    store.close();
  }
}
