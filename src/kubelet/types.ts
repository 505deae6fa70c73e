/**
 * The state of the world: the fold of the log. Desired state of world (DSW: pods and the
 * volumes they need), actual state of world (ASW: attachment and mount pair records),
 * pending operations with their backoff, and the observations the planner needs.
 *
 * The index — its maps, and the volume records (VolumeRecord) that are one map entry per
 * volume — is owned by the fold and updated in place; the records it holds (pods, desired
 * pods, attachments, mounts, operations) are immutable and replaced whole, so an event
 * costs work proportional to the records it touches (docs/performance.md), never a copy of the world.
 */
import type { AttachmentContext, MountContext } from '../../machines/index.js';
import type {
  CallError,
  CallName,
  NodeAllocatable,
  OperationKind,
  OperationStep,
  OpKey,
  PluginCaps,
  ProvisionRequest,
} from '../events/index.js';
import type { Pod } from '../events/k8s.js';
import type { NodeName, OpId, Seq, UniquePodName, UniqueVolumeName } from '../ids.js';
import type { DesiredIntake } from '../desired/intake.js';
import type { OperatorState } from '../operations/types.js';
// Both cores keep operator requests alike (src/operations/fold-operator.ts folds them).
export type { OperatorRequestRecord, OperatorState } from '../operations/types.js';
import type { StorageBook } from '../binding/provisioning.js';
import type { ByPod } from './by-pod.js';
import type { References } from '../desired/references.js';
import type { PairState } from '../operations/compiled-machine.js';
import type {
  LastError,
  OperationBook,
  OpRecord,
  RunningOp,
  VolumeCauses,
} from '../operations/types.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';

export interface PodRecord {
  readonly uid: UniquePodName;
  readonly name: string;
  readonly namespace: string;
  readonly pod: Pod;
  /** Outer names the pod's containers use (all volumes when it lists no containers). */
  readonly expectedVolumes: readonly string[];
  readonly volumes: readonly ResolvedVolume[];
  /** Volumes that could not be processed, by outer name (behaviour K2.3 podErrors). */
  readonly errors: ReadonlyMap<string, string>;
  /**
   * The objects the resolution read (references.ts): a change to one re-resolves the pod.
   * null when they are exactly what its volumes read (podReferences derives them).
   */
  readonly references: References | null;
  readonly seq: Seq;
}

/** One pod's use of a DSW volume (behaviour K1.3 PodToMountRec). */
export interface DswPod {
  readonly pod: UniquePodName;
  readonly outerVolumeSpecNames: readonly string[];
  readonly resolved: ResolvedVolume;
  readonly seq: Seq;
}

/**
 * behaviour K1.3 VolumeToMountRec: the volume record (VolumeRecord) of a volume some pod wants,
 * as the desired-state view (`world.dsw`) gives it.
 */
export interface DswVolume {
  readonly volume: UniqueVolumeName;
  /** Its plugin's facts are its pods' resolved spec (dswSpec). */
  readonly reportedInUse: boolean;
  /** The pods that want it: the one DswPod bare, a Map from two on (by-pod.ts). */
  readonly pods: ByPod<DswPod>;
}

/**
 * Everything the world keeps about one volume on this node, under one entry of
 * `world.volumes` (volumes.ts): its desired-state entry, its attachment, its mounts and
 * the cause of its next decision. The fold's own: its fields change in place, through the
 * setters of volumes.ts; the records they hold are immutable and replaced whole.
 */
export interface VolumeRecord {
  readonly volume: UniqueVolumeName;
  /** behaviour K2.3 MarkVolumesReportedInUse; false while no pod wants it. */
  reportedInUse: boolean;
  /** The pods that want it (undefined: none, the volume is not in the DSW). */
  pods: ByPod<DswPod> | undefined;
  attachment: AttachmentRecord | undefined;
  /** Its mount records: the one pod's record bare, a Map from two pods on (by-pod.ts). */
  mounts: ByPod<MountRecord> | undefined;
  /** The last event that touched it: the cause of its next decision (0: none yet). */
  cause: Seq;
}

/** How many records hold each part: the views' sizes, kept by the setters. */
export interface VolumeCounts {
  desired: number;
  attachments: number;
  mounts: number;
  causes: number;
}

/** A read-only map by volume over one part of the volume records (volumes.ts). */
export interface VolumeView<V> extends ReadonlyMap<UniqueVolumeName, V> {
  /** Shared by a world's views; written only by the setters of volumes.ts. */
  readonly counts: VolumeCounts;
}

/**
 * An attachment pair (volume × this node): its machine state (value and context, held in
 * the record itself: a PairState, so the compiled machine steps it directly) and the spec
 * it was first attached with. Plugin facts come from `spec`.
 */
