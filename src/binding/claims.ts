/**
 * Claim binding as Kubernetes' persistent-volume controller does it for static volumes
 * (pkg/controller/volume/persistentvolume): a claim without volumeName gets the smallest
 * Available PV that satisfies it; a claim with volumeName gets that PV only; a PV whose
 * claimRef names another claim is nobody else's. Pure: the planner decides a binding from
 * these answers and the log records it (ClaimBound); resolution reuses them to say why a
 * claim waits.
 */
import {
  type ClusterObject,
  type LabelSelector,
  objectKey,
  parseQuantityBytes,
  type PersistentVolume,
  type PersistentVolumeClaim,
} from '../events/k8s.js';
import type { UniqueVolumeName } from '../ids.js';
import { claimClassName, type ObjectLookup } from './storage-class.js';

/** A binding the log recorded: the claim's PV and its capacity (claim.status.capacity). */
export interface ClaimBinding {
  readonly volume: string;
  readonly capacityBytes: number;
}

/** The world's marker that unbound claims need the planner's look (not a real volume). */
export const bindingVolume = '' as UniqueVolumeName;

/** What binding needs of a world, kubelet's or controller's (both bind claims). */
export interface BindingWorld {
  readonly objects: ReadonlyMap<string, ClusterObject>;
  readonly bindings: Map<string, ClaimBinding>;
  readonly unboundClaims: Set<string>;
  bindingCause: number;
}

/** A claim appeared or changed: it waits for the binder unless it is bound already. */
export function trackClaim(world: BindingWorld, key: string, pvc: PersistentVolumeClaim): void {
  if (isClaimBound(pvc, world.bindings)) world.unboundClaims.delete(key);
  else world.unboundClaims.add(key);
}

/** A claim is gone: its binding goes with it. */
export function forgetClaim(world: BindingWorld, key: string): void {
  world.bindings.delete(key);
  world.unboundClaims.delete(key);
}

export type BindingVerdict =
  | { readonly ok: true; readonly pv: PersistentVolume; readonly capacityBytes: number }
  | { readonly ok: false; readonly reason: string };

/** `namespace/name` of a claim. */
export function claimName(pvc: PersistentVolumeClaim): string {
  return `${pvc.metadata.namespace ?? 'default'}/${pvc.metadata.name}`;
}

/**
 * The claim's uid. Every source gives claims one now (the manifest reader and the engines'
 * object intake a fresh random UID, recorded in the log); a claim without one (a log
 * written before, a scenario's claim) gets a stable digest of its namespace and name
 * (FNV-1a), so the volume's name `pvc-<uid>` is the same on every replay.
 */
export function claimUid(pvc: PersistentVolumeClaim): string {
  const given = pvc.metadata.uid;
  if (given !== undefined && given !== '') return given;
  const text = `${pvc.metadata.namespace ?? 'default'}/${pvc.metadata.name}`;
  const parts = [0x811c9dc5, 0x01000193, 0x5bd1e995, 0x2545f491].map((seed) => {
    let h = seed >>> 0;
    for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
    return h.toString(16).padStart(8, '0');
  });
  const hex = parts.join('');
  const part = (from: number, to?: number) => hex.slice(from, to);
  return `${part(0, 8)}-${part(8, 12)}-${part(12, 16)}-${part(16, 20)}-${part(20)}`;
}

/** A claim is bound when the log recorded it, or when its status says so (the API's record). */
export function isClaimBound(
  pvc: PersistentVolumeClaim,
  bindings: ReadonlyMap<string, ClaimBinding>,
): boolean {
  const key = objectKey('PersistentVolumeClaim', pvc.metadata.name, pvc.metadata.namespace);
  if (bindings.has(key)) return true;
  return pvc.status?.phase === 'Bound' && (pvc.spec.volumeName ?? '') !== '';
}

/** PV name → the claim (`namespace/name`) bound to it, from the log and from claims' status. */
export function boundVolumes(
  objects: ReadonlyMap<string, ClusterObject>,
  bindings: ReadonlyMap<string, ClaimBinding>,
): Map<string, string> {
  const taken = new Map<string, string>();
  for (const [key, binding] of bindings) taken.set(binding.volume, key.slice(key.indexOf('/') + 1));
  for (const object of objects.values()) {
    if (object.kind !== 'PersistentVolumeClaim' || !isClaimBound(object, bindings)) continue;
    const key = objectKey('PersistentVolumeClaim', object.metadata.name, object.metadata.namespace);
    if (!bindings.has(key)) taken.set(object.spec.volumeName!, claimName(object));
  }
  return taken;
}

