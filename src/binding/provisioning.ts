/**
 * Dynamic provisioning's policy, the same whichever core provisions (the kubelet's world
 * in standalone mode: src/kubelet/fold-provisioning.ts, src/kubelet/plan-provision.ts; the leading
 * controller's in cluster mode: src/controller/provisioning.ts, plan-provision.ts), as
 * Kubernetes' persistent-volume controller and the CSI external-provisioner decide it:
 *
 * - which claim is provisioned: unbound, not pre-bound, not being deleted, Pending, of a
 *   class whose provisioner is a CSI driver that creates volumes, no static PV first
 *   (pv_controller.go syncUnboundClaim → provisionClaim), WaitForFirstConsumer once a pod
 *   uses it (the core says which pod counts);
 * - CreateVolume's bookkeeping: a call that started or failed uncertain may have made the
 *   volume (`mayExist`), so a claim deleted meanwhile still gets it made under the same
 *   name and then deleted (the external-provisioner's provisioning "in background");
 * - the PV `pvc-<claim uid>` CreateVolume's answer records, and DeleteVolume's removal;
 * - reclaim: a provisioned PV Released with policy Delete is deleted, Retain is kept
 *   (pv_controller.go reclaimVolume); when nothing uses it is the core's to say.
 *
 * Pure. The cores keep the records (ProvisioningBook) and their own effects of an answer.
 */
import { fail } from '../assert.js';
import type { EventOf, PluginCaps, ProvisionRequest } from '../events/index.js';
import type {
  ClusterObject,
  PersistentVolume,
  PersistentVolumeClaim,
  StorageClass,
} from '../events/k8s.js';
import { UniqueVolumeName } from '../ids.js';
import { type ClaimBinding, claimUid, isClaimBound } from './claims.js';
import {
  claimClassName,
  nodeAffinityOf,
  type ObjectLookup,
  provisionedByAnnotation,
  storageClassOf,
  waitsForFirstConsumer,
} from './storage-class.js';

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

/** What either core keeps of the volumes it provisions. */
export interface ProvisioningBook {
  /** The provisioned volume's unique name → its provisioning, while it runs or may exist. */
  readonly inFlight: Map<UniqueVolumeName, ProvisionRecord>;
  /** The unique name of each PV a provisioner made → the PV's name (reclaim, expansion). */
  readonly provisioned: Map<UniqueVolumeName, string>;
}

/** What either core keeps of storage: provisioning, pvc-protection and expansion. */
export interface StorageBook extends ProvisioningBook {
  /** Claim keys being deleted that a pod still holds (pvc-protection, claim-protection.ts). */
  readonly protectedClaims: Set<string>;
  /** Bound claims asking for more than their PV has, in a class allowing expansion. */
  readonly resizing: Set<string>;
}

/** Is some storage state waiting, so that a plan must look at storage at all? */
export function storageWaits(unboundClaims: ReadonlySet<string>, book: StorageBook): boolean {
  return (
    unboundClaims.size > 0 ||
    book.inFlight.size > 0 ||
    book.provisioned.size > 0 ||
    book.protectedClaims.size > 0 ||
    book.resizing.size > 0
  );
}

/** The cluster objects as provisioning reads and writes them (src/desired/objects.ts). */
export interface ObjectStore extends ObjectLookup {
  put(object: ClusterObject): ClusterObject | undefined;
  remove(kind: string, name: string, namespace?: string): boolean;
}

/** What provisioning's bookkeeping reads and changes of a world, kubelet's or controller's. */
export interface ProvisioningWorld {
  readonly objects: ObjectStore;
  readonly provisioning: ProvisioningBook;
}

/** `kubernetes.io/csi/<driver>^<volumeHandle>`: a CSI PV's unique volume name. */
export function csiVolumeName(driver: string, handle: string): UniqueVolumeName {
  return UniqueVolumeName(`kubernetes.io/csi/${driver}^${handle}`);
}

/** The PV (and CSI volume handle) a claim's provisioning makes: `pvc-<claim uid>`. */
export function provisionedPvName(pvc: PersistentVolumeClaim): string {
  return `pvc-${claimUid(pvc)}`;
}

/**
 * Is the volume one a claim's provisioning makes (`…^pvc-<claim uid>`)? A plan asked about
 * some volumes only looks at provisioning when one of them may be.
 */
export function isProvisionedVolumeName(volume: UniqueVolumeName): boolean {
  return volume.includes('^pvc-');
}

/** The volume a claim's provisioning makes: `pvc-<claim uid>` of the class's driver. */
export function provisionedVolumeName(sc: StorageClass, pvc: PersistentVolumeClaim) {
  return csiVolumeName(sc.provisioner, provisionedPvName(pvc));
}

