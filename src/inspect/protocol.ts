/**
 * What the inspector's server sends the page: plain JSON shapes, shared by src/inspect/api.ts
 * (which builds them) and src/inspect/ui (which draws them). Types only, so the browser
 * bundle takes nothing from the server side.
 */
import type {
  CauseStep,
  ForcedDetach,
  PodVerdict,
  StorageView,
  Transition,
  Violation,
  WorldView,
} from '../postmortem/index.js';

export type PairKind = 'attachment' | 'mount';

/** One pair as the list shows it: a volume × node attachment or a volume × pod mount. */
export interface PairRow {
  /** Stable across moments: `attachment|<volume>|<node>` or `mount|<volume>|<pod>`. */
  readonly id: string;
  readonly kind: PairKind;
  readonly volume: string;
  readonly node: string;
  /** The pod's uid (mounts); null for attachments. */
  readonly pod: string | null;
  /** `namespace/name` of the pod when the log named it. */
  readonly podName: string | null;
  /** The machine's state value, e.g. `attached.deviceMounting`. */
  readonly state: string;
  /** False when the pair is back in its initial state and the world no longer holds it. */
  readonly present: boolean;
  readonly uncertain: boolean;
  /** A backoff record stands against the pair (its last operation failed). */
  readonly failing: boolean;
  readonly lastError: string | null;
  /** The seq at which the inspector first saw the pair. */
  readonly firstSeq: number;
  /** Attachment context (empty for mounts). */
  readonly devicePath: string;
  readonly deviceMountPath: string;
  /** Mount context (empty for attachments). */
  readonly outerVolumeSpecName: string;
  readonly remountRequired: boolean;
  /** Operations in flight on the pair. */
  readonly operations: WorldView['operations'];
  readonly backoffs: WorldView['backoffs'];
  /** What the pair waits on, as `vole why` says it (null when the world does not hold it). */
  readonly why?: string | null;
}

/** A ReportRaised event (the controller's Multi-Attach refusals), for people. */
export interface Report {
  readonly seq: number;
  readonly tsMs: number;
  readonly reason: string;
  readonly pod: string;
  readonly volume: string;
  readonly node: string;
  readonly message: string;
}

/** The world at one seq: the full description plus the pair list. */
export interface WorldPayload {
  readonly seq: number;
  readonly head: number;
  readonly view: WorldView;
  readonly pairs: PairRow[];
  /** The reports raised up to this seq (the latest ones). */
  readonly reports: Report[];
  /** StorageClasses, claims and PersistentVolumes at this seq. */
  readonly storage: StorageView;
}

/** One event as the timeline lists it. */
export interface EventSummary {
  readonly seq: number;
  readonly tsMs: number;
  readonly type: string;
  readonly what: string;
  /** failure: a failed call or operation; desired: a desired-state change; op: the rest. */
  readonly tone: 'failure' | 'desired' | 'op' | 'engine';
}

export interface Meta {
  /** The database file's name (not its path). */
  readonly file: string;
  readonly head: number;
  readonly firstSeq: number;
  readonly firstTsMs: number;
  readonly lastTsMs: number;
  /** What the log is about: "node n1", or "the attach/detach controller". */
  readonly title: string;
  readonly version: string;
  /** Seqs of notable events (failures, engine starts) for the timeline's marks. */
  readonly marks: { seq: number; tone: EventSummary['tone'] }[];
}

/**
 * The verdict on a cluster's log up to `toSeq` (`vole judge`): each violation at the event
 * that broke the rule (`atSeq`), the forced detaches, and each pod's wait (from
 * `waitedFromSeq` to `endedAtSeq`, null while it lasts) with the condition that held it
 * and the words `vole judge` prints for it. `judged` is false for a kubelet's log.
 */
export interface VerdictPayload {
  readonly judged: boolean;
  readonly toSeq: number;
  readonly violations: readonly Violation[];
  readonly forcedDetaches: readonly ForcedDetach[];
  readonly waits: readonly (PodVerdict & { readonly text: readonly string[] })[];
}

/** A pushed update (Server-Sent Event `head`): the log grew. */
export interface HeadUpdate {
  readonly head: number;
  readonly lastTsMs: number;
  /** The new events (the last ones when many arrived at once). */
  readonly events: EventSummary[];
  readonly marks: Meta['marks'];
  /** The world at the new head. */
  readonly world: WorldPayload;
}

/** A statechart extracted from a machine definition: states (nested) and transitions. */
export interface ChartNode {
  /** The StateNode id, e.g. `attachment.attached.deviceMounted`. */
  readonly id: string;
  readonly key: string;
  readonly parent: string | null;
  readonly compound: boolean;
  /** The initial child's id, for compound states. */
  readonly initial: string | null;
  /** Events handled without leaving the state (targetless transitions). */
  readonly internal: string[];
}

export interface ChartEdge {
  readonly id: string;
  readonly source: string;
  readonly target: string;
  /** Event names (with guards) that take this transition, one per line. */
  readonly events: { event: string; guard: string | null }[];
}

export interface Chart {
  readonly machine: PairKind;
  readonly root: string;
  /** The machine's initial state's id. */
  readonly initial: string | null;
  readonly nodes: ChartNode[];
  readonly edges: ChartEdge[];
}

export type { CauseStep, StorageView, Transition, WorldView };
