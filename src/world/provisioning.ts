/**
 * Folding dynamic provisioning, as Kubernetes' persistent-volume controller and the CSI
 * external-provisioner, external-resizer and pvc-protection controller record it:
 *
 * - a provision operation's CreateVolume in flight (`inFlight`, until it answers OK);
 * - CreateVolume answered: the PV `pvc-<claim uid>` recorded, bound to its claim (the PV
 *   controller's provisionClaimOperation, then syncVolume binding it);
 * - DeleteVolume answered: the PV goes (deleteVolumeOperation);
 * - ControllerExpandVolume answered: the PV's capacity grows (the resizer);
 * - a claim deleted while a pod uses it stays, being deleted, until the pvc-protection
 *   controller's decision (ClaimFinalizerRemoved) removes it.
 *
 * Pure: the fold's part; the decisions are the planner's (src/plan/provision.ts).
 */
import type { EventOf, ProvisionRequest } from '../events/index.js';
import {
  objectKey,
  parseQuantityBytes,
  type PersistentVolume,
  type PersistentVolumeClaim,
} from '../events/k8s.js';
import { UniqueVolumeName } from '../ids.js';
import { bindingVolume, boundVolumes, claimUid, forgetClaim } from './binding.js';

export { claimUid };
import { podsReferencing } from './references.js';
import {
  claimClassName,
  nodeAffinityOf,
  provisionedByAnnotation,
  storageClassOf,
} from './storage-class.js';
import type { RunningOp, World } from './types.js';
import { claimExpanded, reresolveObject } from './fold-desired.js';

/** `kubernetes.io/csi/<driver>^<volumeHandle>`: a CSI PV's unique volume name. */
export function csiVolumeName(driver: string, handle: string): UniqueVolumeName {
  return UniqueVolumeName(`kubernetes.io/csi/${driver}^${handle}`);
}

/** A provision operation started: its CreateVolume request is in flight from now on. */
export function provisionStarted(world: World, volume: UniqueVolumeName, request: ProvisionRequest) {
  const known = world.provisioning.inFlight.get(volume);
  world.provisioning.inFlight.set(volume, { request, mayExist: known?.mayExist ?? false });
}

/** Does a claim with that key and uid exist (a claim deleted and made again is another)? */
function claimExists(world: World, request: ProvisionRequest): PersistentVolumeClaim | undefined {
  const { namespace, name, uid } = request.claim;
  const pvc = world.objects.lookup('PersistentVolumeClaim', name, namespace);
  if (pvc?.kind !== 'PersistentVolumeClaim') return undefined;
  return claimUid(pvc) === uid ? pvc : undefined;
}

/**
 * A provisioning call's outcome: CreateVolume answered OK (the PV is recorded), failed
 * finally (the volume does not exist: a deleted claim's provisioning ends) or may be in
 * progress; DeleteVolume and ControllerExpandVolume answered OK.
 */
export function foldProvisioningCall(
  world: World,
  op: RunningOp,
  event: EventOf<'CallStarted' | 'CallSucceeded' | 'CallFailed'>,
): void {
  const record = world.provisioning.inFlight.get(op.volume);
  if (event.call === 'createVolume' && record !== undefined) {
    if (event.type === 'CallStarted') record.mayExist = true;
    else if (event.type === 'CallFailed') record.mayExist = event.error.kind === 'uncertain';
    else if (event.provisioned !== undefined) volumeProvisioned(world, op.volume, event);
    if (event.type === 'CallFailed' && !record.mayExist && claimExists(world, record.request) === undefined)
      world.provisioning.inFlight.delete(op.volume);
    return;
  }
  if (event.type !== 'CallSucceeded') return;
  if (event.call === 'deleteVolume') volumeDeleted(world, op.volume);
  if (event.call === 'controllerExpand') volumeExpanded(world, op.volume, event);
}

/** provisionClaimOperation: CreateVolume answered; the PV is made, bound to its claim. */
function volumeProvisioned(
  world: World,
  volume: UniqueVolumeName,
  event: EventOf<'CallSucceeded'>,
): void {
  const { request } = world.provisioning.inFlight.get(volume)!;
  const created = event.provisioned!;
  const capacityBytes = created.capacityBytes > 0 ? created.capacityBytes : request.requiredBytes;
  const pv = provisionedPv(request, { ...created, capacityBytes });
  world.provisioning.inFlight.delete(volume);
  world.provisioning.provisioned.set(csiVolumeName(request.driver, created.volumeId), pv.metadata.name);
  world.objects.put(pv);
  const pvc = claimExists(world, request);
  if (pvc !== undefined) {
    const key = objectKey('PersistentVolumeClaim', request.claim.name, request.claim.namespace);
    world.bindings.set(key, { volume: pv.metadata.name, capacityBytes });
    world.unboundClaims.delete(key);
    trackResize(world, key, pvc);
  }
  reresolveObject(world, { kind: 'PersistentVolumeClaim', ...request.claim });
  reresolveObject(world, { kind: 'PersistentVolume', name: pv.metadata.name });
}

