/**
 * The state of the world: the fold of the log. Desired state of world (DSW: pods and the
 * volumes they need), actual state of world (ASW: attachment and mount pair records),
 * pending operations with their backoff, and the observations the planner needs.
 *
 * The index — its maps, and the volume records (VolumeRecord) that are one map entry per
 * volume — is owned by the fold and updated in place; the records it holds (pods, desired
 * pods, attachments, mounts, operations) are immutable and replaced whole, so an event
 * costs work proportional to the records it touches (PERF.md), never a copy of the world.
 */
import type { AttachmentContext, MountContext } from '../../machines/index.js';
import type {
  CallError,
  CallName,
  NodeAllocatable,
  OperationKind,
  OperationStep,
  OperatorAction,
  OpKey,
  PluginCaps,
  ProvisionRequest,
} from '../events/index.js';
import type { Pod } from '../events/k8s.js';
import type { NodeName, OpId, Seq, UniquePodName, UniqueVolumeName } from '../ids.js';
import type { ClaimBinding } from './binding.js';
import type { ByPod } from './by-pod.js';
import type { ClusterObjects } from './objects.js';
import type { ReferenceIndex, References } from './references.js';
import type { PairState } from './compiled-machine.js';

export type VolumeMode = 'Filesystem' | 'Block';

/** Where a volume comes from, as its plugin needs it (the Spec of seed 001). */
export type VolumeSource =
  | {
      kind: 'csi';
      driver: string;
      volumeHandle: string;
      fsType: string;
      inline: boolean;
      /** csi.volumeAttributes (CSI volume_context), when the source has any. */
      volumeAttributes?: Readonly<Record<string, string>>;
      /** The PV's mountOptions (CSI mount_flags), when it has any. */
      mountOptions?: readonly string[];
      /** An inline volume's pod (CSI ephemeral volume_context). */
      podName?: string;
      podNamespace?: string;
    }
  | { kind: 'emptyDir'; medium: string; sizeLimitBytes: number }
  | { kind: 'hostPath'; path: string; type: string }
  | { kind: 'local'; path: string; fsType: string }
  | ({ kind: 'configMap' | 'secret' } & ContentOptions)
  | { kind: 'downwardAPI'; files: readonly DownwardFile[]; defaultMode?: number }
  | {
      kind: 'projected';
      namespace: string;
      sources: readonly ProjectedPart[];
      defaultMode?: number;
    };

/** `items` entry of a configMap, secret or projected source: key → file path, mode. */
export interface KeyToPath {
  readonly key: string;
  readonly path: string;
  readonly mode?: number;
}

/** What a configMap or secret source (or projection) asks for, in the pod's namespace. */
export interface ContentOptions {
  readonly name: string;
  readonly namespace?: string;
  readonly items?: readonly KeyToPath[];
  readonly defaultMode?: number;
  readonly optional?: boolean;
  /**
   * Where the pod asks for it (`spec.volumes[2].configMap`,
   * `spec.volumes[0].projected.sources[1].secret`): a missing key's error names the field.
   */
  readonly field?: string;
}

/** A downward API file, its content taken from the pod object when the pod resolved. */
export interface DownwardFile {
  readonly path: string;
  readonly content: string;
  readonly mode?: number;
}

export type ProjectedPart =
  | ({ kind: 'configMap' | 'secret' } & ContentOptions)
  | { kind: 'downwardAPI'; files: readonly DownwardFile[] }
  | ({ kind: 'serviceAccountToken' } & ServiceAccountTokenPart);

/** A token the kubelet asks of the TokenRequest API, bound to the pod, for one file. */
export interface ServiceAccountTokenPart {
  readonly path: string;
  readonly serviceAccountName: string;
  /** Absent: the API server's own audiences. */
  readonly audience?: string;
  readonly expirationSeconds: number;
  readonly podName: string;
  readonly podUid: string;
  readonly mode?: number;
}

/** One pod volume resolved to the volume it names (spec §2.6 populator). */
export interface ResolvedVolume {
  readonly outerVolumeSpecName: string;
  /** PV name for PVC-backed volumes, else the pod volume name (spec §0.4). */
  readonly innerVolumeSpecName: string;
  readonly volume: UniqueVolumeName;
  readonly pluginName: string;
  readonly attachable: boolean;
  readonly deviceMountable: boolean;
  readonly requiresRemount: boolean;
  /** spec §4.1: a PV whose access modes contain neither ReadWriteOnce nor ReadWriteOncePod. */
  readonly multiAttachAllowed: boolean;
  readonly volumeMode: VolumeMode;
  /** PV spec.capacity.storage in bytes; 0 = unknown. */
  readonly sizeBytes: number;
  /** PVC status.capacity.storage in bytes; 0 = unknown (spec §4.6 claimSize). */
  readonly claimSizeBytes: number;
  readonly volumeGidValue: string;
  readonly readOnly: boolean;
  readonly accessModes: readonly string[];
  readonly source: VolumeSource;
  /**
   * The claim's name and namespace, for PVC-backed volumes (its capacity follows
   * expansions): the strings the claim object already holds, no key of its own.
   */
  readonly claim?: string | undefined;
  readonly claimNamespace?: string | undefined;
}

export interface PodRecord {
  readonly uid: UniquePodName;
  readonly name: string;
  readonly namespace: string;
  readonly pod: Pod;
  /** Outer names the pod's containers use (all volumes when it lists no containers). */
  readonly expectedVolumes: readonly string[];
  readonly volumes: readonly ResolvedVolume[];
  /** Volumes that could not be processed, by outer name (spec §2.3 podErrors). */
  readonly errors: ReadonlyMap<string, string>;
  /**
   * The objects the resolution read (references.ts): a change to one re-resolves the pod.
   * null when they are exactly what its volumes read (podReferences derives them).
   */
  readonly references: References | null;
  readonly seq: Seq;
}

