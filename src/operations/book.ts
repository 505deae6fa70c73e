/**
 * The operation book both cores keep (behaviour K5): operation records with their backoff,
 * the operations running and the call each is in, the last error and the cause of the
 * next decision per volume, the dirty set, the crash cut-off, and the claims a plan makes
 * before its operations start. Each core's fold calls these for the operation events and
 * applies the pair steps the call table (calls.ts) names; each planner claims through
 * `Claims`. Pure: no I/O, no clock.
 */
import { fail } from '../assert.js';
import type { CallError, EventOf, OperationKind, OpKey } from '../events/index.js';
import { OpId, type Seq, type UniqueVolumeName } from '../ids.js';
import {
  finishRecord,
  keyString,
  mayRun,
  recordsAfterStart,
  type RunVerdict,
  setRecords,
} from './pending.js';
import type { OperationBook, OpRecord, RunningOp } from './types.js';

export type { OperationBook } from './types.js';

/** Marks a volume for planning, citing `cause` as the reason for the next decision. */
export function touchVolume(book: OperationBook, volume: UniqueVolumeName, cause: Seq): void {
  book.dirty.add(volume);
  book.causes.set(volume, cause);
}

function runningOperation(book: OperationBook, opId: string, seq: number): RunningOp {
  const op = book.running.get(OpId(opId));
  if (op === undefined) fail(`operation ${opId} is not running (seq ${seq})`);
  return op;
}

/** behaviour K5.3 Run: reuse the matching failed record or append one, now pending. */
export function startOperation(
  book: OperationBook,
  event: EventOf<'OperationStarted'>,
  op: Pick<RunningOp, 'volume' | 'pod' | 'node' | 'spec' | 'steps' | 'coveredBy'>,
): RunningOp {
  const records = book.ops.get(op.volume) ?? [];
  const verdict = mayRun(records, event.key, event.op, event.tsMs);
  if (verdict.kind !== 'run')
    fail(
      `operation ${event.op} on ${keyString(event.key)} started while ${verdict.kind} ` +
        `(seq ${event.seq}): never two operations on one key`,
    );
  const opId = OpId(event.opId);
  setRecords(
    book.ops,
    op.volume,
    recordsAfterStart(records, { key: event.key, opName: event.op, opId, tsMs: event.tsMs }),
  );
  if (book.running.has(opId)) fail(`operation ${opId} started twice (seq ${event.seq})`);
  const running: RunningOp = {
    opId,
    op: event.op,
    key: event.key,
    volume: op.volume,
    pod: op.pod,
    spec: op.spec,
    node: op.node,
    startedSeq: event.seq as Seq,
    startedTsMs: event.tsMs,
    cause: event.cause as Seq,
    call: null,
    lastError: null,
    steps: op.steps,
    callsStarted: 0,
    ...(op.coveredBy === undefined ? {} : { coveredBy: op.coveredBy }),
  };
  book.running.set(opId, running);
  return running;
}

/** A call's start or outcome: which call the operation is in, and its last error. */
export function bookCall(
  book: OperationBook,
  event: EventOf<'CallStarted' | 'CallSucceeded' | 'CallFailed'>,
): RunningOp {
  const op = runningOperation(book, event.opId, event.seq);
  if (event.type === 'CallStarted') {
    if (op.call !== null)
      fail(`operation ${op.opId}: ${event.call} started during ${op.call} (seq ${event.seq})`);
    op.call = event.call;
    op.callsStarted = (op.callsStarted ?? 0) + 1;
    return op;
  }
  if (op.call !== event.call) {
    const what = event.type === 'CallSucceeded' ? 'answered' : 'failed';
    fail(`operation ${op.opId}: ${event.call} ${what} while ${op.call} ran (seq ${event.seq})`);
  }
  op.call = null;
  if (event.type === 'CallFailed') {
    op.lastError = event.error;
    recordError(book, op.volume, event.error, event.seq as Seq, event.tsMs);
  }
  return op;
}

function recordError(
  book: OperationBook,
  volume: UniqueVolumeName,
  error: CallError,
  seq: Seq,
  tsMs: number,
): void {
  book.lastErrors.set(volume, { message: error.message, seq, tsMs });
}

