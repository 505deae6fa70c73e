/**
 * Dynamic provisioning in the leading controller's world (cluster mode: whoever binds
 * claims provisions), folded as the kubelet's world folds it in standalone mode
 * (src/kubelet/fold-provisioning.ts), with one difference of Kubernetes' own: the
 * provisioner records the PV `pvc-<claim uid>` with its claimRef (external-provisioner
 * Provision), and the binder then binds the claim to it (pv_controller.go syncUnboundClaim
 * finds the PV pre-bound to the claim), so the binding is a ClaimBound like any other and
 * the cluster writes it, and creates the PV, in one fenced transaction.
 *
 * Pure: the fold's part; the decisions are the planner's (plan-provision.ts).
 */
import type { EventOf } from '../events/index.js';
import { type ClusterObject, objectKey, type PersistentVolumeClaim } from '../events/k8s.js';
import type { NodeName, UniqueVolumeName } from '../ids.js';
import { bindingVolume } from '../binding/claims.js';
import { bytesQuantity, claimWantsExpansion } from '../binding/expansion.js';
import {
  csiVolumeName,
  foldCreateVolumeCall,
  volumeCreated,
  volumeDeleted,
} from '../binding/provisioning.js';
import {
  type ClaimView,
  claimStanding,
  claimStandings,
  persistentVolumes,
  type PvView,
} from '../binding/claims-view.js';
import { isProtectionCandidate } from '../binding/claim-protection.js';
import type { RunningOp } from '../operations/types.js';
import { externalClaimView } from './fold-external.js';
import { claimUsersChanged, readsClaimIn } from '../desired/intake.js';
import { podsReferencing, type References } from '../desired/references.js';
import type { ControllerWorld } from './types.js';

/** What the provisioner, the resizer and pvc-protection keep, empty. */
export function initialProvisioning(): ControllerWorld['provisioning'] {
  return {
    inFlight: new Map(),
    provisioned: new Map(),
    protectedClaims: new Set(),
    resizing: new Set(),
  };
}

/**
 * An object came, changed (`object`) or went (undefined): a claim's pvc-protection and
 * wanted expansion, and the expansion of the claim bound to a PV, are looked at again.
 */
export function storageObjectChanged(
  world: ControllerWorld,
  key: string,
  object: ClusterObject | undefined,
): void {
  if (object?.kind === 'PersistentVolume') return trackResizeOfPv(world, object);
  if (!key.startsWith('PersistentVolumeClaim/')) return;
  trackClaimProtection(world, key, object);
  if (object === undefined) world.provisioning.resizing.delete(key);
  else trackControllerResize(world, key);
}

/** The claim pvc-protection released: it goes from the world now (the writer's, from etcd). */
export function releasedClaim(event: EventOf<'ClaimFinalizerRemoved'>) {
  const { claim: name, namespace } = event;
  return { kind: 'PersistentVolumeClaim' as const, name, namespace };
}

/**
 * A provisioning call's outcome. CreateVolume's bookkeeping is provisioning's policy
 * (src/binding/provisioning.ts); answered OK, the PV is recorded with its claimRef and the
 * binder is asked to look (a claim deleted meanwhile leaves it Released, and reclaim
 * deletes it). DeleteVolume answered OK: the PV goes. ControllerExpandVolume answered OK:
 * the PV's capacity grows (the bindings writer writes it to etcd; each node agent expands
 * its mounts from it).
 */
export function foldControllerProvisioningCall(
  world: ControllerWorld,
  op: RunningOp,
  event: EventOf<'CallStarted' | 'CallSucceeded' | 'CallFailed'>,
): void {
  const step = foldCreateVolumeCall(world, op.volume, event);
  if (step === 'created' && event.type === 'CallSucceeded') {
    volumeCreated(world, op.volume, event);
    world.bindingCause = world.seq;
    world.dirty.add(bindingVolume);
  }
  if (step !== 'none' || event.type !== 'CallSucceeded') return;
  if (event.call === 'controllerExpand') return volumeExpanded(world, op.volume, event);
  if (event.call === 'deleteVolume') volumeDeleted(world, op.volume);
}

/**
 * A claim came, changed or went: one being deleted that holds the pvc-protection finalizer
 * is the planner's to release (pvc_protection_controller.go processPVC), once no pod uses it.
 */
function trackClaimProtection(
  world: ControllerWorld,
  key: string,
  next: ClusterObject | undefined,
): void {
  const { protectedClaims } = world.provisioning;
  const ours = world.config.pvcProtection === true;
  if (ours && next?.kind === 'PersistentVolumeClaim' && isProtectionCandidate(next)) {
    protectedClaims.add(key);
    world.dirty.add(bindingVolume);
  } else protectedClaims.delete(key);
}

/** The controller cites the pod that lets a claim go. */
const citing = { cites: true } as const;

/**
 * A pod came, changed or went (what it read): a claim held by pvc-protection that it named
 * may be released now, so the planner looks at claims again (enqueuePVCs).
 */