function selectorMatches(selector: LabelSelector | undefined, labels: Record<string, string>) {
  if (selector === undefined) return true;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {}))
    if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const values = e.values ?? [];
    if (e.operator === 'In' && !(has && values.includes(labels[e.key]!))) return false;
    if (e.operator === 'NotIn' && has && values.includes(labels[e.key]!)) return false;
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
    if (!['In', 'NotIn', 'Exists', 'DoesNotExist'].includes(e.operator)) return false;
  }
  return true;
}

/**
 * The objects as a lookup by kind and name: the world's ClusterObjects are one; a plain
 * map (a test's, the controller's) is read through objectKey.
 */
export function lookupOf(objects: ReadonlyMap<string, ClusterObject>): ObjectLookup {
  if ('lookup' in objects && 'ofKind' in objects) return objects as unknown as ObjectLookup;
  return {
    lookup: (kind, name, namespace) => objects.get(objectKey(kind, name, namespace)),
    *ofKind(kind) {
      for (const object of objects.values()) if (object.kind === kind) yield object;
    },
  };
}

/**
 * checkVolumeSatisfyClaim: why this PV cannot serve this claim, or undefined when it can.
 * `wantedClass` is the claim's class (claimClassName: the default class when it names none).
 */
function mismatch(
  pv: PersistentVolume,
  pvc: PersistentVolumeClaim,
  wantedClass: string = pvc.spec.storageClassName ?? '',
): string | undefined {
  if (pv.metadata.deletionTimestamp !== undefined) return 'it is being deleted';
  const requested = parseQuantityBytes(pvc.spec.resources?.requests?.storage) ?? 0;
  const capacity = parseQuantityBytes(pv.spec.capacity?.storage) ?? 0;
  if (capacity < requested) {
    const has = String(pv.spec.capacity?.storage ?? 0);
    const asked = String(pvc.spec.resources?.requests?.storage);
    return `its capacity ${has} is less than the ${asked} requested`;
  }
  if ((pv.spec.storageClassName ?? '') !== wantedClass)
    return `its storageClassName "${pv.spec.storageClassName ?? ''}" is not "${wantedClass}"`;
  const pvMode = pv.spec.volumeMode ?? 'Filesystem';
  const claimMode = pvc.spec.volumeMode ?? 'Filesystem';
  if (pvMode !== claimMode) return `its volumeMode ${pvMode} is not ${claimMode}`;
  const modes = pv.spec.accessModes ?? [];
  const missing = (pvc.spec.accessModes ?? []).filter((m) => !modes.includes(m));
  if (missing.length > 0) return `it lacks access mode ${missing.join(', ')}`;
  return undefined;
}

/**
 * Is the PV free for this claim: no claimRef, or one naming this claim (and its uid, when
 * the claimRef has one: a claim made again under the same name is another), and not taken?
 */
function freeFor(
  pv: PersistentVolume,
  pvc: PersistentVolumeClaim,
  taken: ReadonlyMap<string, string>,
) {
  const claim = claimName(pvc);
  const holder = taken.get(pv.metadata.name);
  if (holder !== undefined) return holder === claim;
  const ref = pv.spec.claimRef;
  if (ref?.name !== undefined) return refNames(ref, pvc);
  const phase = pv.status?.phase;
  return phase === undefined || phase === 'Available' || phase === 'Pending';
}

function capacityOf(pv: PersistentVolume, pvc: PersistentVolumeClaim): number {
  return (
    parseQuantityBytes(pvc.status?.capacity?.storage) ??
    parseQuantityBytes(pv.spec.capacity?.storage) ??
    0
  );
}

