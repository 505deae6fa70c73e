/**
 * The event union: every fact vole knows is one of these, appended to the log.
 *
 * Families (docs/design.md): desired state (pods, objects, reported-in-use), operations (an
 * operation's start, each plugin call's start and outcome, its end) and observations
 * (engine start, node status, host observations). Each event is validated by its zod
 * schema when appended and again when read back for folding.
 */
import { z } from 'zod';
import { compileFastCheck, type FastCheck } from './fast-check.js';
import { eventBase as base } from './base.js';
import { clusterObject, pod } from './k8s.js';
import { provisionedVolume, provisionRequest } from './provision.js';
import {
  csiNodeObserved,
  kubeEventObserved,
  nodeOperationObserved,
  recordedFrom,
  seenAs,
} from './recorded.js';

export { observedAt, recordedFrom, type ObservedAt, type RecordedFrom } from './recorded.js';
export * from './provision.js';

const errorKind = z.enum(['transient', 'uncertain', 'final']);
export const callError = z.object({
  kind: errorKind,
  message: z.string().max(16_384),
  /** NodeExpand's FailedPrecondition (behaviour K0.5): final, and never retried on this node. */
  failedPrecondition: z.boolean().optional(),
});
export type CallError = z.infer<typeof callError>;

/**
 * A CSI driver's capabilities as the core needs them (from its registration, NodeGetInfo,
 * NodeGetCapabilities and ControllerGetCapabilities): which RPCs it answers, and how many
 * of its volumes one node may have attached (0: no limit).
 */
export const csiDriverCaps = z.object({
  publishUnpublish: z.boolean(),
  stageUnstage: z.boolean(),
  expand: z.boolean(),
  singleNodeMultiWriter: z.boolean(),
  maxVolumesPerNode: z.number().int().nonnegative(),
  /** Controller capability CREATE_DELETE_VOLUME: the driver provisions (absent: false). */
  createDelete: z.boolean().optional(),
  /** Controller capability EXPAND_VOLUME (ControllerExpandVolume; absent: false). */
  controllerExpand: z.boolean().optional(),
  /** NodeGetInfo's accessible_topology segments for this node (absent: none). */
  accessibleTopology: z.record(z.string(), z.string()).optional(),
});
export type CsiDriverCaps = z.infer<typeof csiDriverCaps>;

/**
 * One CSI RPC of a plugin call, as metrics derive csi_operations_seconds from it: the gRPC
 * method path, the status code's name (`OK`, `DEADLINE_EXCEEDED`, …) and how long it took.
 */
export const rpcRecord = z.object({
  method: z.string().min(1),
  code: z.string().min(1),
  durationMs: z.number().nonnegative(),
});
export type RpcRecord = z.infer<typeof rpcRecord>;

/** What a plugin can do, decided per plugin (behaviour K0.4 plugin capabilities). */
export const pluginCaps = z.object({
  name: z.string().min(1),
  attachable: z.boolean(),
  deviceMountable: z.boolean(),
  blockMappable: z.boolean(),
  nodeExpandable: z.boolean(),
  requiresFSResize: z.boolean(),
  requiresRemount: z.boolean(),
  /** Present for a CSI driver: volumes are named `kubernetes.io/csi/<driver>^<handle>`. */
  csi: csiDriverCaps.optional(),
});
export type PluginCaps = z.infer<typeof pluginCaps>;

/**
 * The node's allocatable resources as the agent was configured with them (or read from the
 * host) when it started: what a downwardAPI `resourceFieldRef` writes for a limit the
 * container does not set. Recorded so a replay writes the same files without the host.
 */
export const nodeAllocatable = z.object({
  cpuMillis: z.number().int().nonnegative(),
  memoryBytes: z.number().int().nonnegative(),
  ephemeralStorageBytes: z.number().int().nonnegative(),
});
export type NodeAllocatable = z.infer<typeof nodeAllocatable>;

