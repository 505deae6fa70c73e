/**
 * What both cores keep about operations (behaviour K5): the records with their backoff, the
 * running operations and the book that holds them. The fold of each core keeps them by the
 * same code (book.ts).
 */
import type {
  CallError,
  CallName,
  OperationKind,
  OperationStep,
  OperatorAction,
  OpKey,
} from '../events/index.js';
import type { NodeName, OpId, Seq, UniquePodName, UniqueVolumeName } from '../ids.js';
import type { ResolvedVolume } from './volume-spec.js';

/** The cause of each volume's next decision: a Map, or the kubelet's volume records. */
export interface VolumeCauses {
  get(volume: UniqueVolumeName): Seq | undefined;
  has(volume: UniqueVolumeName): boolean;
  set(volume: UniqueVolumeName, cause: Seq): unknown;
  delete(volume: UniqueVolumeName): boolean;
}

/** behaviour K5.1 OperationRec: a running operation, or a failed one kept for its backoff. */
export interface OpRecord {
  readonly key: OpKey;
  readonly opName: OperationKind;
  readonly pending: boolean;
  /** The running operation, while pending. */
  readonly opId: OpId | null;
  readonly lastError: CallError | null;
  readonly lastErrorTsMs: number;
  /** 0 until the first failure; then 500 ms doubling to 2 min 2 s (behaviour K5.5). */
  readonly durationMsBeforeRetry: number;
}

/**
 * An operation between its OperationStarted and OperationFinished. Unlike the pair records,
 * its two call fields change in place (the fold's own scratch: two writes per plugin call
 * instead of a 12-field copy); nothing keeps an old version of a running operation.
 */
export interface RunningOp {
  readonly opId: OpId;
  readonly op: OperationKind;
  readonly key: OpKey;
  readonly volume: UniqueVolumeName;
  readonly pod: UniquePodName | null;
  readonly node: NodeName | null;
  readonly startedSeq: Seq;
  readonly startedTsMs: number;
  readonly cause: Seq;
  /**
   * The desired spec when the operation started (null for teardown of undesired volumes).
   * Captured then, as the kubelet's generated operation captures it: later DSW changes do
   * not change what a running operation acts on.
   */
  readonly spec: ResolvedVolume | null;
  /** The plugin call in flight, if any: what a crash leaves uncertain. */
  call: CallName | null;
  /**
   * The operation's steps when only its first call waited for the log (config.durableCalls
   * 'first'): a crash leaves those not started in the log uncertain too. Undefined: every
   * call's CallStarted was durable before it ran (one call, an older log or snapshot).
   */
  readonly steps?: readonly OperationStep[] | undefined;
  /** CallStarted events folded for the operation (with `steps`). */
  callsStarted?: number;
  /**
   * A mount the pod's mount intent covers: the seq of the attach's OperationStarted that
   * named the pod. Its first call waits only for that seq, not for its own OperationStarted,
   * so a crash may have lost any of its CallStarted events (docs/reliability.md).
   */
  readonly coveredBy?: Seq;
  lastError: CallError | null;
}

/**
 * The operation book (src/operations/book.ts): what both cores keep about operations, kept
 * by the same code in both folds.
 */
export interface OperationBook {
  /** Operation records by volume (behaviour K5.1), in insertion order per volume. */
  ops: Map<UniqueVolumeName, OpRecord[]>;
  running: Map<OpId, RunningOp>;
  /** The last error of an operation on each volume, for waits and explanations. */
  lastErrors: Map<UniqueVolumeName, LastError>;
  /** Last event that touched each volume: the cause of the next decision about it. */
  causes: VolumeCauses;
  /** Volumes touched since the planner last looked (incremental planning). */
  dirty: Set<UniqueVolumeName>;
}

export interface LastError {
  readonly message: string;
  readonly seq: Seq;
  readonly tsMs: number;
}

/** An operator's request (OperatorRequested), as the planner sees it. */
export interface OperatorRequestRecord {
  readonly seq: Seq;
  readonly action: OperatorAction;
  readonly volume: UniqueVolumeName;
  readonly pod: UniquePodName | null;
  readonly node: string | null;
  readonly force: boolean;
  readonly reason: string;
}

/** Operator requests: undecided ones, and accepted detach/release ones still under way. */
export interface OperatorState {
  readonly pending: Map<UniqueVolumeName, OperatorRequestRecord[]>;
  readonly holds: Map<UniqueVolumeName, OperatorRequestRecord[]>;
}