/** The PV the external-provisioner records for a created volume. */
function provisionedPv(
  request: ProvisionRequest,
  created: { volumeId: string; capacityBytes: number; volumeContext: Record<string, string>;
    accessibleTopology: Record<string, string>[] },
): PersistentVolume {
  const { claim } = request;
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name: request.name, annotations: { [provisionedByAnnotation]: request.driver } },
    spec: {
      accessModes: [...request.accessModes],
      capacity: { storage: created.capacityBytes },
      volumeMode: request.volumeMode,
      storageClassName: request.storageClassName,
      persistentVolumeReclaimPolicy: request.reclaimPolicy,
      claimRef: { kind: 'PersistentVolumeClaim', namespace: claim.namespace, name: claim.name, uid: claim.uid },
      ...(request.mountOptions.length === 0 ? {} : { mountOptions: [...request.mountOptions] }),
      csi: {
        driver: request.driver,
        volumeHandle: created.volumeId,
        ...(request.fsType === '' || request.volumeMode === 'Block' ? {} : { fsType: request.fsType }),
        ...(Object.keys(created.volumeContext).length === 0
          ? {}
          : { volumeAttributes: { ...created.volumeContext } }),
      },
      ...(created.accessibleTopology.length === 0
        ? {}
        : { nodeAffinity: { required: nodeAffinityOf(created.accessibleTopology) } }),
    },
  };
}

/** deleteVolumeOperation: DeleteVolume answered; the PV goes. */
function volumeDeleted(world: World, volume: UniqueVolumeName): void {
  const pvName = world.provisioning.provisioned.get(volume);
  if (pvName === undefined) return;
  world.provisioning.provisioned.delete(volume);
  world.objects.remove('PersistentVolume', pvName);
  reresolveObject(world, { kind: 'PersistentVolume', name: pvName });
}

/** The resizer: ControllerExpandVolume answered; the PV's capacity is the new size. */
function volumeExpanded(world: World, volume: UniqueVolumeName, event: EventOf<'CallSucceeded'>) {
  const pvName = world.provisioning.provisioned.get(volume) ?? pvNameOfVolume(world, volume);
  const pv = pvName === undefined ? undefined : world.objects.lookup('PersistentVolume', pvName);
  const sizeBytes = event.sizeBytes ?? 0;
  if (pv?.kind !== 'PersistentVolume' || sizeBytes <= 0) return;
  world.objects.put({ ...pv, spec: { ...pv.spec, capacity: { ...pv.spec.capacity, storage: sizeBytes } } });
  const claim = claimOfPv(world, pv);
  if (claim !== undefined) {
    world.provisioning.resizing.delete(claim.key);
    // No node expansion to come: the claim's capacity is the new size at once.
    if (event.nodeExpansionRequired === false) claimExpanded(world, claim, pv.metadata.name, sizeBytes);
  }
  reresolveObject(world, { kind: 'PersistentVolume', name: pv.metadata.name });
}

/** The PV a bound claim's binding names whose CSI volume is `volume` (static CSI PVs). */
function pvNameOfVolume(world: World, volume: UniqueVolumeName): string | undefined {
  for (const key of world.provisioning.resizing) {
    const pvName = world.bindings.get(key)?.volume;
    const pv = pvName === undefined ? undefined : world.objects.lookup('PersistentVolume', pvName);
    const csi = pv?.kind === 'PersistentVolume' ? pv.spec.csi : undefined;
    if (csi?.volumeHandle !== undefined && csiVolumeName(csi.driver, csi.volumeHandle) === volume)
      return pvName;
  }
  return undefined;
}

/** The claim a PV is bound to (the log's binding), with its key. */
function claimOfPv(world: World, pv: PersistentVolume) {
  const ref = pv.spec.claimRef;
  if (ref?.name === undefined) return undefined;
  const namespace = ref.namespace ?? 'default';
  const key = objectKey('PersistentVolumeClaim', ref.name, namespace);
  if (world.bindings.get(key)?.volume !== pv.metadata.name) return undefined;
  return { key, name: ref.name, namespace };
}

/**
 * A claim changed: expansion is wanted while it is bound, its class allows expansion and
 * it asks for more than its PV has (the API server refuses the growth otherwise).
 */
export function trackResize(world: World, key: string, pvc: PersistentVolumeClaim): void {
  const binding = world.bindings.get(key);
  const requested = parseQuantityBytes(pvc.spec.resources?.requests?.storage) ?? 0;
  const pv = binding === undefined ? undefined : world.objects.lookup('PersistentVolume', binding.volume);
  const sc = storageClassOf(world.objects, claimClassName(pvc, world.objects));
  const has = pv?.kind === 'PersistentVolume' ? (parseQuantityBytes(pv.spec.capacity?.storage) ?? 0) : 0;
  const wanted = sc?.allowVolumeExpansion === true && pv !== undefined && requested > has;
  if (wanted) world.provisioning.resizing.add(key);
  else world.provisioning.resizing.delete(key);
}

/**
 * pvc-protection: a claim deleted while a pod uses it is kept, being deleted (its
 * deletionTimestamp set, as the API server does for an object with a finalizer). True when
 * it is kept; the planner removes it once no pod uses it.
 */
