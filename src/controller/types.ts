/**
 * The attach/detach controller's world (behaviour C1): desired
 * attachments per (volume, node) from scheduled pods, actual attachments with their
 * detach timers, what each node reports in use, and what the controller publishes as
 * node.status.volumesAttached. Same conventions as the kubelet world: index maps owned
 * by the fold, immutable records, planning over dirty volumes.
 */
import type { AttachmentContext } from '../../machines/index.js';
import type { OpKey, PluginCaps, ProvisionRequest } from '../events/index.js';
import type { Pod } from '../events/k8s.js';
import type { DesiredIntake } from '../desired/intake.js';
import type { References } from '../desired/references.js';
import type { NodeName, Seq, UniquePodName, UniqueVolumeName } from '../ids.js';
import type { StorageBook } from '../binding/provisioning.js';
import type { OperatorState } from '../operations/types.js';
import type { OperationBook } from '../operations/types.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';
import { assert } from '../assert.js';
import { touchVolume } from '../operations/book.js';
import { type OneOrMany, valuesOf } from '../desired/one-or-many.js';

export interface ControllerConfig {
  /** ReconcilerMaxWaitForUnmountDuration: 6 min in Kubernetes. */
  readonly maxWaitForUnmountMs: number;
  readonly disableForceDetachOnTimeout: boolean;
  /** Kubernetes' external-provisioner provisions and deletes (plan-external.ts). */
  readonly externalProvisioning?: boolean;
  /**
   * This controller is the pvc-protection controller (cluster mode on etcd, the simulation);
   * absent: the API server's kube-controller-manager is (Kubernetes mode, older logs).
   */
  readonly pvcProtection?: boolean;
}

/** What the controller knows of a Node object (behaviour C1.4). */
export interface NodeRecord {
  readonly name: NodeName;
  /** The Node object exists (a deleted node keeps its last volumesInUse, behaviour C4.6). */
  readonly exists: boolean;
  /** Carries volumes.kubernetes.io/controller-managed-attach-detach. */
  readonly managed: boolean;
  readonly ready: boolean;
  readonly outOfService: boolean;
  /** node.status.volumesInUse as the node's agent last reported it: MountedByNode. */
  readonly volumesInUse: ReadonlySet<string>;
}

export interface ControllerPod {
  readonly uid: UniquePodName;
  readonly pod: Pod;
  readonly node: NodeName | null;
  /**
   * Attachable volumes of the pod (the only ones the controller handles): one bare (most
   * pods), else a list (`volumesOf` reads either).
   */
  readonly volumes: AttachableVolumes;
  /**
   * The objects its resolution read (`[kind, name, …]`, references.ts): a change to one
   * resolves it again. Its node is indexed too, from `node` (not held here twice).
   */
  readonly references: References;
  readonly terminated: boolean;
  readonly seq: Seq;
}

/** A pod's attachable volumes: one bare, else a list (none: one shared empty list). */
export type AttachableVolumes = ResolvedVolume | readonly ResolvedVolume[];

const noVolumes: readonly ResolvedVolume[] = Object.freeze([]);

function isVolumeList(held: AttachableVolumes): held is readonly ResolvedVolume[] {
  return Array.isArray(held);
}

/**
 * The attachable volumes, as a record holds them: one bare (a list of one took 56 bytes a
 * pod), none as the shared empty list, else the resolution's own array when all are, or a
 * copy of exactly their length (`filter` grows its array by 16 slots: 128 bytes a pod).
 */
export function attachableOf(volumes: readonly ResolvedVolume[]): AttachableVolumes {
  let count = 0;
  let one: ResolvedVolume | undefined;
  for (const v of volumes) {
    if (!v.traits.attachable) continue;
    count++;
    one = v;
  }
  if (count === 0) return noVolumes;
  if (count === 1) return one!;
  return count === volumes.length ? volumes : volumes.filter((v) => v.traits.attachable).slice();
}

/** A record's attachable volumes as a list (a bare one in a list of its own). */
export function volumesOf(held: AttachableVolumes): readonly ResolvedVolume[] {
  return isVolumeList(held) ? held : [held];
}

/**
 * One (volume, node) pair of the controller: behaviour C1.1 VolumeToAttach when some pod scheduled to
 * the node wants the volume, and behaviour C1.2 the entry of attachedVolumes when it is attached in
 * any state, in one record (one object and one map entry a pair where a desired entry and
 * an attachment were two of each: 72 + 96 bytes and two entries, now 120 and one). A pair
 * no pod wants has `pods` null; a pair not attached is in the attachment machine's initial
 * state, `detached` (attachment-record.ts makes both halves). Neither: no record.
 */