/** A claim with spec.volumeName: that PV, if it is free for the claim and satisfies it. */
function preBound(
  pvc: PersistentVolumeClaim,
  objects: ReadonlyMap<string, ClusterObject>,
  taken: ReadonlyMap<string, string>,
): BindingVerdict {
  const name = pvc.spec.volumeName!;
  const pv = objects.get(objectKey('PersistentVolume', name));
  if (pv === undefined || pv.kind !== 'PersistentVolume')
    return { ok: false, reason: `its volumeName PersistentVolume "${name}" does not exist` };
  if (!freeFor(pv, pvc, taken))
    return {
      ok: false,
      reason:
        `PersistentVolume "${name}" is bound to another claim ` +
        `(${taken.get(name) ?? pv.spec.claimRef?.name})`,
    };
  const why = mismatch(pv, pvc, claimClassName(pvc, lookupOf(objects)));
  if (why !== undefined)
    return { ok: false, reason: `PersistentVolume "${name}" cannot serve it: ${why}` };
  return { ok: true, pv, capacityBytes: capacityOf(pv, pvc) };
}

/** The access modes of a PV as findByClaim groups them: how many, then which. */
function modesRank(pv: PersistentVolume): string {
  const modes = [...(pv.spec.accessModes ?? [])].sort();
  return `${String(modes.length).padStart(2, '0')}:${modes.join(',')}`;
}

/** Is `a` a better match than `b` (findByClaim, then findMatchingVolume)? */
function better(
  a: PersistentVolume,
  b: PersistentVolume | undefined,
  claim: PersistentVolumeClaim,
): boolean {
  if (b === undefined) return true;
  const ra = modesRank(a);
  const rb = modesRank(b);
  if (ra !== rb) return ra < rb; // the fewest access modes first
  const pa = preBoundTo(a, claim);
  const pb = preBoundTo(b, claim);
  if (pa !== pb) return pa; // a PV whose claimRef names the claim, within its group
  const bytesA = parseQuantityBytes(a.spec.capacity?.storage) ?? 0;
  const bytesB = parseQuantityBytes(b.spec.capacity?.storage) ?? 0;
  if (bytesA !== bytesB) return bytesA < bytesB; // then the smallest
  return a.metadata.name < b.metadata.name;
}

function preBoundTo(pv: PersistentVolume, pvc: PersistentVolumeClaim): boolean {
  const ref = pv.spec.claimRef;
  return ref?.name !== undefined && refNames(ref, pvc);
}

/** Does a claimRef name this claim (namespace, name, and uid when it has one)? */
function refNames(
  ref: { name?: string | undefined; namespace?: string | undefined; uid?: unknown },
  pvc: PersistentVolumeClaim,
): boolean {
  if (`${ref.namespace ?? 'default'}/${ref.name}` !== claimName(pvc)) return false;
  return typeof ref.uid !== 'string' || ref.uid === claimUid(pvc);
}

/**
 * The PV this claim binds to now, or why none: index.go findByClaim's order (the PVs with
 * the fewest access modes first; within them findMatchingVolume's: one pre-bound to the
 * claim by claimRef, else the smallest that satisfies it; ties by name).
 */
export function findVolumeForClaim(
  pvc: PersistentVolumeClaim,
  objects: ReadonlyMap<string, ClusterObject>,
  taken: ReadonlyMap<string, string>,
): BindingVerdict {
  if ((pvc.spec.volumeName ?? '') !== '') return preBound(pvc, objects, taken);
  const lookup = lookupOf(objects);
  const wantedClass = claimClassName(pvc, lookup);
  let best: PersistentVolume | undefined;
  let considered = 0;
  let held = 0;
  let reason = '';
  for (const object of lookup.ofKind('PersistentVolume')) {
    if (object.kind !== 'PersistentVolume') continue;
    if (!freeFor(object, pvc, taken)) {
      held++;
      continue;
    }
    considered++;
    const why =
      mismatch(object, pvc, wantedClass) ??
      (selectorMatches(pvc.spec.selector, object.metadata.labels ?? {})
        ? undefined
        : 'its labels do not match the claim selector');
    if (why !== undefined) {
      reason ||= `PersistentVolume "${object.metadata.name}": ${why}`;
      continue;
    }
    if (better(object, best, pvc)) best = object;
  }
  if (best !== undefined) return { ok: true, pv: best, capacityBytes: capacityOf(best, pvc) };
  if (considered === 0) {
    const heldText = held === 0 ? '' : ` (${held} bound or reserved for other claims)`;
    return { ok: false, reason: `no Available PersistentVolume exists${heldText}` };
  }
  const others = considered > 1 ? `; ${considered - 1} other(s) do not either` : '';
  return { ok: false, reason: `no Available PersistentVolume satisfies it (${reason}${others})` };
}