export const operationKinds = [
  'attach',
  'verifyControllerAttached',
  'detach',
  'markDetached',
  'mount',
  'unmount',
  'unmountDevice',
  'expand',
  'provision',
  'deleteVolume',
  'controllerExpand',
] as const;
export type OperationKind = (typeof operationKinds)[number];

/** The plugin calls, by their docs/scenarios.md names (also the keys of scripted faults). */
export const pluginCallNames = [
  'attach',
  'waitForAttach',
  'volumesAreAttached',
  'detach',
  'mountDevice',
  'unmountDevice',
  'setUp',
  'tearDown',
  'nodeExpand',
  'setUpDevice',
  'mapPodDevice',
  'unmapPodDevice',
  'tearDownDevice',
] as const;

/** Plugin calls plus the executor's own steps. */
/** The calls of provisioning (CreateVolume, DeleteVolume, ControllerExpandVolume). */
export const provisionCallNames = ['createVolume', 'deleteVolume', 'controllerExpand'] as const;

export const callNames = [
  ...pluginCallNames,
  'verifyControllerAttached',
  'markDetached',
  ...provisionCallNames,
] as const;
export type CallName = (typeof callNames)[number];

/** What an operator may ask a running agent to do (vole detach / release / retry). */
export const operatorActions = ['detach', 'release', 'retry'] as const;
export type OperatorAction = (typeof operatorActions)[number];
/**
 * The steps of an operation, decided by the planner and recorded in OperationStarted:
 * the executor runs them in order and decides nothing (behaviour K4.7, K4.10–4.12).
 */
export const operationSteps = [
  'waitForAttach',
  'mountDevice',
  'setUp',
  'expand',
  'setUpDevice',
  'map',
  'tearDown',
  'unmap',
  'unmountDevice',
  'tearDownDevice',
] as const;
export type OperationStep = (typeof operationSteps)[number];

/** behaviour K5.1 key (volumeName, podName, nodeName); '' is "any" in the conflict rule. */
export const opKey = z.object({ volume: z.string(), pod: z.string(), node: z.string() });
export type OpKey = z.infer<typeof opKey>;