export function protectClaim(world: World, event: EventOf<'ObjectRemoved'>): boolean {
  if (event.kind !== 'PersistentVolumeClaim') return false;
  const pvc = world.objects.lookup('PersistentVolumeClaim', event.name, event.namespace);
  if (pvc?.kind !== 'PersistentVolumeClaim') return false;
  if (!claimInUse(world, pvc)) return false;
  const deletionTimestamp = pvc.metadata.deletionTimestamp ?? new Date(event.tsMs).toISOString();
  world.objects.put({ ...pvc, metadata: { ...pvc.metadata, deletionTimestamp } });
  world.provisioning.protectedClaims.add(
    objectKey('PersistentVolumeClaim', event.name, event.namespace),
  );
  world.dirty.add(bindingVolume);
  return true;
}

/** Is some pod of this node using the claim (its resolution read it)? */
export function claimInUse(world: World, pvc: PersistentVolumeClaim): boolean {
  const { name, namespace } = pvc.metadata;
  for (const _uid of podsReferencing(world.podsByObject, 'PersistentVolumeClaim', name, namespace))
    return true;
  return false;
}

/** The pvc-protection controller's decision recorded: the claim goes now. */
export function foldClaimFinalizerRemoved(world: World, event: EventOf<'ClaimFinalizerRemoved'>) {
  const key = objectKey('PersistentVolumeClaim', event.claim, event.namespace);
  world.provisioning.protectedClaims.delete(key);
  world.objects.remove('PersistentVolumeClaim', event.claim, event.namespace);
  claimGone(world, key);
  reresolveObject(world, { kind: 'PersistentVolumeClaim', name: event.claim, namespace: event.namespace });
}

/** A claim is gone: its binding, its wanted expansion, and a provisioning that cannot have begun. */
export function claimGone(world: World, key: string): void {
  forgetClaim(world, key);
  world.provisioning.resizing.delete(key);
  for (const [volume, record] of world.provisioning.inFlight) {
    const { namespace, name } = record.request.claim;
    if (objectKey('PersistentVolumeClaim', name, namespace) !== key || record.mayExist) continue;
    const running = world.ops.get(volume)?.some((r) => r.pending) === true;
    if (!running) world.provisioning.inFlight.delete(volume);
  }
}

/** A PV's phase as the PV controller would set it (status.phase of a source's PV wins). */
export function pvPhase(world: World, pv: PersistentVolume, taken: ReadonlyMap<string, string>) {
  if (taken.has(pv.metadata.name)) return 'Bound';
  const ref = pv.spec.claimRef;
  if (ref?.name !== undefined) {
    const pvc = world.objects.lookup('PersistentVolumeClaim', ref.name, ref.namespace ?? 'default');
    const uid = (ref as { uid?: string }).uid;
    const same = pvc?.kind === 'PersistentVolumeClaim' && (uid === undefined || claimUid(pvc) === uid);
    if (!same) return 'Released';
    return 'Bound';
  }
  return pv.status?.phase ?? 'Available';
}

/** `namespace/name` of the claim a PV's claimRef names, or null. */
export function pvClaim(pv: PersistentVolume, taken: ReadonlyMap<string, string>): string | null {
  const holder = taken.get(pv.metadata.name);
  if (holder !== undefined) return holder;
  const ref = pv.spec.claimRef;
  return ref?.name === undefined ? null : `${ref.namespace ?? 'default'}/${ref.name}`;
}


/** A PV as `state.pvs`, `vole get pvs` and the inspector show it. */
export interface PvView {
  readonly name: string;
  readonly phase: string;
  readonly claim: string | null;
  readonly volumeHandle: string | null;
  readonly capacityBytes: number | null;
  readonly reclaimPolicy: string | null;
  /** The topology value its node affinity requires (the zone), or null. */
  readonly zone: string | null;
  readonly storageClassName: string | null;
  readonly provisioned: boolean;
}

/** Every PV the world knows, by name, with its phase (pvPhase). */
export function persistentVolumes(world: World): PvView[] {
  const taken = boundVolumes(world.objects, world.bindings);
  const views: PvView[] = [];
  for (const object of world.objects.ofKind('PersistentVolume')) {
    if (object.kind !== 'PersistentVolume') continue;
    const expression = object.spec.nodeAffinity?.required?.nodeSelectorTerms[0]?.matchExpressions?.[0];
    views.push({
      name: object.metadata.name,
      phase: pvPhase(world, object, taken),
      claim: pvClaim(object, taken),
      volumeHandle: object.spec.csi?.volumeHandle ?? null,
      capacityBytes: parseQuantityBytes(object.spec.capacity?.storage) ?? null,
      reclaimPolicy:
        object.spec.persistentVolumeReclaimPolicy ??
        (object.spec.claimRef === undefined ? 'Retain' : null),
      zone: expression?.values?.[0] ?? null,
      storageClassName: object.spec.storageClassName ?? null,
      provisioned: object.metadata.annotations?.[provisionedByAnnotation] !== undefined,
    });
  }
  return views.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
