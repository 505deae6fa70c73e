/**
 * The fold of the PersistentVolume controller's decisions left to an external provisioner
 * (plan-external.ts decides them): each is applied to the world's copy of the object at
 * once (the claim's annotations, the PV's phase), as the provisioner's fold records the PV
 * it made, so the planner does not decide it again; the API's copy replaces it when the
 * informer sees it. Pure.
 */
import type { EventOf } from '../events/index.js';
import { objectKey } from '../events/k8s.js';
import type { ControllerWorld } from './types.js';

/** AnnStorageProvisioner: the external-provisioner provisions claims naming it here. */
export const storageProvisionerAnnotation = 'volume.kubernetes.io/storage-provisioner';
/** AnnBetaStorageProvisioner: set beside it, as Kubernetes still does. */
export const betaStorageProvisionerAnnotation = 'volume.beta.kubernetes.io/storage-provisioner';
/** AnnSelectedNode: the scheduler's choice for a WaitForFirstConsumer claim. */
export const selectedNodeAnnotation = 'volume.kubernetes.io/selected-node';

/** The claim's annotations once the request is carried out. */
export function requestedAnnotations(
  event: Pick<EventOf<'ExternalProvisioningRequested'>, 'provisioner' | 'selectedNode'>,
): Record<string, string> {
  return {
    [betaStorageProvisionerAnnotation]: event.provisioner,
    [storageProvisionerAnnotation]: event.provisioner,
    ...(event.selectedNode === undefined ? {} : { [selectedNodeAnnotation]: event.selectedNode }),
  };
}

/** The decision applied to the world's copy of the claim or PV (until the API's replaces it). */
export function foldExternalProvisioning(
  world: ControllerWorld,
  event: EventOf<'ExternalProvisioningRequested' | 'VolumeReleased'>,
): void {
  if (event.type === 'VolumeReleased') {
    const key = objectKey('PersistentVolume', event.pv);
    const pv = world.objects.get(key);
    if (pv?.kind !== 'PersistentVolume') return; // gone meanwhile
    world.objects.set(key, { ...pv, status: { ...pv.status, phase: 'Released' } });
    return;
  }
  const key = objectKey('PersistentVolumeClaim', event.claim, event.namespace);
  const pvc = world.objects.get(key);
  if (pvc?.kind !== 'PersistentVolumeClaim') return;
  const annotations = { ...pvc.metadata.annotations, ...requestedAnnotations(event) };
  world.objects.set(key, { ...pvc, metadata: { ...pvc.metadata, annotations } });
}