export const eventSchemas = {
  /** A new engine process took over the log: calls in flight were cut off (crash rule). */
  EngineStarted: z.object({
    ...base,
    type: z.literal('EngineStarted'),
    /**
     * The kubelet's node and whether a controller attaches its volumes; a kubelet log's
     * fold refuses an EngineStarted without them. The controller is no node and writes
     * neither (earlier versions wrote node "controller").
     */
    node: z.string().min(1).optional(),
    controllerAttachDetach: z.boolean().optional(),
    /**
     * false: this node's planner binds no claim; a control plane binds them and the node
     * reads the bindings from the claims' status (cluster mode). Absent: true.
     */
    bindClaims: z.boolean().optional(),
    /**
     * true: serviceAccountToken projections are served, their tokens asked of the API
     * server's TokenRequest API at setUp (Kubernetes mode). Absent: false, they are refused.
     */
    tokenRequests: z.boolean().optional(),
    /**
     * true: CSIDriver objects say whether a CSI driver's volumes need attaching, as in
     * Kubernetes (no object: attach required). Absent: false, the driver's
     * PUBLISH_UNPUBLISH_VOLUME capability says it.
     */
    csiDriverObjects: z.boolean().optional(),
    plugins: z.array(pluginCaps),
    /**
     * 'first': operations wait for the log before their first call only, so the next
     * EngineStarted makes every step of a cut-off operation not started in the log uncertain
     * (docs/reliability.md, "Durable points"). Absent: every CallStarted was durable first.
     */
    durableCalls: z.literal('first').optional(),
    mountIntents: z.boolean().optional(), // attaches name the pods to mount: mount-intents.ts
    /** The node's allocatable resources (downwardAPI resourceFieldRef); absent: unknown. */
    allocatable: nodeAllocatable.optional(),
    version: z.string(),
    /**
     * The core that wrote the log: kubelet (the default) or controller. Any name reads,
     * so that a reader can refuse a mode it does not know with a clear message.
     */
    mode: z.string().min(1).optional(),
    /** Mode `recorded`: where the log's facts come from (nothing was decided or done). */
    recorded: recordedFrom.optional(),
    controller: z
      .object({
        maxWaitForUnmountMs: z.number().int().nonnegative(),
        disableForceDetachOnTimeout: z.boolean(),
        /** true: an external provisioner serves other classes (controller/plan-external.ts). */
        externalProvisioning: z.boolean().optional(),
        /** true: this controller removes the pvc-protection finalizer (cluster mode). */
        pvcProtection: z.boolean().optional(),
      })
      .optional(),
  }),
  /** An event for people (Kubernetes' recorder), e.g. FailedAttachVolume for Multi-Attach. */
  ReportRaised: z.object({
    ...base,
    type: z.literal('ReportRaised'),
    reason: z.string().min(1),
    pod: z.string(),
    volume: z.string(),
    node: z.string(),
    message: z.string(),
  }),
  /** The pod sources have reported every pod once: unmounts and detaches may start (behaviour K3.2). */
  SourcesReady: z.object({ ...base, type: z.literal('SourcesReady') }),
  PodUpserted: z.object({ ...base, type: z.literal('PodUpserted'), pod, ...seenAs }),
  PodRemoved: z.object({
    ...base,
    type: z.literal('PodRemoved'),
    uid: z.string().min(1),
    ...seenAs,
  }),
  ObjectUpserted: z.object({
    ...base,
    type: z.literal('ObjectUpserted'),
    object: clusterObject,
    ...seenAs,
  }),
  ObjectRemoved: z.object({
    ...base,
    type: z.literal('ObjectRemoved'),
    kind: z.enum([
      'PersistentVolume',
      'PersistentVolumeClaim',
      'StorageClass',
      'Node',
      'ConfigMap',
      'Secret',
      'CSIDriver',
      'VolumeAttachment',
    ]),
    name: z.string().min(1),
    namespace: z.string().optional(),
    ...seenAs,
  }),
  CSINodeObserved: csiNodeObserved,
  KubeEventObserved: kubeEventObserved,
  NodeOperationObserved: nodeOperationObserved,
  /**
   * The planner bound a claim to a PersistentVolume, as the persistent-volume controller
   * binds static volumes; `capacityBytes` is the claim's capacity from then on (the PV's
   * size, as claim.status.capacity holds it), raised later by finished expansions.
   */
  ClaimBound: z.object({
    ...base,
    type: z.literal('ClaimBound'),
    namespace: z.string().min(1),
    claim: z.string().min(1),
    volume: z.string().min(1),
    capacityBytes: z.number().nonnegative(),
    /** The seq of the object change that led the planner to bind. */
    cause: z.number().int().nonnegative(),
  }),
  /**
   * The pvc-protection controller's decision: no pod uses the claim being deleted any more,
   * so its finalizer goes and the claim with it (its PV is then Released).
   */
  ClaimFinalizerRemoved: z.object({
    ...base,
    type: z.literal('ClaimFinalizerRemoved'),
    namespace: z.string().min(1),
    claim: z.string().min(1),
    cause: z.number().int().nonnegative(),
  }),
  /**
   * The PV controller's setClaimProvisioner for a class no plugin here provisions with;
   * `selectedNode`: the scheduler's part (WaitForFirstConsumer), when this decision sets it.
   */
  ExternalProvisioningRequested: z.object({
    ...base,
    type: z.literal('ExternalProvisioningRequested'),
    namespace: z.string().min(1),
    claim: z.string().min(1),
    provisioner: z.string().min(1),
    selectedNode: z.string().min(1).optional(),
    cause: z.number().int().nonnegative(),
  }),
  /** The PV controller's syncVolume: the claim the PV's claimRef names is gone: Released. */
  VolumeReleased: z.object({
    ...base,
    type: z.literal('VolumeReleased'),
    pv: z.string().min(1),
    cause: z.number().int().nonnegative(),
  }),
  /** MarkVolumesAsReportedInUse: node.status.volumesInUse as the node last published it. */
  VolumesReportedInUse: z.object({
    ...base,
    type: z.literal('VolumesReportedInUse'),
    volumes: z.array(z.string()),
  }),
  /**
   * The token manager's refresh timer (src/kube/tokens.ts): a service-account token of this
   * pod is older than 80 % of its lifetime or than 24 h, so the pod's projected volumes with
   * serviceAccountToken sources are set up again, with a new token, as the kubelet does.
   */
  TokensRefreshDue: z.object({
    ...base,
    type: z.literal('TokensRefreshDue'),
    pod: z.string().min(1),
  }),
  /** node.status.volumesAttached as the attach/detach controller published it. */
  NodeStatusObserved: z.object({
    ...base,
    type: z.literal('NodeStatusObserved'),
    node: z.string().min(1),
    volumesAttached: z.array(z.object({ name: z.string(), devicePath: z.string() })),
  }),
  /**
   * What a check of the host found for pairs that were uncertain (after a restart): only
   * "definitely absent" settles a pair; "present" leaves it to a retry or a teardown.
   */
  HostObserved: z.object({
    ...base,
    type: z.literal('HostObserved'),
    attachments: z.array(
      z.object({
        volume: z.string(),
        attached: z.boolean().optional(),
        deviceMounted: z.boolean().optional(),
      }),
    ),
    mounts: z.array(z.object({ volume: z.string(), pod: z.string(), mounted: z.boolean() })),
  }),
  /**
   * The controller's periodic check (behaviour C3.7 VerifyVolumesAreAttached): for one node,
   * whether each confirmed attachment still exists. One reported gone is dropped.
   */
  AttachmentsVerified: z.object({
    ...base,
    type: z.literal('AttachmentsVerified'),
    node: z.string().min(1),
    volumes: z.array(z.object({ name: z.string(), attached: z.boolean() })),
  }),
  /**
   * What the API server showed attached when the controller began to lead (behaviour C4.2
   * populateActualStateOfWorld): each Node's volumesAttached (attached) and each
   * VolumeAttachment (attached as its status says), by unique volume name, node and PV.
   * The world adds those it lacks and drops the CSI attachments not among them.
   */
  AttachmentsFound: z.object({
    ...base,
    type: z.literal('AttachmentsFound'),
    attachments: z.array(
      z.object({
        volume: z.string().min(1),
        node: z.string().min(1),
        pv: z.string().min(1),
        attached: z.boolean(),
      }),
    ),
  }),
  OperationStarted: z.object({
    ...base,
    type: z.literal('OperationStarted'),
    opId: z.string().min(1),
    op: z.enum(operationKinds),
    key: opKey,
    volume: z.string().min(1),
    pod: z.string().optional(),
    node: z.string().optional(),
    remount: z.boolean().optional(),
    /** The steps the planner chose, in order (mount, unmount and unmountDevice). */
    steps: z.array(z.enum(operationSteps)).optional(),
    /** Controller detach: check the node's volumesInUse first (false when forced). */
    verifySafeToDetach: z.boolean().optional(),
    /** Controller detach forced past the wait for unmount, and why. */
    forced: z.enum(['timeout', 'out-of-service']).optional(),
    /**
     * An attach the planner refuses to call, and why (a CSI driver's max_volumes_per_node
     * reached): it fails at once and is retried with backoff, so it goes on once a volume of
     * that driver is detached.
     */
    refused: z.string().optional(),
    mountsIntended: z.array(z.string().min(1)).optional(), // attach: src/kubelet/mount-intents.ts
    /** provision: the CreateVolume request and the PV to record. */
    provision: provisionRequest.optional(),
    /** deleteVolume / controllerExpand: the PersistentVolume acted on. */
    pv: z.string().optional(),
    /** controllerExpand: the size the claim asks for. */
    sizeBytes: z.number().nonnegative().optional(),
    /** The seq of the event that led the planner to this operation. */
    cause: z.number().int().nonnegative(),
  }),
  CallStarted: z.object({
    ...base,
    type: z.literal('CallStarted'),
    opId: z.string().min(1),
    call: z.enum(callNames),
    deviceMountPath: z.string().optional(),
  }),
  CallSucceeded: z.object({
    ...base,
    type: z.literal('CallSucceeded'),
    opId: z.string().min(1),
    call: z.enum(callNames),
    devicePath: z.string().optional(),
    deviceMountPath: z.string().optional(),
    sizeBytes: z.number().nonnegative().optional(),
    rpc: rpcRecord.optional(),
    /** createVolume: the volume the driver made. */
    provisioned: provisionedVolume.optional(),
    /** controllerExpand: ControllerExpandVolume's node_expansion_required. */
    nodeExpansionRequired: z.boolean().optional(),
  }),
  CallFailed: z.object({
    ...base,
    type: z.literal('CallFailed'),
    opId: z.string().min(1),
    call: z.enum(callNames),
    error: callError,
    rpc: rpcRecord.optional(),
  }),
  /**
   * A CSI driver registered (plugin registration or `--csi`): what it said about itself,
   * so the fold knows its capabilities and a replay needs no driver.
   */
  CsiDriverRegistered: z.object({
    ...base,
    type: z.literal('CsiDriverRegistered'),
    driver: z.string().min(1),
    endpoint: z.string(),
    /** How it was found: `registration` (plugins_registry/) or `flag` (`--csi`). */
    via: z.enum(['registration', 'flag']),
    vendorVersion: z.string(),
    nodeId: z.string(),
    nodeCapabilities: z.array(z.string()),
    controllerCapabilities: z.array(z.string()),
    caps: pluginCaps,
  }),
  /** A CSI driver went away (its registration socket is gone, or it stopped answering). */
  CsiDriverDeregistered: z.object({
    ...base,
    type: z.literal('CsiDriverDeregistered'),
    driver: z.string().min(1),
    endpoint: z.string(),
    reason: z.string(),
  }),
  OperationFinished: z.object({
    ...base,
    type: z.literal('OperationFinished'),
    opId: z.string().min(1),
    outcome: z.enum(['ok', 'failed']),
    error: callError.optional(),
  }),
  /**
   * An operator asked the running agent (over its root-only socket) to act on a volume:
   * detach it from this node, release (unmount) one pod's volume, or retry now, clearing
   * a backoff. Recorded before anything is decided; the planner decides.
   */
  OperatorRequested: z.object({
    ...base,
    type: z.literal('OperatorRequested'),
    action: z.enum(operatorActions),
    volume: z.string().min(1),
    pod: z.string().min(1).optional(),
    node: z.string().min(1).optional(),
    /** Past the refusal while a pod mount may exist (the override is recorded here). */
    force: z.boolean(),
    reason: z.string().min(1).max(4_096),
  }),
  /**
   * The planner's verdict on an OperatorRequested (its seq): accepted (the action runs
   * through the machines), refused (why), or done (the accepted action completed).
   */
  OperatorRequestDecided: z.object({
    ...base,
    type: z.literal('OperatorRequestDecided'),
    requestSeq: z.number().int().positive(),
    volume: z.string().min(1),
    verdict: z.enum(['accepted', 'refused', 'done']),
    message: z.string(),
  }),
} as const;