export interface ControllerPair {
  readonly volume: UniqueVolumeName;
  readonly node: NodeName;
  /**
   * The pods that want it (one bare, a Set from two; their names are in their records);
   * null: none (an attachment no pod wants, to detach).
   */
  readonly pods: OneOrMany<UniquePodName> | null;
  /** The spec it is desired with (its first pod's); null while no pod wants it. */
  readonly desiredSpec: ResolvedVolume | null;
  /** The Multi-Attach error was reported for this desire (once, behaviour C3.4); false when undesired. */
  readonly multiAttachErrorReported: boolean;
  /**
   * The spec it was first attached with (its plugin, `traits.pluginName`); null: not attached.
   * Mostly the desired spec itself; another after its pod was resolved again, or for an
   * attachment found at takeover.
   */
  readonly attachedSpec: ResolvedVolume | null;
  /**
   * The attachment machine's state (its atomic path, `attached.deviceMounted`), and the
   * context's fields that change with each attach and detach: the record is its machine
   * state. The device mount's (which the controller's steps leave as they start) are in
   * `device`, one object for every record where they are so.
   */
  readonly value: string;
  readonly devicePath: AttachmentContext['devicePath'];
  readonly callFrom: AttachmentContext['callFrom'];
  /** The rest of the context: the shared `startingDevice` unless a step changed it. */
  readonly device: AttachmentDevice;
  /** When the detach was first considered (SetDetachRequestTime); null = not waiting. */
  readonly detachRequestedAtMs: number | null;
  /** The seq of the attachment's last step; 0 while not attached. */
  readonly seq: Seq;
}

/** behaviour C1.1 VolumeToAttach: a pair some pod wants on its node. */
export interface DesiredAttachment extends ControllerPair {
  readonly pods: OneOrMany<UniquePodName>;
  readonly desiredSpec: ResolvedVolume;
}

/** behaviour C1.2 one entry of attachedVolumes: a pair attached in some state (not `detached`). */
export interface ControllerAttachment extends ControllerPair {
  readonly attachedSpec: ResolvedVolume;
}

/** Whether some pod wants the pair on its node. */
export function isDesired(pair: ControllerPair): pair is DesiredAttachment {
  return pair.pods !== null;
}

/** Whether the pair is attached in some state (attaching, uncertain, detaching included). */
export function isAttached(pair: ControllerPair): pair is ControllerAttachment {
  return pair.attachedSpec !== null;
}

/** The desired attachment of `key` (`volume@node`), if some pod wants it. */
export function desiredAt(
  world: Pick<ControllerWorld, 'pairs'>,
  key: string,
): DesiredAttachment | undefined {
  const pair = world.pairs.get(key);
  return pair !== undefined && isDesired(pair) ? pair : undefined;
}

/** The attachment of `key` (`volume@node`), if attached in some state. */
export function attachmentAt(
  world: Pick<ControllerWorld, 'pairs'>,
  key: string,
): ControllerAttachment | undefined {
  const pair = world.pairs.get(key);
  return pair !== undefined && isAttached(pair) ? pair : undefined;
}

/** Every desired attachment, in the pairs' order. */
export function* allDesired(world: Pick<ControllerWorld, 'pairs'>): Generator<DesiredAttachment> {
  for (const pair of world.pairs.values()) if (isDesired(pair)) yield pair;
}

/** Every attachment (in any state), in the pairs' order. */
export function* allAttachments(
  world: Pick<ControllerWorld, 'pairs'>,
): Generator<ControllerAttachment> {
  for (const pair of world.pairs.values()) if (isAttached(pair)) yield pair;
}

/** The fields of an attachment's context about its device mount. */
export type AttachmentDevice = Readonly<
  Pick<AttachmentContext, 'deviceMountPath' | 'sizeBytes' | 'inUseExpansionError' | 'deviceFrom'>
>;

/**
 * The controller's world: the desired-state intake both cores share (DesiredIntake:
 * objects, bindings, unbound claims, the pod index, which indexes pods by node too) and
 * the controller's own records.
 */
/** What the leading controller's provisioner, resizer and pvc-protection keep. */
/** The controller's storage records (the policy's, src/binding/provisioning.ts). */
export type ControllerProvisioning = StorageBook;

