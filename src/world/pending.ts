/**
 * Nested pending operations (spec §5): the conflict rule between operation keys, the
 * choice of "the" matching record, and exponential backoff. Pure functions over the
 * world's operation records; the fold changes records, the planner only asks.
 */
import { assert } from '../assert.js';
import { backoffFactor, backoffMsInitial, backoffMsMax } from '../constants.js';
import type { OperationKind, OpKey } from '../events/index.js';
import type { OpRecord } from './types.js';

/** spec §5.2: do two keys conflict? An empty part matches anything. */
export function keysConflict(a: OpKey, b: OpKey): boolean {
  if (a.volume === '' || a.volume !== b.volume) return false;
  const podMatches = a.pod === '' || b.pod === '' || a.pod === b.pod;
  const nodeMatches = a.node === '' || b.node === '' || a.node === b.node;
  return podMatches && nodeMatches;
}

export function keysEqual(a: OpKey, b: OpKey): boolean {
  return a.volume === b.volume && a.pod === b.pod && a.node === b.node;
}

export function keyString(key: OpKey): string {
  return `{volumeName:${key.volume} podName:${key.pod} nodeName:${key.node}}`;
}

/**
 * spec §5.2 isOperationExists: the first pending match wins; otherwise an exact match,
 * otherwise the first non-exact one. Returns its index in `records`, or -1.
 */
export function findMatch(records: readonly OpRecord[], key: OpKey): number {
  let exact = -1;
  let first = -1;
  for (let i = 0; i < records.length; i++) {
    const record = records[i]!;
    if (!keysConflict(key, record.key)) continue;
    if (record.pending) return i;
    if (exact === -1 && keysEqual(key, record.key)) exact = i;
    if (first === -1) first = i;
  }
  return exact !== -1 ? exact : first;
}

/**
 * The time from which a failed record lets the same operation run again. Retry is
 * allowed at lastError + duration (spec §5.5 says strictly after; on a virtual clock the
 * planner wakes exactly then, and SCENARIOS.md's "ok at 0.5 s" needs the boundary).
 */
export function retryAtMs(record: OpRecord): number {
  return record.lastErrorTsMs + record.durationMsBeforeRetry;
}

export type RunVerdict =
  | { kind: 'run' }
  | { kind: 'alreadyExists'; record: OpRecord }
  | { kind: 'backoff'; record: OpRecord; retryAtMs: number };

/** spec §5.3 Run, as a question: may `opName` start on `key` at `nowMs`? */
export function mayRun(
  records: readonly OpRecord[],
  key: OpKey,
  opName: OperationKind,
  nowMs: number,
): RunVerdict {
  const index = findMatch(records, key);
  if (index === -1) return { kind: 'run' };
  const record = records[index]!;
  if (record.pending) return { kind: 'alreadyExists', record };
  const inBackoff = nowMs < retryAtMs(record);
  if (inBackoff && record.opName === opName) {
    return { kind: 'backoff', record, retryAtMs: retryAtMs(record) };
  }
  return { kind: 'run' };
}

/** spec §5.4: the next durationBeforeRetry after a failure. */
export function nextBackoffMs(current: number): number {
  const next = current === 0 ? backoffMsInitial : Math.min(current * backoffFactor, backoffMsMax);
  assert(next > 0 && next <= backoffMsMax, `backoff ${next} ms out of range`);
  return next;
}
