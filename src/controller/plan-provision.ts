/**
 * The leading controller's provisioning decisions (cluster mode: whoever binds claims
 * provisions), in the persistent-volume controller's and CSI external-provisioner's order,
 * as the kubelet's planner makes them in standalone mode (src/kubelet/plan-provision.ts):
 *
 * - an unbound claim of a class whose provisioner is a CSI driver with CREATE_DELETE_VOLUME,
 *   that no static PV of its class satisfies, is provisioned (pv_controller.go
 *   syncUnboundClaim → provisionClaim): `Immediate` at once, `WaitForFirstConsumer` once a
 *   pod scheduled to a node uses it, with that node's topology (its Node labels under the
 *   driver's topology keys: the kubelet labels its Node with NodeGetInfo's topology);
 * - a CreateVolume that may still be in progress for a claim deleted meanwhile is retried
 *   under the same name (the external-provisioner's provisioning "in background");
 * - a provisioned PV Released with reclaim policy Delete is deleted once its volume is
 *   detached from every node (pv_controller.go reclaimVolume → deleteVolumeOperation);
 * - a bound claim asking for more than its CSI PV has, in a class that allows expansion,
 *   gets ControllerExpandVolume (external-resizer); each node agent then expands its mounts;
 * - a claim being deleted that no scheduled pod names loses its pvc-protection finalizer
 *   (pvc_protection_controller.go processPVC): a ClaimFinalizerRemoved event.
 *
 * Pure. Operations go through the plan's Claims (one operation per volume, backoff).
 */
import type { NewEvent, ProvisionRequest } from '../events/index.js';
import { type PersistentVolumeClaim, type StorageClass } from '../events/k8s.js';
import { NodeName, type UniqueVolumeName } from '../ids.js';
import type { Claims } from '../operations/book.js';
import { provisionRequestOf } from '../binding/provision-request.js';
import { bindingVolume, boundVolumes, findVolumeForClaim } from '../binding/claims.js';
import {
  isProvisionedVolumeName,
  makesVolumes,
  provisionableClaim,
  provisionedPvName,
  provisionedVolumeName,
  provisionerClass,
  reclaimable,
  retriesUnderSameName,
  storageWaits as storageStateWaits,
} from '../binding/provisioning.js';
import { wantedExpansions } from '../binding/expansion.js';
import { claimFinalizerDecisions } from '../binding/claim-protection.js';
import { nodeLabelTopology } from '../binding/storage-class.js';
import { claimUsedByPod, consumerNode } from './provisioning.js';
import type { ControllerOperation, ControllerWorld } from './types.js';

type ControllerClaims = Claims<ControllerOperation>;

/** The topology of a node for a driver: its Node's labels under the driver's topology keys. */
function nodeTopologyOf(world: ControllerWorld, driver: string, node: string) {
  const object = world.objects.lookup('Node', node);
  const labels = object?.kind === 'Node' ? (object.metadata.labels ?? {}) : {};
  return nodeLabelTopology(world.plugins, driver, labels);
}

/**
 * The class this controller provisions the claim with now, and the selected node
 * (WaitForFirstConsumer: the node of its first consumer, a pod scheduled with it).
 */
function provisioningClassOf(world: ControllerWorld, pvc: PersistentVolumeClaim) {
  let node: NodeName | undefined; // asked for WaitForFirstConsumer only
  const chosen = provisionerClass(world, pvc, (p) => (node = consumerNode(world, p)) !== undefined);
  if (chosen === undefined || chosen.driverMissing || chosen.waitsForConsumer) return undefined;
  return { sc: chosen.sc, node };
}

/** The CreateVolume request for a claim (and why it cannot be made, when it cannot). */
function requestOf(
  world: ControllerWorld,
  pvc: PersistentVolumeClaim,
  sc: StorageClass,
  node: NodeName | undefined,
): { request: ProvisionRequest; refused?: string } {
  const topology = node === undefined ? {} : nodeTopologyOf(world, sc.provisioner, node);
  return provisionRequestOf(pvc, sc, { name: node ?? '', topology }, node !== undefined);
}

/** A provisioner's operation on `volume`: on no node, caused by the volume or the claims. */
function storageOp(
  world: ControllerWorld,
  op: 'provision' | 'deleteVolume' | 'controllerExpand',
  volume: UniqueVolumeName,
) {
  const key = { volume, pod: '', node: '' };
  return {
    op,
    volume,
    node: NodeName(''),
    key,
    cause: world.causes.get(volume) ?? world.bindingCause,
  };
}

function provisionOp(
  world: ControllerWorld,
  volume: UniqueVolumeName,
  made: { request: ProvisionRequest; refused?: string },
): ControllerOperation {
  return {
    ...storageOp(world, 'provision', volume),
    provision: made.request,
    ...(made.refused === undefined ? {} : { refused: made.refused }),
  };
}