/**
 * The controller's world: the desired-state intake both cores share (DesiredIntake:
 * objects, bindings, unbound claims, the pod index, which indexes pods by node too) and
 * the controller's own records.
 */
export interface ControllerWorld extends OperationBook, DesiredIntake {
  config: ControllerConfig;
  plugins: Map<string, PluginCaps>;
  seq: Seq;
  tsMs: number;
  engineStartedSeq: Seq;
  pods: Map<UniquePodName, ControllerPod>;
  nodes: Map<NodeName, NodeRecord>;
  /**
   * The (volume, node) pairs desired, attached, or both, keyed `volume@node`
   * (`desiredAt`, `attachmentAt` and their iterators read the halves).
   */
  pairs: Map<string, ControllerPair>;
  /**
   * The nodes each volume is desired on or attached to: what planning one volume and
   * its detach timers read, so an event costs O(change), not O(attachments).
   */
  nodesByVolume: Map<UniqueVolumeName, OneOrMany<NodeName>>;
  /** The volumes attached (in any state) to each node: what a Node update touches. */
  volumesByNode: Map<NodeName, Set<UniqueVolumeName>>;
  /** volumesToReportAsAttached per node (behaviour C1.2): what node.status.volumesAttached shows. */
  reported: Map<NodeName, Set<UniqueVolumeName>>;
  /** The volumes the event being folded touched (the fold's scratch; empty between events). */
  touched: Set<UniqueVolumeName>;
  /** Operator requests (`vole detach` to the controller) the planner decides and carries out. */
  operator: OperatorState;
  /** Dynamic provisioning: CreateVolume in flight, the provisioned PVs (reclaimed on release). */
  provisioning: ControllerProvisioning;
}

export function pairKey(volume: string, node: string): string {
  return `${volume}@${node}`;
}

/** Whether an EngineStarted names the plugins the world has, with the same capabilities. */
export function samePluginCaps(
  before: ReadonlyMap<string, PluginCaps>,
  after: readonly PluginCaps[],
): boolean {
  return (
    before.size === after.length &&
    after.every((p) => JSON.stringify(before.get(p.name)) === JSON.stringify(p))
  );
}

/**
 * EngineStarted with the same plugins: a pod's record is resolved again on every change of
 * an object or binding it read, so every record stands, and each desired attachment is
 * touched (the first plan looks at it) as taking its pods out and putting them back did:
 * an entry of one pod was made anew then, its Multi-Attach error not yet reported.
 */
export function touchDesired(world: ControllerWorld): void {
  for (const [key, pair] of world.pairs) {
    if (!isDesired(pair)) continue;
    if (pair.multiAttachErrorReported && !(pair.pods instanceof Set))
      world.pairs.set(key, { ...pair, multiAttachErrorReported: false });
    touchVolume(world, pair.volume, world.seq);
    world.touched.add(pair.volume);
  }
}

/** The pods of a desired attachment with their namespaces and names, from their records. */
export function desiredPods(
  world: Pick<ControllerWorld, 'pods'>,
  entry: DesiredAttachment,
): { uid: UniquePodName; namespace: string; name: string }[] {
  return [...valuesOf(entry.pods)].map((uid) => {
    const pod = world.pods.get(uid)?.pod;
    assert(
      pod !== undefined,
      () => `desired attachment ${entry.volume}@${entry.node}: pod ${uid} has no record`,
    );
    return { uid, namespace: pod.metadata.namespace ?? 'default', name: pod.metadata.name };
  });
}

/** An operation the controller's planner decides (plan.ts, plan-provision.ts). */
export interface ControllerOperation {
  /** provision, deleteVolume, controllerExpand: the provisioner's (plan-provision.ts), node ''. */
  readonly op: 'attach' | 'detach' | 'provision' | 'deleteVolume' | 'controllerExpand';
  readonly volume: UniqueVolumeName;
  readonly node: NodeName;
  readonly key: OpKey;
  readonly cause: Seq;
  readonly verifySafeToDetach?: boolean;
  readonly forced?: 'timeout' | 'out-of-service';
  /** provision: the CreateVolume request. */
  readonly provision?: ProvisionRequest;
  /** provision: why it fails before CreateVolume (a reserved class parameter, topology). */
  readonly refused?: string;
  /** deleteVolume, controllerExpand: the PersistentVolume. */
  readonly pv?: string;
  /** controllerExpand: the size the claim asks for. */
  readonly sizeBytes?: number;
}
