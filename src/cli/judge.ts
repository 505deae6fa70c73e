/** `vole judge --db F`: the verdict on a recorded cluster's volume decisions; exit 1 on a violation. */
import { coreOfStore, judge, type JudgeOptions, verdictText } from '../postmortem/index.js';
import { openReadonly, type ReadonlyLog } from '../postmortem/open.js';
import { byCore } from '../engine/cores.js';
import { UsageError } from './postmortem.js';

/** A cluster's log (the controller's core): a kubelet's holds one node's operations instead. */
export function isClusterLog(store: ReadonlyLog): boolean {
  return byCore(coreOfStore(store), { kubelet: () => false, controller: () => true });
}

/** Refuses a kubelet's log: it holds one node's operations, not a cluster's objects. */
function requireClusterLog(store: ReadonlyLog, db: string): void {
  if (!isClusterLog(store))
    throw new UsageError(
      `${db} is a kubelet's log: vole judge reads a cluster's log (vole controller --kubeconfig, ` +
        `or a recorded cluster); check a kubelet's log with vole verify --db ${db}`,
    );
}

/** The cluster's maxWaitForUnmountDuration from `--max-wait-for-unmount SECONDS`. */
function judgeOptions(seconds: string | undefined): JudgeOptions {
  if (seconds === undefined) return {};
  const value = Number(seconds);
  if (!Number.isFinite(value) || value < 0)
    throw new UsageError(
      `--max-wait-for-unmount ${seconds}: give the cluster's maxWaitForUnmountDuration in seconds (Kubernetes: 360)`,
    );
  return { maxWaitForUnmountMs: Math.round(value * 1000) };
}

export function judgeCommand(
  db: string,
  opts: { json?: boolean; maxWaitForUnmount?: string },
): number {
  const options = judgeOptions(opts.maxWaitForUnmount);
  const store = openReadonly(db);
  try {
    requireClusterLog(store, db);
    const verdict = judge(store.read({}), options);
    process.stdout.write(
      opts.json === true ? `${JSON.stringify(verdict, null, 2)}\n` : `${verdictText(verdict)}\n`,
    );
    return verdict.violations.length === 0 ? 0 : 1;
  } finally {
    store.close();
  }
}
