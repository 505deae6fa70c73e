/**
 * Folding dynamic provisioning, as Kubernetes' persistent-volume controller and the CSI
 * external-provisioner and external-resizer record it: CreateVolume answered (the PV
 * `pvc-<claim uid>` recorded, bound to its claim: pv_controller.go provisionClaimOperation),
 * DeleteVolume answered (the PV goes: deleteVolumeOperation), ControllerExpandVolume
 * answered (the PV's capacity grows), and the pvc-protection controller's decision.
 */
import type { EventOf } from '../events/index.js';
import { objectKey, type PersistentVolume } from '../events/k8s.js';
import type { UniqueVolumeName } from '../ids.js';
import { removeObject } from '../desired/intake.js';
import { claimExpanded, reresolveObject } from './fold-desired.js';
import { claimGone, trackResize } from './provisioning.js';
import {
  csiVolumeName,
  foldCreateVolumeCall,
  requestClaim,
  volumeCreated,
  volumeDeleted,
} from '../binding/provisioning.js';
import type { World } from './types.js';
import type { RunningOp } from '../operations/types.js';

/**
 * A provisioning call's outcome: CreateVolume's bookkeeping is provisioning's policy
 * (src/binding/provisioning.ts); answered OK, the PV is recorded and bound to its claim.
 * DeleteVolume and ControllerExpandVolume answered OK.
 */
export function foldProvisioningCall(
  world: World,
  op: RunningOp,
  event: EventOf<'CallStarted' | 'CallSucceeded' | 'CallFailed'>,
): void {
  const step = foldCreateVolumeCall(world, op.volume, event);
  if (step === 'created' && event.type === 'CallSucceeded')
    volumeProvisioned(world, op.volume, event);
  if (step !== 'none' || event.type !== 'CallSucceeded') return;
  if (event.call === 'deleteVolume') {
    const pvName = volumeDeleted(world, op.volume);
    if (pvName !== undefined) reresolveObject(world, { kind: 'PersistentVolume', name: pvName });
  }
  if (event.call === 'controllerExpand') volumeExpanded(world, op.volume, event);
}

/** provisionClaimOperation: CreateVolume answered; the PV is made, bound to its claim. */
function volumeProvisioned(
  world: World,
  volume: UniqueVolumeName,
  event: EventOf<'CallSucceeded'>,
): void {
  const request = world.provisioning.inFlight.get(volume)!.request;
  const { pv, capacityBytes } = volumeCreated(world, volume, event);
  const pvc = requestClaim(world.objects, request);
  if (pvc !== undefined) {
    const key = objectKey('PersistentVolumeClaim', request.claim.name, request.claim.namespace);
    world.bindings.set(key, { volume: pv.metadata.name, capacityBytes });
    world.unboundClaims.delete(key);
    trackResize(world, key, pvc);
  }
  reresolveObject(world, { kind: 'PersistentVolumeClaim', ...request.claim });
  reresolveObject(world, { kind: 'PersistentVolume', name: pv.metadata.name });
}

/** The resizer: ControllerExpandVolume answered; the PV's capacity is the new size. */
function volumeExpanded(world: World, volume: UniqueVolumeName, event: EventOf<'CallSucceeded'>) {
  const pvName = world.provisioning.provisioned.get(volume) ?? pvNameOfVolume(world, volume);
  const pv = pvName === undefined ? undefined : world.objects.lookup('PersistentVolume', pvName);
  const sizeBytes = event.sizeBytes ?? 0;
  if (pv?.kind !== 'PersistentVolume' || sizeBytes <= 0) return;
  world.objects.put({
    ...pv,
    spec: { ...pv.spec, capacity: { ...pv.spec.capacity, storage: sizeBytes } },
  });
  const claim = claimOfPv(world, pv);
  if (claim !== undefined) {
    world.provisioning.resizing.delete(claim.key);
    // No node expansion to come: the claim's capacity is the new size at once.
    if (event.nodeExpansionRequired === false)
      claimExpanded(world, claim, pv.metadata.name, sizeBytes);
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

/** The pvc-protection controller's decision recorded: the claim goes now. */
export function foldClaimFinalizerRemoved(world: World, event: EventOf<'ClaimFinalizerRemoved'>) {
  const key = objectKey('PersistentVolumeClaim', event.claim, event.namespace);
  world.provisioning.protectedClaims.delete(key);
  const claim = { kind: 'PersistentVolumeClaim', name: event.claim, namespace: event.namespace };
  removeObject(world, claim);
  claimGone(world, key);
  reresolveObject(world, claim);
}