export type EventType = keyof typeof eventSchemas;
export const eventTypes = Object.keys(eventSchemas) as EventType[];

export const voleEvent = z.discriminatedUnion('type', [
  eventSchemas.EngineStarted,
  eventSchemas.SourcesReady,
  eventSchemas.ReportRaised,
  eventSchemas.PodUpserted,
  eventSchemas.PodRemoved,
  eventSchemas.ObjectUpserted,
  eventSchemas.ObjectRemoved,
  eventSchemas.ClaimBound,
  eventSchemas.ClaimFinalizerRemoved,
  eventSchemas.ExternalProvisioningRequested,
  eventSchemas.VolumeReleased,
  eventSchemas.VolumesReportedInUse,
  eventSchemas.NodeStatusObserved,
  eventSchemas.TokensRefreshDue,
  eventSchemas.HostObserved,
  eventSchemas.AttachmentsVerified,
  eventSchemas.AttachmentsFound,
  eventSchemas.OperationStarted,
  eventSchemas.CallStarted,
  eventSchemas.CallSucceeded,
  eventSchemas.CallFailed,
  eventSchemas.OperationFinished,
  eventSchemas.OperatorRequested,
  eventSchemas.OperatorRequestDecided,
  eventSchemas.CsiDriverRegistered,
  eventSchemas.CsiDriverDeregistered,
  eventSchemas.CSINodeObserved,
  eventSchemas.KubeEventObserved,
  eventSchemas.NodeOperationObserved,
]);

