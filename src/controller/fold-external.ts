/**
 * The fold of the PersistentVolume controller's decisions left to an external provisioner
 * (plan-external.ts decides them): each is applied to the world's copy of the object at
 * once (the claim's annotations, the PV's phase), as the provisioner's fold records the PV
 * it made, so the planner does not decide it again; the API's copy replaces it when the
 * informer sees it. Pure.
 */
import type { EventOf } from '../events/index.js';
import type { PersistentVolumeClaim } from '../events/k8s.js';
import type { ClaimView } from '../binding/claims-view.js';
import {
  requestedAnnotations,
  selectedNodeAnnotation,
  storageProvisionerAnnotation,
} from '../binding/external-provisioning.js';
import type { ControllerWorld } from './types.js';

/** The decision applied to the world's copy of the claim or PV (until the API's replaces it). */
export function foldExternalProvisioning(
  world: ControllerWorld,
  event: EventOf<'ExternalProvisioningRequested' | 'VolumeReleased'>,
): void {
  if (event.type === 'VolumeReleased') {
    const pv = world.objects.lookup('PersistentVolume', event.pv);
    if (pv?.kind !== 'PersistentVolume') return; // gone meanwhile
    world.objects.put({ ...pv, status: { ...pv.status, phase: 'Released' } });
    return;
  }
  const pvc = world.objects.lookup('PersistentVolumeClaim', event.claim, event.namespace);
  if (pvc?.kind !== 'PersistentVolumeClaim') return;
  const annotations = { ...pvc.metadata.annotations, ...requestedAnnotations(event) };
  world.objects.put({ ...pvc, metadata: { ...pvc.metadata, annotations } });
}

/**
 * Where a claim left to an external provisioner stands (`vole why`, `vole get pvcs`): the
 * binder's view says its driver makes no volumes here, which is so, but the provisioner
 * it is left to is the news: annotated for it (waiting for its PV), or not yet (waiting for
 * a first consumer, or for the binder).
 */
export function externalClaimView(
  world: ControllerWorld,
  pvc: PersistentVolumeClaim,
  view: ClaimView,
): ClaimView {
  if (world.config.externalProvisioning !== true || view.state !== 'WaitingForProvisioner')
    return view;
  const annotations = pvc.metadata.annotations ?? {};
  const provisioner = annotations[storageProvisionerAnnotation];
  if (provisioner === undefined)
    return { ...view, detail: `${view.detail}; not yet annotated for an external provisioner` };
  const node = annotations[selectedNodeAnnotation];
  const at = node === undefined ? '' : ` (selected node ${node})`;
  return {
    ...view,
    state: 'ExternalProvisioning',
    detail: `left to the external provisioner "${provisioner}"${at}: waiting for its PersistentVolume`,
  };
}
