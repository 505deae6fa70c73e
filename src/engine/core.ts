/**
 * The Core interface: the pure part an Engine drives. A core is a world type, its fold,
 * its planner, its invariants and its snapshot codec, named by a mode; EngineStarted
 * records the mode, and every reader of a log picks the core from it (src/engine/cores.ts).
 * Two cores exist: the kubelet's (src/kubelet) and the attach/detach
 * controller's (src/controller).
 */
import type { Decision, EventOf, NewEvent, VoleEvent } from '../events/index.js';
import type { Seq, UniqueVolumeName } from '../ids.js';
import type { OperationBook } from '../operations/book.js';
import type { CoreReader } from '../operations/reader.js';
import type { SnapshotCodec } from '../operations/snapshot-codec.js';
import type { Violation } from '../operations/violation.js';

export type {
  CoreGauges,
  CoreMetricFamilies,
  CoreReader,
  OperationRef,
  PairKind,
} from '../operations/reader.js';
export type { SnapshotCodec } from '../operations/snapshot-codec.js';
export type { Violation } from '../operations/violation.js';

/** The modes this version knows; EngineStarted.mode names one (absent = kubelet). */
export const engineModes = ['kubelet', 'controller'] as const;
export type EngineMode = (typeof engineModes)[number];

type Started = EventOf<'EngineStarted'>;

/**
 * The kubelet core's configuration: its node and how it attaches, binds claims, serves
 * tokens and sizes downward resources.
 */
export interface KubeletCoreConfig {
  readonly node: string;
  readonly controllerAttachDetach: boolean;
  readonly bindClaims?: boolean;
  readonly tokenRequests?: boolean;
  readonly csiDriverObjects?: boolean;
  readonly allocatable?: Started['allocatable'];
  readonly controller?: never;
}

/** The attach/detach controller's configuration: its timing. It is no node, and names none. */
export interface ControllerCoreConfig {
  readonly controller: NonNullable<Started['controller']>;
  readonly node?: never;
  readonly controllerAttachDetach?: never;
}

/**
 * A core's configuration, as its EngineStarted records it (the engine adds the time, the
 * plugins, its version and the core's mode). Folds read it back from EngineStarted, so a
 * restart and a post-mortem see what the engine ran with.
 */
export type CoreConfig = KubeletCoreConfig | ControllerCoreConfig;

/** What every world has that the engine loop needs: its head and the operation book. */
export interface CoreWorld extends OperationBook {
  seq: Seq;
  tsMs: number;
  /** The seq of the last EngineStarted folded (0: none yet). */
  engineStartedSeq: Seq;
}

export interface CorePlan<O> {
  readonly operations: O[];
  readonly retries: { volume: UniqueVolumeName; atMs: number }[];
  readonly deferred: UniqueVolumeName[];
  /** Decisions that are events themselves (the controller's reports). */
  readonly events?: NewEvent[];
}

export interface PlanOptions {
  /** Only these volumes (the dirty set); every volume of the world when absent. */
  readonly volumes?: Iterable<UniqueVolumeName>;
}

/** What every operation names: the volume it acts on (backpressure re-plans it). */
export interface CoreOperation {
  readonly volume: UniqueVolumeName;
}

export interface Core<W extends CoreWorld, O extends CoreOperation> {
  readonly mode: EngineMode;
  /** What readers ask of its world. */
  readonly reader: CoreReader<W>;
  initialWorld(): W;
  /** Applies one event in place and returns the world (docs/design.md rule 2: pure). */
  fold(world: W, event: VoleEvent): W;
  plan(world: W, nowMs: number, opts: PlanOptions): CorePlan<O>;
  /** What OperationStarted records for the operation. */
  decision(op: O): Decision;
  describe(op: O): string;
  /** The safety invariants that concern one volume, checked over the touched ones. */
  invariants(world: W, volume: UniqueVolumeName): Violation[];
  readonly snapshot: SnapshotCodec<W>;
}

/** What runs a core's operations: an executor (src/execute, src/execute/controller-executor.ts). */
export interface Runner<O extends CoreOperation> {
  /**
   * 'first': an operation waits for the log before its first call only (recorded in
   * EngineStarted, so the crash cut-off knows); absent: before every call.
   */
  readonly durableCalls?: 'first';
  start(op: O): void;
  capacity(): number;
  readonly inFlightCount: number;
  drain(): Promise<void>;
}

/**
 * Checks a core's invariants after each fold, over the volumes touched since the planner
 * last drained them (world.dirty, which always holds the ones the event touched): O(change).
 */
export class InvariantChecker<W extends CoreWorld> {
  checks = 0;
  readonly violations: Violation[] = [];

  constructor(private readonly invariants: (world: W, volume: UniqueVolumeName) => Violation[]) {}

  after(world: W): void {
    for (const volume of world.dirty) {
      this.checks++;
      this.violations.push(...this.invariants(world, volume));
    }
  }
}
