/**
 * Folding desired-state events: pods, cluster objects and the node's reports
 * (behaviour K2.3 DSW mutations, K2.6 populator).
 */
import type { EventOf } from '../events/index.js';
import { objectKey, type Pod } from '../events/k8s.js';
import { type Seq, UniquePodName, type UniqueVolumeName } from '../ids.js';
import {
  claimBound,
  claimUsersChanged,
  type IntakeCore,
  type ObjectName,
  objectChanged,
  podUid,
  putObject,
  removeObject,
  reresolveReaders,
  sameContent,
} from '../desired/intake.js';
import {
  copyByPod,
  deletePodEntry,
  podEntry,
  setCause,
  setDesiredPods,
  setPodEntry,
  setReportedInUse,
} from './memory.js';
import { mayBeGone } from './gone.js';
import { stepMount } from './pairs.js';
import { boundVolumes } from '../binding/claims.js';
import { claimGone, protectClaim, trackResize } from './provisioning.js';
import { nodeLabels } from './node-labels.js';

import { csiAttachOf, type PodResolution, resolvePod } from '../desired/resolve.js';
import { addReference, indexReferences, type References } from '../desired/references.js';
import type { DswPod, PodRecord, World } from './types.js';
import type { ProjectedPart, ResolvedVolume, VolumeSource } from '../operations/volume-spec.js';

/** Marks a volume for planning; `cause` (default: this event) is what a decision cites. */
export function touch(world: World, volume: UniqueVolumeName, cause: Seq = world.seq): void {
  world.dirty.add(volume);
  setCause(world, volume, cause);
}

/** Marks a volume for planning without changing the cause its next decision cites. */
export function markDirty(world: World, volume: UniqueVolumeName): void {
  world.dirty.add(volume);
}

/** behaviour K2.3 DeletePodFromVolume for every volume of the pod's previous resolution. */
function removeFromDsw(world: World, record: PodRecord, cause: Seq): void {
  for (const resolved of record.volumes) {
    const desired = world.volumes.get(resolved.volume)?.pods;
    if (desired === undefined || podEntry(desired, record.uid) === undefined) continue;
    const pods = deletePodEntry(copyByPod(desired), record.uid);
    setDesiredPods(world, resolved.volume, pods);
    if (pods === undefined) mayBeGone(world, resolved.volume);
    touch(world, resolved.volume, cause);
  }
}

/**
 * `[name]`: the pod's own list of expected volumes when that is just this name (a pod with
 * one volume), so the two equal read-only lists are one array in the heap.
 */
function onlyName(record: PodRecord, name: string): readonly string[] {
  const expected = record.expectedVolumes;
  return expected.length === 1 && expected[0] === name ? expected : [name];
}

/** behaviour K2.3 AddPodToVolume for every resolved volume of the pod. */
function addToDsw(world: World, record: PodRecord, cause: Seq): void {
  for (const resolved of record.volumes) {
    const existing = world.volumes.get(resolved.volume)?.pods;
    const previous = podEntry(existing, record.uid);
    // [newer] one unique volume reached through two pod volumes keeps both outer names.
    const outerVolumeSpecNames =
      previous === undefined || previous.seq !== record.seq
        ? onlyName(record, resolved.outerVolumeSpecName)
        : [...new Set([...previous.outerVolumeSpecNames, resolved.outerVolumeSpecName])];
    const entry: DswPod = { pod: record.uid, outerVolumeSpecNames, resolved, seq: record.seq };
    setDesiredPods(world, resolved.volume, setPodEntry(copyByPod(existing), entry));
    touch(world, resolved.volume, cause);
  }
}

/**
 * A one-name list as the world's shared copy (most pods have one volume, most of those
 * share its name): 56 bytes a pod less. Longer lists are the pod's own. Every record that
 * takes one gives it back (releaseList) when it is replaced or removed.
 */
function sharedList(world: World, names: readonly string[]): readonly string[] {
  if (names.length !== 1) return names;
  const name = names[0]!;
  let shared = world.oneNameLists.get(name);
  if (shared === undefined) world.oneNameLists.set(name, (shared = { list: names, users: 0 }));
  shared.users++;
  return shared.list;
}

function releaseList(world: World, names: readonly string[]): void {
  if (names.length !== 1) return;
  const shared = world.oneNameLists.get(names[0]!);
  if (shared === undefined || shared.list !== names) return;
  if (--shared.users === 0) world.oneNameLists.delete(names[0]!);
}

/**
 * Re-resolves a pod against the current objects and plugins and replaces its DSW entries.
 * `reprocessed`: the pod source reported it again, so behaviour K2.6's MarkRemountRequired
 * applies when every volume resolved.
 */