/** The claim a request was made for, if it exists still (a claim made again is another). */
export function requestClaim(
  objects: ObjectLookup,
  request: ProvisionRequest,
): PersistentVolumeClaim | undefined {
  const { namespace, name, uid } = request.claim;
  const pvc = objects.lookup('PersistentVolumeClaim', name, namespace);
  if (pvc?.kind !== 'PersistentVolumeClaim') return undefined;
  return claimUid(pvc) === uid ? pvc : undefined;
}

/**
 * Is the claim one a provisioner makes a volume for: unbound, not pre-bound (the binder's
 * alone), not being deleted, and Pending (a Lost claim is not provisioned again)?
 */
export function isProvisionable(
  pvc: PersistentVolumeClaim,
  bindings: ReadonlyMap<string, ClaimBinding>,
): boolean {
  if (isClaimBound(pvc, bindings) || (pvc.spec.volumeName ?? '') !== '') return false;
  if (pvc.metadata.deletionTimestamp !== undefined) return false;
  const phase = pvc.status?.phase;
  return phase === undefined || phase === 'Pending';
}

/** The claim a provisioning plan looks at: unbound, not pre-bound, not being deleted, Pending. */
export function provisionableClaim(
  world: { readonly objects: ReadonlyMap<string, ClusterObject> },
  bindings: ReadonlyMap<string, ClaimBinding>,
  key: string,
): PersistentVolumeClaim | undefined {
  const object = world.objects.get(key);
  if (object?.kind !== 'PersistentVolumeClaim') return undefined;
  return isProvisionable(object, bindings) ? object : undefined;
}

/**
 * Does a plugin here make and delete the driver's volumes (a registered CSI driver with
 * CREATE_DELETE_VOLUME)? Otherwise its volumes are another provisioner's to make and delete.
 */
export function makesVolumes(plugins: ReadonlyMap<string, PluginCaps>, driver: string): boolean {
  return plugins.get(driver)?.csi?.createDelete === true;
}

/** A claim's class as a provisioner sees it (for people too: why a claim waits). */
export interface ProvisionerClass {
  readonly sc: StorageClass;
  /** WaitForFirstConsumer: the volume is made for the node of the claim's first consumer. */
  readonly selected: boolean;
  /** Its provisioner is no registered CSI driver able to create volumes. */
  readonly driverMissing: boolean;
  /** WaitForFirstConsumer and no pod uses the claim yet. */
  readonly waitsForConsumer: boolean;
}

/** The class of a claim with a provisioner, or undefined (no class, or no such class). */
export function provisionerClass(
  world: { readonly objects: ObjectLookup; readonly plugins: ReadonlyMap<string, PluginCaps> },
  pvc: PersistentVolumeClaim,
  inUse: (pvc: PersistentVolumeClaim) => boolean,
): ProvisionerClass | undefined {
  const className = claimClassName(pvc, world.objects);
  if (className === '') return undefined; // "": static PVs without a class only
  const sc = storageClassOf(world.objects, className);
  if (sc === undefined) return undefined;
  const driverMissing = !makesVolumes(world.plugins, sc.provisioner);
  const selected = waitsForFirstConsumer(sc);
  return { sc, selected, driverMissing, waitsForConsumer: selected && !inUse(pvc) };
}

/** A CreateVolume that may have taken effect for a claim now gone: retried, same request. */
export function retriesUnderSameName(objects: ObjectLookup, record: ProvisionRecord): boolean {
  return record.mayExist && requestClaim(objects, record.request) === undefined;
}

/** Is the claim a PV's claimRef names gone (or made again: another uid)? */
function isReleased(objects: ObjectLookup, pv: PersistentVolume): boolean {
  const ref = pv.spec.claimRef;
  if (ref?.name === undefined) return false;
  const pvc = objects.lookup('PersistentVolumeClaim', ref.name, ref.namespace ?? 'default');
  const uid = (ref as { uid?: string }).uid;
  return pvc?.kind !== 'PersistentVolumeClaim' || (uid !== undefined && claimUid(pvc) !== uid);
}

/**
 * reclaimVolume: the provisioned PV to delete now, once nothing uses its volume (the
 * core's to say): it exists, is Released, and its policy is Delete (Retain keeps it).
 */
export function reclaimable(objects: ObjectLookup, pvName: string): boolean {
  const pv = objects.lookup('PersistentVolume', pvName);
  if (pv?.kind !== 'PersistentVolume') return false;
  if ((pv.spec.persistentVolumeReclaimPolicy ?? 'Delete') !== 'Delete') return false;
  return isReleased(objects, pv);
}