/** One pod's use of a DSW volume (spec §1.3 PodToMountRec). */
export interface DswPod {
  readonly pod: UniquePodName;
  readonly outerVolumeSpecNames: readonly string[];
  readonly resolved: ResolvedVolume;
  readonly seq: Seq;
}

/**
 * spec §1.3 VolumeToMountRec: the volume record (VolumeRecord) of a volume some pod wants,
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
  /** spec §2.3 MarkVolumesReportedInUse; false while no pod wants it. */
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

/** The cause of each volume's next decision: a Map, or the kubelet's volume records. */
export interface VolumeCauses {
  get(volume: UniqueVolumeName): Seq | undefined;
  has(volume: UniqueVolumeName): boolean;
  set(volume: UniqueVolumeName, cause: Seq): unknown;
  delete(volume: UniqueVolumeName): boolean;
}

/**
 * An attachment pair (volume × this node): its machine state (value and context, held in
 * the record itself: a PairState, so the compiled machine steps it directly) and the spec
 * it was first attached with. Plugin facts come from `spec`.
 */
export interface AttachmentRecord extends PairState<AttachmentContext> {
  readonly volume: UniqueVolumeName;
  readonly node: NodeName;
  /** The spec the volume was first attached with (spec §1.2: not updated later). */
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

/** spec §5.1 OperationRec: a running operation, or a failed one kept for its backoff. */
export interface OpRecord {
  readonly key: OpKey;
  readonly opName: OperationKind;
  readonly pending: boolean;
  /** The running operation, while pending. */
  readonly opId: OpId | null;
  readonly lastError: CallError | null;
  readonly lastErrorTsMs: number;
  /** 0 until the first failure; then 500 ms doubling to 2 min 2 s (spec §5.5). */
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
  lastError: CallError | null;
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
  /** true: CSIDriver objects' attachRequired decides CSI attachability (Kubernetes mode). */
  readonly csiDriverObjects?: boolean;
}

/**
 * The operation book (src/engine/book.ts): what both cores keep about operations, kept
 * by the same code in both folds.
 */
export interface OperationBook {
  /** Operation records by volume (spec §5.1), in insertion order per volume. */
  ops: Map<UniqueVolumeName, OpRecord[]>;
  running: Map<OpId, RunningOp>;
  /** The last error of an operation on each volume, for waits and explanations. */
  lastErrors: Map<UniqueVolumeName, LastError>;
  /** Last event that touched each volume: the cause of the next decision about it. */
  causes: VolumeCauses;
  /** Volumes touched since the planner last looked (incremental planning). */
  dirty: Set<UniqueVolumeName>;
}

/** A list shared by the pod records that hold it (`users` of them). */
export interface SharedList {
  readonly list: readonly string[];
  users: number;
}

export interface LastError {
  readonly message: string;
  readonly seq: Seq;
  readonly tsMs: number;
}

/** A volume being created (provision operations), until CreateVolume answers OK. */
export interface ProvisionRecord {
  readonly request: ProvisionRequest;
  /**
   * A CreateVolume of it may have taken effect (it ran and did not answer with a final
   * error): a claim deleted meanwhile still gets it created under the same name, then
   * deleted (the external-provisioner's "in background" provisioning).
   */
  mayExist: boolean;
}

/**
 * What the provisioner and the pvc-protection controller keep (provisioning.ts): each a
 * small index, so the planner looks at O(what waits), never at every object.
 */
export interface ProvisioningState {
  /** The provisioned volume's unique name → its provisioning, while it runs or may exist. */
  readonly inFlight: Map<UniqueVolumeName, ProvisionRecord>;
  /** The unique name of each PV vole provisioned → the PV's name (reclaim, expansion). */
  readonly provisioned: Map<UniqueVolumeName, string>;
  /** Claim keys deleted while a pod used them: pvc-protection holds them. */
  readonly protectedClaims: Set<string>;
  /** Bound claim keys whose request exceeds their PV's capacity (expansion wanted). */
  readonly resizing: Set<string>;
}

export interface World extends OperationBook {
  /** StorageClasses, provisioning, reclaim, expansion and pvc-protection (provisioning.ts). */
  provisioning: ProvisioningState;
  config: WorldConfig;
  plugins: Map<string, PluginCaps>;
  /** The last event folded; 0 for the empty world. */
  seq: Seq;
  tsMs: number;
  /** seq of the last EngineStarted. */
  engineStartedSeq: Seq;
  /** spec §3.2 populatorHasAddedPods, since the last engine start. */
  sourcesReady: boolean;
  pods: Map<UniquePodName, PodRecord>;
  /** Cluster objects per kind and namespace under their own names (objects.ts). */
  objects: ClusterObjects;
  /** Claim key → the PV the planner bound it to (ClaimBound), with the claim's capacity. */
  bindings: Map<string, ClaimBinding>;
  /** Claim keys neither bound by the log nor by their status: what the binder looks at. */
  unboundClaims: Set<string>;
  /** The object change that asks the planner to look at unbound claims (its cause). */
  bindingCause: Seq;
  /**
   * Object → the pods whose resolution read it, for re-resolution on object changes, under
   * the objects' own names (references.ts): the one pod's name, or a Set when several do.
   */
  podsByObject: ReferenceIndex;
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
   * (src/world/gone.ts). Empty between events.
   */
  maybeGone: UniqueVolumeName[];
  /**
   * The fold's scratch while it folds one event: PV name → the claim bound to it
   * (boundVolumes), walked at most once an event for pods waiting on a binding. Undefined
   * between events.
   */
  takenVolumes: { readonly seq: Seq; readonly taken: ReadonlyMap<string, string> } | undefined;
}