/** provisionClaim for each unbound claim no static PV serves (sorted by key). */
function planProvisions(world: ControllerWorld, claims: ControllerClaims): void {
  let taken: ReadonlyMap<string, string> | undefined;
  for (const key of [...world.unboundClaims].sort()) {
    const pvc = provisionableClaim(world, world.bindings, key);
    if (pvc === undefined) continue;
    const chosen = provisioningClassOf(world, pvc);
    if (chosen === undefined) continue;
    const volume = provisionedVolumeName(chosen.sc, pvc);
    // Made already: the binder binds the claim to it (the PV's claimRef names it).
    if (world.objects.lookup('PersistentVolume', provisionedPvName(pvc)) !== undefined) continue;
    taken ??= boundVolumes(world.objects, world.bindings);
    if (findVolumeForClaim(pvc, world.objects, taken).ok) continue; // a static PV first
    claims.tryRun(provisionOp(world, volume, requestOf(world, pvc, chosen.sc, chosen.node)));
  }
  // A CreateVolume that may have taken effect for a claim now gone: retried, same request.
  for (const [volume, record] of world.provisioning.inFlight) {
    if (!retriesUnderSameName(world.objects, record)) continue;
    claims.tryRun(provisionOp(world, volume, { request: record.request }));
  }
}

/** reclaimVolume: a Released provisioned PV with policy Delete, once detached everywhere. */
function planReclaims(
  world: ControllerWorld,
  claims: ControllerClaims,
  volumes: readonly UniqueVolumeName[] | undefined,
): void {
  const all = volumes === undefined || volumes.includes(bindingVolume);
  const asked = all ? [...world.provisioning.provisioned.keys()].sort() : volumes;
  for (const volume of asked) {
    const pvName = world.provisioning.provisioned.get(volume);
    if (pvName === undefined) continue;
    if (!reclaimable(world.objects, pvName)) continue;
    const pv = world.objects.lookup('PersistentVolume', pvName);
    const driver = pv?.kind === 'PersistentVolume' ? (pv.spec.csi?.driver ?? '') : '';
    // A volume no plugin here deletes is its provisioner's (an external one) to delete.
    if (!makesVolumes(world.plugins, driver)) continue;
    if (world.nodesByVolume.has(volume)) continue; // attached or wanted somewhere still
    claims.tryRun({ ...storageOp(world, 'deleteVolume', volume), pv: pvName });
  }
}

/**
 * The resizer: ControllerExpandVolume for each bound claim asking for more than its PV has,
 * on a full plan, when claims changed, or for its volume (a retry, a finished operation).
 */
function planExpansions(
  world: ControllerWorld,
  claims: ControllerClaims,
  volumes: readonly UniqueVolumeName[] | undefined,
): void {
  const all = volumes === undefined || volumes.includes(bindingVolume);
  const { objects, bindings, provisioning } = world;
  for (const wanted of wantedExpansions(objects, bindings, provisioning.resizing)) {
    const { volume } = wanted;
    if (!all && !volumes.includes(volume)) continue;
    const { pv, sizeBytes } = wanted;
    claims.tryRun({ ...storageOp(world, 'controllerExpand', volume), pv, sizeBytes });
  }
}

/** pvc-protection: each claim being deleted that no scheduled pod names loses its finalizer. */
function planClaimFinalizers(world: ControllerWorld, nowMs: number): NewEvent[] {
  const at = { nowMs, cause: world.bindingCause, seq: world.seq };
  const inUse = (pvc: PersistentVolumeClaim) => claimUsedByPod(world, pvc);
  return claimFinalizerDecisions(world.objects, world.provisioning.protectedClaims, inUse, at);
}

/** Is some storage state waiting, so that a plan must look at storage at all? */
export function controllerStorageWaits(world: ControllerWorld): boolean {
  return storageStateWaits(world.unboundClaims, world.provisioning);
}

/**
 * The provisioner's and reclaimer's operations of one plan, claimed through `claims`: on a
 * full plan, when claims or PVs changed (`bindingVolume`), or for a provisioned volume
 * (`…^pvc-<uid>`: a retry, a finished operation, a detach done). Returns pvc-protection's
 * decisions, which are events (on a full plan, or when claims changed).
 */
export function planControllerStorage(
  world: ControllerWorld,
  claims: ControllerClaims,
  volumes: readonly UniqueVolumeName[] | undefined,
): NewEvent[] {
  if (!controllerStorageWaits(world)) return [];
  // First, so a volume being expanded is not also attached or detached in the same plan.
  if (world.provisioning.resizing.size > 0) planExpansions(world, claims, volumes);
  const asked =
    volumes === undefined || volumes.some((v) => v === bindingVolume || isProvisionedVolumeName(v));
  if (!asked) return [];
  planProvisions(world, claims);
  planReclaims(world, claims, volumes);
  const claimsChanged = volumes === undefined || volumes.includes(bindingVolume);
  return claimsChanged ? planClaimFinalizers(world, claims.nowMs) : [];
}
