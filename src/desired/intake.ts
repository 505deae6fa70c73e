/**
 * The desired-state intake both cores fold through: the kubelet's world (src/kubelet/) and
 * the attach/detach controller's (src/controller/) take the same events about pods,
 * cluster objects and claims, and keep them here the same way:
 *
 * - the cluster objects (objects.ts): an upsert or removal, the same-content check;
 * - which pods read which object (references.ts), so a changed object resolves exactly
 *   its readers again (the core says what "again" means for its own pod record);
 * - the claims waiting for the binder (`unboundClaims`), the decisions it recorded
 *   (`bindings`), and the mark that asks the planner to look at claims (askForBinding);
 * - the terminated-pod rule and a pod's UID.
 *
 * Each core keeps what is its own: the node its desired state per pod and volume, the
 * controller its attachments per node. Pure; the maps are the fold's own, changed in
 * place, and the records they hold are plain literals, replaced whole.
 */
import { fail } from '../assert.js';
import { bindingVolume, type ClaimBinding, forgetClaim, trackClaim } from '../binding/claims.js';
import type { EventOf } from '../events/index.js';
import { type ClusterObject, objectKey, type Pod } from '../events/k8s.js';
import { type Seq, UniquePodName, type UniqueVolumeName } from '../ids.js';
import type { ClusterObjects } from './objects.js';
import {
  anyPersistentVolumeName,
  podsReferencing,
  type ReferenceIndex,
  type References,
} from './references.js';

/** What the intake keeps of a world, kubelet's or controller's. */
export interface DesiredIntake {
  /** The event being folded. */
  seq: Seq;
  /** Cluster objects per kind and namespace under their own names (objects.ts). */
  readonly objects: ClusterObjects;
  /** Claim key → the PV the planner bound it to (ClaimBound), with the claim's capacity. */
  readonly bindings: Map<string, ClaimBinding>;
  /** Claim keys neither bound by the log nor by their status: what the binder looks at. */
  readonly unboundClaims: Set<string>;
  /** The object change that asks the planner to look at unbound claims (its cause). */
  bindingCause: Seq;
  /**
   * Object → the pods whose resolution read it, for re-resolution on object changes, under
   * the objects' own names (references.ts): the one pod's name, or a Set when several do.
   * Built again from the pods when a snapshot is read.
   */
  podsByObject: ReferenceIndex;
  /** Volumes the planner looks at next (bindingVolume: the claims). */
  dirty: Set<UniqueVolumeName>;
}

/** An object as its events name it: kind, name and (for namespaced kinds) namespace. */
export interface ObjectName {
  readonly kind: string;
  readonly name: string;
  readonly namespace?: string | undefined;
}

/** What a core tells the intake: its own answer to "this object changed". */
export interface IntakeCore<W extends DesiredIntake> {
  /** The kinds whose change asks the binder to look at unbound claims again. */
  readonly bindingKinds: ReadonlySet<string>;
  /** A pod of the world read `object`, which changed: the core resolves it again. */
  readonly readerChanged: (world: W, uid: UniquePodName, object: ObjectName) => void;
}

/** What pods waiting for any PV to bind reference (every PV change resolves them again). */
const anyPersistentVolume: ObjectName = {
  kind: 'PersistentVolume',
  name: anyPersistentVolumeName,
  namespace: undefined,
};

/** The pod's UID (UniquePodName); manifests without one get it from the source. */
export function podUid(pod: Pod, seq: Seq): UniquePodName {
  const uid = pod.metadata.uid;
  if (!(uid !== undefined && uid !== '')) fail(`pod ${pod.metadata.name}: no uid (seq ${seq})`);
  return UniquePodName(uid);
}

/** Terminated: phase Succeeded or Failed (a deleted pod is removed outright). */
export function isTerminated(pod: Pod): boolean {
  const phase = pod.status?.phase;
  return phase === 'Succeeded' || phase === 'Failed';
}

/** An object came or changed: it is stored, a claim waits for the binder unless bound. */
export function putObject(world: DesiredIntake, object: ClusterObject): ClusterObject | undefined {
  const previous = world.objects.put(object);
  if (object.kind === 'PersistentVolumeClaim')
    trackClaim(
      world,
      objectKey(object.kind, object.metadata.name, object.metadata.namespace),
      object,
    );
  return previous;
}

/** An object went: a claim's binding goes with it. */
export function removeObject(world: DesiredIntake, object: ObjectName): void {
  world.objects.remove(object.kind, object.name, object.namespace);
  if (object.kind === 'PersistentVolumeClaim')
    forgetClaim(world, objectKey(object.kind, object.name, object.namespace));
}

/** The same ConfigMap or Secret content again (nothing any reader sets up again). */
export function sameContent(a: ClusterObject | undefined, b: ClusterObject): boolean {
  if (a === undefined || (b.kind !== 'ConfigMap' && b.kind !== 'Secret') || a.kind !== b.kind)
    return false;
  return (a as { contentHash: string }).contentHash === b.contentHash;
}

/** The pods that read the object learn it changed, in name order (late binding, resize). */
export function reresolveReaders<W extends DesiredIntake>(
  world: W,
  core: IntakeCore<W>,
  object: ObjectName,
): void {
  const { kind, name, namespace } = object;
  for (const uid of podsReferencing(world.podsByObject, kind, name, namespace))
    core.readerChanged(world, uid, object);
}

/** An object changed or went: its readers resolve again, and the binder may look. */
export function objectChanged<W extends DesiredIntake>(
  world: W,
  core: IntakeCore<W>,
  object: ObjectName,
): void {
  reresolveReaders(world, core, object);
  askForBinding(world, core, object.kind);
}

/**
 * A claim, PV (or class, where the core binds by class) changed: the planner looks at
 * unbound claims again, citing this event; a PV may serve the pods waiting for any.
 */
function askForBinding<W extends DesiredIntake>(world: W, core: IntakeCore<W>, kind: string): void {
  if (!core.bindingKinds.has(kind)) return;
  world.bindingCause = world.seq;
  world.dirty.add(bindingVolume);
  if (kind === 'PersistentVolume') reresolveReaders(world, core, anyPersistentVolume);
}

/** The planner's binding decision, recorded: the claim's pods resolve through the PV now. */
export function claimBound<W extends DesiredIntake>(
  world: W,
  core: IntakeCore<W>,
  event: EventOf<'ClaimBound'>,
): void {
  const key = objectKey('PersistentVolumeClaim', event.claim, event.namespace);
  world.bindings.set(key, { volume: event.volume, capacityBytes: event.capacityBytes });
  world.unboundClaims.delete(key);
  reresolveReaders(world, core, {
    kind: 'PersistentVolumeClaim',
    name: event.claim,
    namespace: event.namespace,
  });
}

/**
 * A pod came, changed or went, and a claim may wait on it (its first consumer, under
 * WaitForFirstConsumer; a claim pvc-protection holds): the planner looks at claims again.
 * `cites`: the binder's next decision names this event as its cause.
 */
export function claimUsersChanged(world: DesiredIntake, opts: { readonly cites: boolean }): void {
  world.dirty.add(bindingVolume);
  if (opts.cites) world.bindingCause = world.seq;
}

/** Does a pod in `namespace` with these references read one of `claims` (claim keys)? */
export function readsClaimIn(
  references: References,
  namespace: string,
  claims: ReadonlySet<string>,
): boolean {
  if (claims.size === 0) return false;
  for (let i = 0; i < references.length; i += 2) {
    if (references[i] !== 'PersistentVolumeClaim') continue;
    if (claims.has(objectKey(references[i]!, references[i + 1]!, namespace))) return true;
  }
  return false;
}