export function protectedClaimUsersChanged(
  world: ControllerWorld,
  references: References,
  namespace: string,
): void {
  if (readsClaimIn(references, namespace, world.provisioning.protectedClaims))
    claimUsersChanged(world, citing);
}

/**
 * podUsesPVC: some pod scheduled to a node names the claim. As upstream, a pod that
 * finished (Succeeded, Failed) still holds it until it is deleted: only a scheduled pod's
 * kubelet may have it mounted, and it never starts one whose claim is being deleted.
 */
export function claimUsedByPod(world: ControllerWorld, pvc: PersistentVolumeClaim): boolean {
  const { name, namespace } = pvc.metadata;
  for (const uid of podsReferencing(world.podsByObject, 'PersistentVolumeClaim', name, namespace)) {
    const record = world.pods.get(uid);
    if (record !== undefined && record.node !== null) return true;
  }
  return false;
}

/**
 * A claim, its binding or its PV changed: expansion is wanted while the claim is bound,
 * its class allows expansion and it asks for more than its CSI PV has (the resizer's
 * watch), so the planner looks at claims again.
 */
export function trackControllerResize(world: ControllerWorld, key: string): void {
  const { resizing } = world.provisioning;
  const pvc = world.objects.get(key);
  const wanted =
    pvc?.kind === 'PersistentVolumeClaim' &&
    claimWantsExpansion(world.objects, world.bindings.get(key), pvc);
  if (!wanted) return void resizing.delete(key);
  resizing.add(key);
  world.dirty.add(bindingVolume);
}

/** A PV changed: the claim bound to it may want expansion now, or no more. */
function trackResizeOfPv(world: ControllerWorld, pv: ClusterObject): void {
  const ref = pv.kind === 'PersistentVolume' ? pv.spec.claimRef : undefined;
  if (ref?.name === undefined) return;
  const key = objectKey('PersistentVolumeClaim', ref.name, ref.namespace ?? 'default');
  if (world.bindings.get(key)?.volume === pv.metadata.name) trackControllerResize(world, key);
}

/** The claim key and PV a resizing claim's CSI volume is, if one is. */
function resizingOf(world: ControllerWorld, volume: UniqueVolumeName) {
  for (const key of world.provisioning.resizing) {
    const pvName = world.bindings.get(key)?.volume;
    const pv =
      pvName === undefined ? undefined : world.objects.get(objectKey('PersistentVolume', pvName));
    const csi = pv?.kind === 'PersistentVolume' ? pv.spec.csi : undefined;
    if (csi?.volumeHandle === undefined) continue;
    if (csiVolumeName(csi.driver, csi.volumeHandle) === volume && pv?.kind === 'PersistentVolume')
      return { key, pv };
  }
  return undefined;
}

/** The resizer: ControllerExpandVolume answered; the PV's capacity is the new size. */
function volumeExpanded(
  world: ControllerWorld,
  volume: UniqueVolumeName,
  event: EventOf<'CallSucceeded'>,
): void {
  const sizeBytes = event.sizeBytes ?? 0;
  const found = resizingOf(world, volume);
  if (found === undefined || sizeBytes <= 0) return;
  const { key, pv } = found;
  const storage = bytesQuantity(sizeBytes);
  const grown = { ...pv, spec: { ...pv.spec, capacity: { ...pv.spec.capacity, storage } } };
  world.objects.put(grown);
  trackControllerResize(world, key);
}

/** The node of the first pod (by uid) scheduled with this claim: its first consumer. */
export function consumerNode(
  world: ControllerWorld,
  pvc: PersistentVolumeClaim,
): NodeName | undefined {
  const { name, namespace } = pvc.metadata;
  for (const uid of podsReferencing(world.podsByObject, 'PersistentVolumeClaim', name, namespace)) {
    const record = world.pods.get(uid);
    if (record !== undefined && record.node !== null && !record.terminated) return record.node;
  }
  return undefined;
}

/**
 * Where a claim stands with the leading controller's binder and provisioner (`vole why`,
 * `vole status`, `vole get pvcs`, the inspector): its first consumer is a pod scheduled to
 * a node, as the controller's planner reads it.
 */
export function controllerClaimView(world: ControllerWorld, pvc: PersistentVolumeClaim): ClaimView {
  const view = claimStanding(world, pvc, (p) => consumerNode(world, p) !== undefined);
  return externalClaimView(world, pvc, view);
}

/** Every claim of the controller's world, by `namespace/name`. */
export function controllerClaimViews(world: ControllerWorld): ClaimView[] {
  return claimStandings(world, (p) => consumerNode(world, p) !== undefined).map((view) => {
    const pvc = world.objects.get(`PersistentVolumeClaim/${view.claim}`);
    return pvc?.kind === 'PersistentVolumeClaim' ? externalClaimView(world, pvc, view) : view;
  });
}

/** Every PV of the controller's world with its phase, as `vole get pvs` lists them. */
export function controllerPvViews(world: ControllerWorld): PvView[] {
  return persistentVolumes(world);
}
