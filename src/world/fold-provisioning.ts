/**
 * Folding dynamic provisioning, as Kubernetes' persistent-volume controller and the CSI
 * external-provisioner and external-resizer record it: CreateVolume answered (the PV
 * `pvc-<claim uid>` recorded, bound to its claim: pv_controller.go provisionClaimOperation),
 * DeleteVolume answered (the PV goes: deleteVolumeOperation), ControllerExpandVolume
 * answered (the PV's capacity grows), and the pvc-protection controller's decision.
 */
import type { EventOf, ProvisionRequest } from '../events/index.js';
import { objectKey, type PersistentVolume } from '../events/k8s.js';
import type { UniqueVolumeName } from '../ids.js';
import { removeObject } from '../desired/intake.js';
import { claimExpanded, reresolveObject } from './fold-desired.js';
import { claimExists, claimGone, csiVolumeName, trackResize } from './provisioning.js';
import { nodeAffinityOf, provisionedByAnnotation } from '../binding/storage-class.js';
import type { RunningOp, World } from './types.js';

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
    if (
      event.type === 'CallFailed' &&
      !record.mayExist &&
      claimExists(world, record.request) === undefined
    )
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
  world.provisioning.provisioned.set(
    csiVolumeName(request.driver, created.volumeId),
    pv.metadata.name,
  );
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

/** The PV the external-provisioner records for a created volume (the controller records it too). */
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