export type VoleEvent = z.infer<typeof voleEvent>;
export type EventOf<T extends EventType> = Extract<VoleEvent, { type: T }>;
/**
 * A decision as the log records it: the fields of OperationStarted the planner chose
 * (kind, keys, steps, cause). `vole verify` compares whole decisions.
 */
export type Decision = Omit<EventOf<'OperationStarted'>, 'type' | 'seq' | 'tsMs' | 'opId'>;
/** An event before the log gave it a seq. */
export type NewEvent = VoleEvent extends infer E
  ? E extends { seq: number }
    ? Omit<E, 'seq'>
    : never
  : never;

/**
 * Each event type's schema compiled into a predicate (fast-check.ts); absent for types
 * whose schemas use more than the compiler's subset (pods and cluster objects).
 */
const fastChecks = new Map<string, FastCheck>(
  Object.entries(eventSchemas).flatMap(([type, schema]) => {
    const check = compileFastCheck(schema);
    return check === undefined ? [] : [[type, check] as const];
  }),
);

/** The event types the fast lane covers (the rest go through zod alone). */
export const fastCheckedEventTypes: readonly string[] = [...fastChecks.keys()];

export class EventSchemaError extends Error {
  override name = 'EventSchemaError';
}

/**
 * Validates one event read from the log or about to be appended. An event this version
 * cannot read is an error naming its seq and type, never a silently misread event.
 */
export function parseEvent(raw: unknown): VoleEvent {
  if (acceptsEvent(raw)) return raw as VoleEvent;
  const result = voleEvent.safeParse(raw);
  if (result.success) return result.data;
  const r = raw as { seq?: unknown; type?: unknown } | null;
  const issues = result.error.issues
    .slice(0, 3)
    .map((i) => `${i.path.join('.') || '(event)'}: ${i.message}`)
    .join('; ');
  throw new EventSchemaError(
    `event seq ${String(r?.seq)} (${String(r?.type)}) does not match this version's schema: ` +
      `${issues}. Was the log written by a newer vole? Upgrade vole to read it.`,
  );
}

/**
 * The fast lane: true when a predicate compiled from the event type's schema accepts the
 * value exactly as it is (see fast-check.ts); false is no verdict, zod decides.
 */
export function acceptsEvent(raw: unknown): boolean {
  const type =
    typeof raw === 'object' && raw !== null ? (raw as { type?: unknown }).type : undefined;
  const fast = typeof type === 'string' ? fastChecks.get(type) : undefined;
  return fast !== undefined && fast(raw);
}

export const eventCodec = { parse: parseEvent, accepts: acceptsEvent };