export interface AttachmentRecord extends PairState<AttachmentContext> {
  readonly volume: UniqueVolumeName;
  readonly node: NodeName;
  /** The spec the volume was first attached with (behaviour K1.2: not updated later). */
  readonly spec: ResolvedVolume;
  /** seq of the last event that changed this record. */
  readonly seq: Seq;
}

/** A mount pair (volume × pod), the same way: its machine state and the spec it acts on. */
export interface MountRecord extends PairState<MountContext> {
  readonly volume: UniqueVolumeName;
  readonly pod: UniquePodName;
  readonly spec: ResolvedVolume;
  readonly seq: Seq;
}

export interface WorldConfig {
  readonly node: NodeName;
  readonly controllerAttachDetach: boolean;
  /** false: claims are bound elsewhere (cluster mode); this node only reads bindings. */
  readonly bindClaims: boolean;
  /** The node's allocatable as EngineStarted recorded it (undefined: not known). */
  readonly allocatable?: NodeAllocatable | undefined;
  /** true: serviceAccountToken projections resolve (tokens from the TokenRequest API). */
  readonly tokenRequests?: boolean;
  /** 'first': operations waited for the log before their first call only (EngineStarted). */
  readonly durableCalls?: 'first';
  /** true: attaches name the pods whose mounts need no commit of their own (mount-intents.ts). */
  readonly mountIntents?: boolean;
  /** true: CSIDriver objects' attachRequired decides CSI attachability (Kubernetes mode). */
  readonly csiDriverObjects?: boolean;
}

/** A list shared by the pod records that hold it (`users` of them). */
export interface SharedList {
  readonly list: readonly string[];
  users: number;
}

/**
 * What the provisioner and the pvc-protection controller keep (provisioning.ts): each a
 * small index, so the planner looks at O(what waits), never at every object.
 */
/** The node's storage records (the policy's, src/binding/provisioning.ts). */
export type ProvisioningState = StorageBook;

/**
 * The node's world: the desired-state intake both cores share (DesiredIntake: objects,
 * bindings, unbound claims, the pod index) and the node's own records.
 */
export interface World extends OperationBook, DesiredIntake {
  /** StorageClasses, provisioning, reclaim, expansion and pvc-protection (provisioning.ts). */
  provisioning: ProvisioningState;
  config: WorldConfig;
  plugins: Map<string, PluginCaps>;
  /** The last event folded; 0 for the empty world. */
  seq: Seq;
  tsMs: number;
  /** seq of the last EngineStarted. */
  engineStartedSeq: Seq;
  /** behaviour K3.2 populatorHasAddedPods, since the last engine start. */
  sourcesReady: boolean;
  pods: Map<UniquePodName, PodRecord>;
  /**
   * One record per volume (volumes.ts): desired state, attachment, mounts and cause. The
   * four fields below read them as maps by volume; only the fold writes them.
   */
  volumes: Map<UniqueVolumeName, VolumeRecord>;
  dsw: VolumeView<DswVolume>;
  attachments: VolumeView<AttachmentRecord>;
  /** Mount records by volume: the one pod's record bare, a Map from two pods on (by-pod.ts). */
  mounts: VolumeView<ByPod<MountRecord>>;
  causes: VolumeView<Seq> & VolumeCauses;
  /** node.status.volumesAttached of this node (controller mode handshake). */
  volumesAttached: Map<UniqueVolumeName, string>;
  /**
   * Mount intents (docs/reliability.md, "Durable points"): pod → the seq of the attach's
   * OperationStarted that named it in mountsIntended. While the pod is here, its mounts
   * need no commit of their own, and the next EngineStarted takes each of its volumes not
   * known mounted as maybe mounted. Dropped with the pod and at each EngineStarted.
   */
  mountIntents: Map<UniquePodName, Seq>;
  /** Operator requests (vole detach / release / retry) the planner decides and carries out. */
  operator: OperatorState;
  /**
   * One read-only `[name]` list per outer volume name: the expected volumes of every pod
   * with that one volume (and their desired-state entries' outer names) are this array,
   * kept while some pod record holds it.
   */
  oneNameLists: Map<string, SharedList>;
  /**
   * One settled mount context per outer volume name (pairs.ts settledContext), shared by
   * the mount records of every pod mounting a volume under that name: at most 256 names.
   */
  mountContexts: Map<string, MountContext>;
  /**
   * The fold's scratch while it folds one event: volumes the event may have left gone
   * (src/kubelet/gone.ts). Empty between events.
   */
  maybeGone: UniqueVolumeName[];
  /**
   * The fold's scratch while it folds one event: PV name → the claim bound to it
   * (boundVolumes), walked at most once an event for pods waiting on a binding. Undefined
   * between events.
   */
  takenVolumes: { readonly seq: Seq; readonly taken: ReadonlyMap<string, string> } | undefined;
}