/** behaviour K5.4 completion: success deletes the exact record; failure escalates its backoff. */
function complete(
  book: OperationBook,
  op: RunningOp,
  failure: CallError | null,
  at: { seq: Seq; tsMs: number },
): void {
  if (failure !== null && op.lastError === null)
    recordError(book, op.volume, failure, at.seq, at.tsMs);
  finishRecord(book.ops, op.volume, op, { failure, tsMs: at.tsMs, seq: at.seq });
  book.running.delete(op.opId);
  // A success leaves the volume's last error standing only while another operation on it
  // still holds a failure: an error a later remount (or retry) got past is not news.
  if (failure === null && !(book.ops.get(op.volume) ?? []).some((r) => r.lastError !== null))
    book.lastErrors.delete(op.volume);
}

export function finishOperation(
  book: OperationBook,
  event: EventOf<'OperationFinished'>,
): RunningOp {
  const op = runningOperation(book, event.opId, event.seq);
  if (op.call !== null)
    fail(`operation ${op.opId} finished during its ${op.call} call (seq ${event.seq})`);
  const failure =
    event.outcome === 'ok'
      ? null
      : (event.error ?? op.lastError ?? { kind: 'final' as const, message: 'operation failed' });
  complete(book, op, failure, { seq: event.seq as Seq, tsMs: event.tsMs });
  return op;
}

/**
 * docs/design.md crash rule, for EngineStarted: every operation in flight is cut off, oldest
 * first. `pairs` makes its pairs uncertain (the core's part); the operation counts as a
 * failed attempt, so the call that killed the engine is not retried in a tight loop.
 */
export function cutOffOperations(
  book: OperationBook,
  at: { seq: Seq; tsMs: number },
  who: string,
  pairs: (op: RunningOp) => void,
): RunningOp[] {
  const cutOff: CallError = {
    kind: 'uncertain',
    message: `operation cut off: the ${who} stopped while it ran`,
  };
  const ops = [...book.running.values()].sort((a, b) => a.startedSeq - b.startedSeq);
  for (const op of ops) {
    pairs(op);
    recordError(book, op.volume, cutOff, at.seq, at.tsMs);
    op.lastError = cutOff;
    complete(book, op, cutOff, at);
    touchVolume(book, op.volume, at.seq);
  }
  return ops;
}

/** What a planned operation needs for its claim. */
export interface Claimable {
  readonly op: OperationKind;
  readonly volume: UniqueVolumeName;
  readonly key: OpKey;
}

/**
 * Operation records plus the ones this plan already claimed, per volume: a plan never
 * starts two conflicting operations, and a backoff comes back as a retry time.
 */
export class Claims<O extends Claimable> {
  private readonly claimed = new Map<UniqueVolumeName, OpRecord[]>();
  readonly operations: O[] = [];
  readonly retries: { volume: UniqueVolumeName; atMs: number }[] = [];
  constructor(
    private readonly book: Pick<OperationBook, 'ops'>,
    readonly nowMs: number,
  ) {}

  records(volume: UniqueVolumeName): readonly OpRecord[] {
    return this.claimed.get(volume) ?? this.book.ops.get(volume) ?? [];
  }

  /** behaviour K5.6 IsOperationPending(v, "", ""): any pending operation on the volume. */
  anyPending(volume: UniqueVolumeName): boolean {
    return this.records(volume).some((r) => r.pending);
  }

  verdict(op: Claimable): RunVerdict {
    return mayRun(this.records(op.volume), op.key, op.op, this.nowMs);
  }

  /** behaviour K5.3 Run: start it unless a conflicting operation runs or it is in backoff. */
  tryRun(operation: O): void {
    const verdict = this.verdict(operation);
    if (verdict.kind === 'backoff')
      this.retries.push({ volume: operation.volume, atMs: verdict.retryAtMs });
    if (verdict.kind !== 'run') return;
    const pending: OpRecord = {
      key: operation.key,
      opName: operation.op,
      pending: true,
      opId: null,
      lastError: null,
      lastErrorTsMs: 0,
      durationMsBeforeRetry: 0,
    };
    this.claimed.set(operation.volume, [...this.records(operation.volume), pending]);
    this.operations.push(operation);
  }
}
