/**
 * Nested pending operations (behaviour K5): the conflict rule between operation keys, the
 * choice of "the" matching record, and exponential backoff. Pure functions over the
 * world's operation records; the fold changes records, the planner only asks.
 */
import { fail } from '../assert.js';
import { backoffFactor, backoffMsInitial, backoffMsMax } from '../constants.js';
import type { CallError, OperationKind, OpKey } from '../events/index.js';
import type { OpId } from '../ids.js';
import type { OpRecord } from './types.js';

/** behaviour K5.2: do two keys conflict? An empty part matches anything. */
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
 * behaviour K5.2 isOperationExists: the first pending match wins; otherwise an exact match,
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
 * allowed at lastError + duration (behaviour K5.5 says strictly after; on a virtual clock the
 * planner wakes exactly then, and docs/scenarios.md's "ok at 0.5 s" needs the boundary).
 */
export function retryAtMs(record: OpRecord): number {
  return record.lastErrorTsMs + record.durationMsBeforeRetry;
}

export type RunVerdict =
  | { kind: 'run' }
  | { kind: 'alreadyExists'; record: OpRecord }
  | { kind: 'backoff'; record: OpRecord; retryAtMs: number };

/** behaviour K5.3 Run, as a question: may `opName` start on `key` at `nowMs`? */
export function mayRun(
  records: readonly OpRecord[],
  key: OpKey,
  opName: OperationKind,
  nowMs: number,
): RunVerdict {
  const index = findMatch(records, key);
  if (index === -1) return runVerdict;
  const record = records[index]!;
  if (record.pending) return { kind: 'alreadyExists', record };
  const inBackoff = nowMs < retryAtMs(record);
  if (inBackoff && record.opName === opName) {
    return { kind: 'backoff', record, retryAtMs: retryAtMs(record) };
  }
  return runVerdict;
}

/** The common answer, allocated once (the fold asks on every OperationStarted). */
const runVerdict: RunVerdict = Object.freeze({ kind: 'run' });

/** behaviour K5.4: the next durationBeforeRetry after a failure. */
export function nextBackoffMs(current: number): number {
  const next = current === 0 ? backoffMsInitial : Math.min(current * backoffFactor, backoffMsMax);
  if (!(next > 0 && next <= backoffMsMax)) fail(`backoff ${next} ms out of range`);
  return next;
}

/**
 * behaviour K5.3 Run, as a change of the records: reuse the matching failed record (reset when
 * a different operation takes it over inside its backoff window) or append one, pending.
 */
export function recordsAfterStart(
  records: readonly OpRecord[],
  start: { key: OpKey; opName: OperationKind; opId: OpId; tsMs: number },
): OpRecord[] {
  const index = findMatch(records, start.key);
  const fresh: OpRecord = {
    key: start.key,
    opName: start.opName,
    pending: true,
    opId: start.opId,
    lastError: null,
    lastErrorTsMs: 0,
    durationMsBeforeRetry: 0,
  };
  if (index === -1) return records.length === 0 ? [fresh] : [...records, fresh];
  const next = [...records];
  const old = records[index]!;
  const reset = old.opName !== start.opName && start.tsMs < retryAtMs(old);
  next[index] = reset
    ? fresh
    : { ...old, key: start.key, opName: start.opName, pending: true, opId: start.opId };
  return next;
}

/**
 * behaviour K5.4 completion: success deletes the exact record (a fresh start next time);
 * failure keeps it, not pending, with its backoff escalated from `tsMs`. Undefined when
 * there is no record with exactly this key (a corrupt log).
 */
export function recordsAfterFinish(
  records: readonly OpRecord[],
  key: OpKey,
  failure: CallError | null,
  tsMs: number,
): OpRecord[] | undefined {
  let index = -1;
  for (let i = 0; i < records.length && index === -1; i++) {
    if (keysEqual(records[i]!.key, key)) index = i;
  }
  if (index === -1) return undefined;
  const record = records[index]!;
  if (failure === null) {
    return records.length === 1 ? [] : records.filter((_, i) => i !== index);
  }
  const next = [...records];
  next[index] = {
    ...record,
    pending: false,
    opId: null,
    lastError: failure,
    lastErrorTsMs: tsMs,
    durationMsBeforeRetry: nextBackoffMs(record.durationMsBeforeRetry),
  };
  return next;
}

/** Stores a volume's records, dropping the entry when none are left. */
export function setRecords<V>(ops: Map<V, OpRecord[]>, volume: V, records: OpRecord[]): void {
  if (records.length === 0) ops.delete(volume);
  else ops.set(volume, records);
}

/**
 * behaviour K5.4 for a fold: the operation's record finished, stored back. A missing record
 * means a corrupt log or an engine bug: it fails an assertion naming the operation.
 */
export function finishRecord<V>(
  ops: Map<V, OpRecord[]>,
  volume: V,
  op: { opId: string; key: OpKey },
  outcome: { failure: CallError | null; tsMs: number; seq: number },
): void {
  const next = recordsAfterFinish(ops.get(volume) ?? [], op.key, outcome.failure, outcome.tsMs);
  if (next === undefined)
    fail(`operation ${op.opId}: no record for ${keyString(op.key)} (seq ${outcome.seq})`);
  setRecords(ops, volume, next);
}