export function upsertPod(
  world: World,
  pod: Pod,
  opts: { reprocessed: boolean; seq: Seq; cause?: Seq },
): void {
  const cause = opts.cause ?? world.seq;
  const uid = podUid(pod, world.seq);
  const previous = world.pods.get(uid);
  const resolution = resolvePod(pod, {
    objects: world.objects,
    plugins: world.plugins,
    bindings: world.bindings,
    taken: () => takenVolumes(world),
    bindClaims: world.config.bindClaims !== false,
    allocatable: world.config.allocatable,
    nodeLabels: () => nodeLabels(world.config.node, world.objects, world.plugins),
    tokenRequests: world.config.tokenRequests === true,
    csiAttach: world.config.csiDriverObjects === true ? csiAttachOf(world.config) : undefined,
  });
  const volumes = keptVolumes(previous, resolution);
  const record: PodRecord = {
    uid,
    name: pod.metadata.name,
    namespace: pod.metadata.namespace ?? 'default',
    pod,
    expectedVolumes: sharedList(world, resolution.expectedVolumes),
    volumes,
    errors: resolution.errors,
    references: keptReferences(resolution.references, volumes),
    seq: opts.seq,
  };
  if (previous !== undefined) {
    releaseList(world, previous.expectedVolumes);
    removeFromDsw(world, previous, cause);
  }
  world.pods.set(uid, record);
  reindexReferences(world, previous, record, resolution.references);
  addToDsw(world, record, cause);
  if (opts.reprocessed && resolution.errors.size === 0) markRemountRequired(world, record);
}

/**
 * What resolved volumes read, in resolution order: a claim and its PV, the ConfigMaps and
 * Secrets of content volumes (references.ts).
 */
function volumeReferences(volumes: readonly ResolvedVolume[]): string[] {
  const references: string[] = [];
  for (const v of volumes) {
    if (v.claim !== undefined) {
      addReference(references, 'PersistentVolumeClaim', v.claim);
      addReference(references, 'PersistentVolume', v.innerVolumeSpecName);
    }
    for (const p of contentParts(v.source))
      if (p.kind === 'configMap' || p.kind === 'secret')
        addReference(references, contentKind(p.kind), p.name);
  }
  return references;
}

/**
 * Are `references` exactly volumeReferences(volumes)? Walked without building that list
 * (every pod is resolved again at each engine start).
 */
function readsExactly(references: References, volumes: readonly ResolvedVolume[]): boolean {
  let n = 0;
  for (const v of volumes) {
    if (v.claim !== undefined) {
      n = matchNext(references, n, 'PersistentVolumeClaim', v.claim);
      if (n >= 0) n = matchNext(references, n, 'PersistentVolume', v.innerVolumeSpecName);
    }
    for (const p of contentParts(v.source))
      if (n >= 0 && (p.kind === 'configMap' || p.kind === 'secret'))
        n = matchNext(references, n, contentKind(p.kind), p.name);
    if (n < 0) return false;
  }
  return n === references.length;
}

/**
 * The next reference as addReference would append it to the first `n` entries: `n` when
 * they hold it already, `n + 2` when the next entry is it, -1 when the lists differ.
 */
function matchNext(references: References, n: number, kind: string, name: string): number {
  for (let i = 0; i < n; i += 2) if (references[i] === kind && references[i + 1] === name) return n;
  return references[n] === kind && references[n + 1] === name ? n + 2 : -1;
}

const noParts: readonly never[] = Object.freeze([]);

/** The ConfigMap and Secret parts a content volume reads (and downward API parts). */
function contentParts(source: VolumeSource): readonly ProjectedPart[] {
  if (source.kind === 'configMap' || source.kind === 'secret') return [source];
  return source.kind === 'projected' ? source.sources : noParts;
}

function contentKind(kind: 'configMap' | 'secret'): string {
  return kind === 'configMap' ? 'ConfigMap' : 'Secret';
}

/**
 * The references a pod record keeps: null when they are exactly what its volumes read (a
 * pod whose volumes all resolved), so no list is kept (80 bytes a pod with a claim); the
 * list otherwise (a claim not found or not bound yet, a kept volume).
 */
function keptReferences(
  references: References,
  volumes: readonly ResolvedVolume[],
): References | null {
  return readsExactly(references, volumes) ? null : references;
}

/**
 * Moves the pod in the object index from what its previous resolution read to what this
 * one read (`references`); nothing to do when they are the same objects (a pod resolved
 * again against unchanged objects: every pod at each engine start).
 */
