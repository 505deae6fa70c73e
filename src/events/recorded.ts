/**
 * The facts of a recorded log (`vole record`, `vole import --audit-log`): where each came
 * from, and the two kinds of fact no core folds (CSINodes, Kubernetes Events about volumes).
 */
import { z } from 'zod';
import { eventBase as base } from './base.js';
import { csiNode } from './k8s.js';

/**
 * Where a recorded fact came from (`vole record`, `vole import --audit-log`): the object's
 * resourceVersion and uid as the API server gave them, when it was seen (RFC 3339, as
 * precise as the source: the recorder's clock, or the audit entry's
 * requestReceivedTimestamp), how (a list, a watch event, an audit entry) and, from an audit
 * log, who changed it with which verb. A relist or a restart that sees the same
 * uid+resourceVersion again logs nothing.
 */
export const observedAt = z.object({
  resourceVersion: z.string(),
  uid: z.string().optional(),
  at: z.string().min(1),
  via: z.enum(['list', 'watch', 'audit']),
  /** The audit entry's user.username (audit only). */
  user: z.string().optional(),
  /** The audit entry's verb: create, update, patch or delete (audit only). */
  verb: z.string().optional(),
});
export type ObservedAt = z.infer<typeof observedAt>;

/** The optional `observed` of PodUpserted, PodRemoved, ObjectUpserted and ObjectRemoved. */
export const seenAs = { observed: observedAt.optional() };

/** What a recorded log was recorded from, as its EngineStarted says. */
export const recordedFrom = z.object({
  /** `api-server`: `vole record` watched it; `audit-log`: `vole import --audit-log`. */
  source: z.enum(['api-server', 'audit-log']),
  /** The API server's URL, or the audit log's path. */
  origin: z.string(),
});
export type RecordedFrom = z.infer<typeof recordedFrom>;

/** The involved object of a Kubernetes Event. */
const involvedObject = z.object({
  kind: z.string(),
  namespace: z.string().optional(),
  name: z.string(),
  uid: z.string().optional(),
});

/**
 * A recorded CSINode (the drivers registered on a node): `object` as the API server gave
 * it, absent when the CSINode was deleted. No core folds it.
 */
export const csiNodeObserved = z.object({
  ...base,
  type: z.literal('CSINodeObserved'),
  name: z.string().min(1),
  object: csiNode.optional(),
  observed: observedAt,
});
/**
 * A recorded Kubernetes Event about volumes (core/v1 Event; events.k8s.io/v1 fields mapped
 * to the same names): FailedAttachVolume's Multi-Attach error, FailedMount's timeout, a
 * claim's ProvisioningFailed. Each new resourceVersion of an Event (its count grew) is one.
 */
export const kubeEventObserved = z.object({
  ...base,
  type: z.literal('KubeEventObserved'),
  /** The Event object's own namespace and name. */
  namespace: z.string(),
  name: z.string().min(1),
  reason: z.string(),
  message: z.string().max(16_384),
  /** Normal or Warning. */
  eventType: z.string(),
  involvedObject,
  /** source.component (or reportingController), e.g. kubelet, attachdetach-controller. */
  component: z.string(),
  /** source.host (or reportingInstance): the node of a kubelet's Event. */
  host: z.string().optional(),
  firstTimestamp: z.string().optional(),
  lastTimestamp: z.string().optional(),
  count: z.number().int().nonnegative().optional(),
  observed: observedAt,
});

/**
 * A volume operation a node's kubelet or the kube-controller-manager wrote in its own log
 * (klog text, `vole import --kubelet-log NODE=FILE --controller-log FILE`): the node's view,
 * which the API never shows. `operation` is Kubernetes' own name of the step as the log
 * line gives it (`MountVolume.SetUp`, `operationExecutor.MountVolume`,
 * `AttachVolume.Attach`, `attacherDetacher.DetachVolume`, `UnmountDevice`…). No core folds it.
 */
export const nodeOperationObserved = z.object({
  ...base,
  type: z.literal('NodeOperationObserved'),
  component: z.enum(['kubelet', 'kube-controller-manager']),
  /** The node the operation is for (the kubelet's own node, or the one the line names). */
  node: z.string(),
  operation: z.string().min(1),
  outcome: z.enum(['started', 'succeeded', 'failed']),
  /** The UniqueVolumeName (`kubernetes.io/csi/<driver>^<handle>`, `kubernetes.io/configmap/<uid>-<name>`). */
  volume: z.string().min(1),
  /** The volume's name in the pod or the PV's name, as the line gives it. */
  volumeSpecName: z.string().optional(),
  /** The pod the line names: its UID, and its namespace and name when the line has them. */
  pod: z
    .object({
      uid: z.string().optional(),
      namespace: z.string().optional(),
      name: z.string().optional(),
    })
    .optional(),
  error: z.string().max(4096).optional(),
  /** Where it was read: the file, its line (from 1), the line's time with the year supplied. */
  logged: z.object({ file: z.string(), line: z.number().int().positive(), at: z.string().min(1) }),
});