/** A provision operation started: its CreateVolume request is in flight from now on. */
export function provisionStarted(
  book: ProvisioningBook,
  volume: UniqueVolumeName,
  request: ProvisionRequest,
): void {
  const known = book.inFlight.get(volume);
  book.inFlight.set(volume, { request, mayExist: known?.mayExist ?? false });
}

/** What a call did to a provisioning: none (not its CreateVolume), pending, or created. */
export type CreateVolumeStep = 'none' | 'pending' | 'created';

/**
 * A CreateVolume call of an in-flight volume: started, it may exist; failed, it may only
 * when the failure was uncertain, and a final failure for a claim gone ends it. 'created':
 * answered OK with a volume (the core records it: volumeCreated).
 */
export function foldCreateVolumeCall(
  world: ProvisioningWorld,
  volume: UniqueVolumeName,
  event: EventOf<'CallStarted' | 'CallSucceeded' | 'CallFailed'>,
): CreateVolumeStep {
  const record = world.provisioning.inFlight.get(volume);
  if (event.call !== 'createVolume' || record === undefined) return 'none';
  if (event.type === 'CallStarted') record.mayExist = true;
  else if (event.type === 'CallSucceeded')
    return event.provisioned === undefined ? 'pending' : 'created';
  else {
    record.mayExist = event.error.kind === 'uncertain';
    if (!record.mayExist && requestClaim(world.objects, record.request) === undefined)
      world.provisioning.inFlight.delete(volume);
  }
  return 'pending';
}

/**
 * provisionClaimOperation: CreateVolume answered; the PV `pvc-<claim uid>` is recorded
 * with its claimRef (its capacity the answer's, or the request's when it gave none) and
 * the volume is a provisioned one from now on. Returns the PV and its capacity.
 */
export function volumeCreated(
  world: ProvisioningWorld,
  volume: UniqueVolumeName,
  event: EventOf<'CallSucceeded'>,
): { readonly pv: PersistentVolume; readonly capacityBytes: number } {
  const record = world.provisioning.inFlight.get(volume);
  const created = event.provisioned;
  if (record === undefined || created === undefined)
    fail(`volume ${volume}: CreateVolume answered for no provisioning (seq ${event.seq})`);
  const capacityBytes =
    created.capacityBytes > 0 ? created.capacityBytes : record.request.requiredBytes;
  const pv = provisionedPv(record.request, { ...created, capacityBytes });
  world.provisioning.inFlight.delete(volume);
  trackProvisionedPv(world.provisioning, world.objects.put(pv), pv);
  return { pv, capacityBytes };
}

/** deleteVolumeOperation: DeleteVolume answered; the PV goes. Returns its name, if known. */
export function volumeDeleted(
  world: ProvisioningWorld,
  volume: UniqueVolumeName,
): string | undefined {
  const pvName = world.provisioning.provisioned.get(volume);
  if (pvName === undefined) return undefined;
  world.provisioning.provisioned.delete(volume);
  world.objects.remove('PersistentVolume', pvName);
  return pvName;
}

/** The CSI volume a provisioned PV holds (`kubernetes.io/csi/<driver>^<handle>`), if it is one. */
function provisionedVolumeOf(object: ClusterObject | undefined): UniqueVolumeName | undefined {
  if (object?.kind !== 'PersistentVolume') return undefined;
  if (object.metadata.annotations?.[provisionedByAnnotation] === undefined) return undefined;
  const csi = object.spec.csi;
  return csi?.volumeHandle === undefined ? undefined : csiVolumeName(csi.driver, csi.volumeHandle);
}

/** A PV appeared, changed or went: the provisioned ones are the reclaimer's to watch. */
export function trackProvisionedPv(
  book: ProvisioningBook,
  previous: ClusterObject | undefined,
  next: ClusterObject | undefined,
): void {
  const before = provisionedVolumeOf(previous);
  if (before !== undefined && book.provisioned.get(before) === previous!.metadata.name)
    book.provisioned.delete(before);
  const after = provisionedVolumeOf(next);
  if (after !== undefined) book.provisioned.set(after, next!.metadata.name);
}

/** The PV the external-provisioner records for a created volume. */
export function provisionedPv(
  request: ProvisionRequest,
  created: {
    volumeId: string;
    capacityBytes: number;
    volumeContext: Record<string, string>;
    accessibleTopology: Record<string, string>[];
  },
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
      claimRef: {
        kind: 'PersistentVolumeClaim',
        namespace: claim.namespace,
        name: claim.name,
        uid: claim.uid,
      },
      ...(request.mountOptions.length === 0 ? {} : { mountOptions: [...request.mountOptions] }),
      csi: {
        driver: request.driver,
        volumeHandle: created.volumeId,
        ...(request.fsType === '' || request.volumeMode === 'Block'
          ? {}
          : { fsType: request.fsType }),
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