function reindexReferences(
  world: World,
  previous: PodRecord | undefined,
  record: PodRecord,
  references: References,
): void {
  if (previous !== undefined) {
    const same =
      previous.references === null
        ? readsExactly(references, previous.volumes)
        : sameList(previous.references, references);
    if (same && previous.namespace === record.namespace) return;
    const before = podReferences(previous);
    indexReferences(world.podsByObject, record.uid, previous.namespace, before, false);
  }
  indexReferences(world.podsByObject, record.uid, record.namespace, references, true);
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The objects a pod record's resolution read. */
function podReferences(record: PodRecord): References {
  return record.references ?? volumeReferences(record.volumes);
}

/**
 * boundVolumes of the world as of this event: one walk of the objects per event at most,
 * kept in the world's scratch (`takenVolumes`, dropped when the event is folded).
 */
function takenVolumes(world: World): ReadonlyMap<string, string> {
  const memo = world.takenVolumes;
  if (memo !== undefined && memo.seq === world.seq) return memo.taken;
  const taken = boundVolumes(world.objects, world.bindings);
  world.takenVolumes = { seq: world.seq, taken };
  return taken;
}

/**
 * behaviour K2.6: a pod's volumes leave the DSW only when the pod is gone. A volume that resolved
 * before and fails now (its claim or PV deleted, unbound, unreadable) stays desired with
 * its last spec; the pod records the error.
 */
function keptVolumes(previous: PodRecord | undefined, resolution: PodResolution) {
  if (previous === undefined || resolution.errors.size === 0) return resolution.volumes;
  const kept = previous.volumes.filter(
    (v) =>
      resolution.errors.has(v.outerVolumeSpecName) &&
      resolution.expectedVolumes.includes(v.outerVolumeSpecName),
  );
  return kept.length === 0 ? resolution.volumes : [...resolution.volumes, ...kept];
}

/**
 * behaviour K2.1 MarkRemountRequired: mounted volumes of plugins that RequiresRemount (only those
 * `which` picks, when given).
 */
function markRemountRequired(
  world: World,
  record: PodRecord,
  which: (resolved: ResolvedVolume) => boolean = () => true,
): void {
  for (const resolved of record.volumes) {
    if (!resolved.traits.requiresRemount || !which(resolved)) continue;
    const mount = podEntry(world.mounts.get(resolved.volume), record.uid);
    if (mount === undefined || mount.value !== 'mounted') continue;
    stepMount(world, mount, { type: 'REMOUNT_REQUIRED' });
    touch(world, resolved.volume);
  }
}

/** Does this volume project a service-account token? */
function projectsToken(resolved: ResolvedVolume): boolean {
  return contentParts(resolved.source).some((p) => p.kind === 'serviceAccountToken');
}

/**
 * The token manager found a token of this pod due for refresh (80 % of its lifetime, or
 * 24 h): its mounted token projections are set up again, which asks for a new token and
 * swaps the files in atomically. Other volumes of the pod stay as they are. A pod gone
 * meanwhile: nothing to do, as in the kubelet.
 */
function foldTokensRefreshDue(world: World, event: EventOf<'TokensRefreshDue'>): void {
  const record = world.pods.get(UniquePodName(event.pod));
  if (record === undefined) return;
  markRemountRequired(world, record, projectsToken);
}

/** The node's own inputs: its status as published and read back, its token timer. */
export function foldNodeInput(
  world: World,
  event: EventOf<'VolumesReportedInUse' | 'NodeStatusObserved' | 'TokensRefreshDue'>,
): void {
  if (event.type === 'VolumesReportedInUse') return foldVolumesReportedInUse(world, event);
  if (event.type === 'NodeStatusObserved') return foldNodeStatusObserved(world, event);
  return foldTokensRefreshDue(world, event);
}

export function foldPodUpserted(world: World, event: EventOf<'PodUpserted'>): void {
  upsertPod(world, event.pod, { reprocessed: true, seq: event.seq as Seq });
  podUsersChanged(world);
}

/** The node's binder looks at claims again when some wait (it cites the object change). */
const notCiting = { cites: false } as const;

/**
 * A pod came or went: a claim waiting for its first consumer (WaitForFirstConsumer) or
 * held by pvc-protection may go on, so the planner looks at claims again.
 */
function podUsersChanged(world: World): void {
  const { protectedClaims } = world.provisioning;
  if (world.unboundClaims.size > 0 || protectedClaims.size > 0) claimUsersChanged(world, notCiting);
}

export function foldPodRemoved(world: World, event: EventOf<'PodRemoved'>): void {
  const uid = UniquePodName(event.uid);
  const record = world.pods.get(uid);
  if (record === undefined) return; // Removing an unknown pod is a no-op, as in the kubelet.
  removeFromDsw(world, record, world.seq);
  indexReferences(world.podsByObject, uid, record.namespace, podReferences(record), false);
  releaseList(world, record.expectedVolumes);
  world.pods.delete(uid);
  world.mountIntents.delete(uid);
  podUsersChanged(world);
}

/** Does this volume read that ConfigMap or Secret? */
function readsObject(resolved: ResolvedVolume, object: ObjectName): boolean {
  const key = objectKey(object.kind, object.name, object.namespace);
  return contentParts(resolved.source).some(
    (p) =>
      (p.kind === 'configMap' || p.kind === 'secret') &&
      objectKey(contentKind(p.kind), p.name, p.namespace) === key,
  );
}

/**
 * A ConfigMap or Secret a pod reads changed: its mounted volumes that read it are set up
 * again (behaviour K2.1 MarkRemountRequired, the kubelet's resync bringing new content), no others.
 */
function remountReader(world: World, record: PodRecord, object: ObjectName): void {
  for (const resolved of record.volumes) {
    if (!resolved.traits.requiresRemount || !readsObject(resolved, object)) continue;
    const mount = podEntry(world.mounts.get(resolved.volume), record.uid);
    if (mount === undefined || mount.value !== 'mounted') continue;
    stepMount(world, mount, { type: 'REMOUNT_REQUIRED' });
    touch(world, resolved.volume);
  }
}

/**
 * The node's answers to the desired-state intake (src/desired/intake.ts): a claim, PV or
 * class change asks the binder; a pod that read a changed ConfigMap or Secret remounts
 * what reads it, one that read another object resolves again.
 */
const kubeletIntake: IntakeCore<World> = {
  bindingKinds: new Set(['PersistentVolume', 'PersistentVolumeClaim', 'StorageClass']),
  readerChanged(world, uid, object) {
    const record = world.pods.get(uid);
    if (record === undefined) return;
    if (object.kind === 'ConfigMap' || object.kind === 'Secret')
      remountReader(world, record, object);
    else upsertPod(world, record.pod, { reprocessed: false, seq: record.seq });
  },
};

/** An object changed or went: the pods that read it resolve again (or remount), the binder looks. */
export function reresolveObject(world: World, object: ObjectName): void {
  objectChanged(world, kubeletIntake, object);
}

export function foldObjectUpserted(world: World, event: EventOf<'ObjectUpserted'>): void {
  const { object } = event;
  const { kind, metadata } = object;
  const previous = putObject(world, object);
  if (kind === 'PersistentVolumeClaim')
    trackResize(world, objectKey(kind, metadata.name, metadata.namespace), object);
  // The same ConfigMap or Secret content again: nothing to set up again.
  if (sameContent(previous, object)) return;
  reresolveObject(world, { kind, name: metadata.name, namespace: metadata.namespace });
}

export function foldObjectRemoved(world: World, event: EventOf<'ObjectRemoved'>): void {
  // pvc-protection: a claim a pod uses is only marked for deletion.
  if (protectClaim(world, event)) return reresolveObject(world, event);
  removeObject(world, event);
  if (event.kind === 'PersistentVolumeClaim')
    claimGone(world, objectKey(event.kind, event.name, event.namespace));
  reresolveObject(world, event);
}

/** The planner's binding decision, recorded: the claim's pods resolve through the PV now. */
export function foldClaimBound(world: World, event: EventOf<'ClaimBound'>): void {
  claimBound(world, kubeletIntake, event);
}

/** A finished expansion raises the claim's capacity, so the next mount does not expand again. */
export function claimExpanded(
  world: World,
  claim: { readonly name: string; readonly namespace: string },
  pvName: string,
  bytes: number,
): void {
  const claimKey = objectKey('PersistentVolumeClaim', claim.name, claim.namespace);
  const binding = world.bindings.get(claimKey);
  if (bytes <= 0 || (binding !== undefined && binding.capacityBytes >= bytes)) return;
  world.bindings.set(claimKey, { volume: binding?.volume ?? pvName, capacityBytes: bytes });
  reresolveReaders(world, kubeletIntake, { kind: 'PersistentVolumeClaim', ...claim });
}

/** behaviour K2.3 MarkVolumesReportedInUse: full replacement over every DSW volume. */
function foldVolumesReportedInUse(world: World, event: EventOf<'VolumesReportedInUse'>): void {
  const reported = new Set(event.volumes);
  for (const [name, volume] of world.dsw) {
    const reportedInUse = reported.has(name);
    if (volume.reportedInUse === reportedInUse) continue;
    setReportedInUse(world, name, reportedInUse);
    touch(world, name);
  }
}

function foldNodeStatusObserved(world: World, event: EventOf<'NodeStatusObserved'>): void {
  if (event.node !== world.config.node) return;
  const previous = world.volumesAttached;
  const next = new Map(
    event.volumesAttached.map((v) => [v.name as UniqueVolumeName, v.devicePath]),
  );
  for (const name of new Set([...previous.keys(), ...next.keys()])) {
    if (previous.get(name) === next.get(name)) continue;
    touch(world, name);
    mayBeGone(world, name); // the node may report a volume this world never had
  }
  world.volumesAttached = next;
}
