/**
 * The PersistentVolume controller's policy for volumes another program provisions and
 * deletes (Kubernetes' external-provisioner), pure: which unbound claim is annotated for it
 * and with which selected node (pv_controller.go syncUnboundClaim → provisionClaim →
 * setClaimProvisioner), the annotations it writes, and which PV is Released (syncVolume).
 * The controller's planner turns the answers into events (src/controller/plan-external.ts),
 * its fold applies them (src/controller/fold-external.ts), and the API writer carries them
 * out (src/kube/claim-binder.ts).
 */
import type { EventOf, PluginCaps } from '../events/index.js';
import {
  objectKey,
  type ClusterObject,
  type PersistentVolume,
  type PersistentVolumeClaim,
} from '../events/k8s.js';
import { type ClaimBinding, claimUid, lookupOf } from './claims.js';
import { isProvisionable, makesVolumes } from './provisioning.js';
import { claimClassName, storageClassOf, waitsForFirstConsumer } from './storage-class.js';

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

/** What the decision reads of the controller's world. */
export interface ExternalProvisioningWorld {
  readonly objects: ReadonlyMap<string, ClusterObject>;
  readonly bindings: ReadonlyMap<string, ClaimBinding>;
  readonly plugins: ReadonlyMap<string, PluginCaps>;
}

/** The annotations a claim needs for the external-provisioner. */
export interface ExternalProvisioningRequest {
  readonly provisioner: string;
  readonly selectedNode?: string;
}

/**
 * What the claim needs annotated, or undefined when it needs nothing (or must wait): an
 * unbound claim of a class whose provisioner no plugin here provisions with. A
 * WaitForFirstConsumer claim without a selected node gets its first consumer's node
 * (`consumerNode`: the scheduler's part, where pods arrive with spec.nodeName) or waits.
 */
export function externalProvisioningRequest(
  world: ExternalProvisioningWorld,
  pvc: PersistentVolumeClaim,
  consumerNode: (pvc: PersistentVolumeClaim) => string | undefined,
): ExternalProvisioningRequest | undefined {
  // Lost, bound, pre-bound or being deleted: not provisioned (again).
  if (!isProvisionable(pvc, world.bindings)) return;
  const lookup = lookupOf(world.objects);
  const className = claimClassName(pvc, lookup);
  if (className === '') return; // "": static PVs only
  const sc = storageClassOf(lookup, className);
  if (sc === undefined) return; // the class may come later; a claim change asks again
  if (makesVolumes(world.plugins, sc.provisioner)) return; // ours to make
  const annotations = pvc.metadata.annotations ?? {};
  let selectedNode: string | undefined;
  if (waitsForFirstConsumer(sc) && !annotations[selectedNodeAnnotation]) {
    selectedNode = consumerNode(pvc); // the scheduler's part
    if (selectedNode === undefined) return; // no consumer yet: the claim waits
  }
  const done =
    annotations[storageProvisionerAnnotation] === sc.provisioner &&
    annotations[betaStorageProvisionerAnnotation] === sc.provisioner;
  if (done && selectedNode === undefined) return;
  return { provisioner: sc.provisioner, ...(selectedNode === undefined ? {} : { selectedNode }) };
}

/**
 * syncVolume: is the claim the PV's claimRef names gone, or made again (another uid)? A
 * claimRef without a uid is pre-bound to a claim not made yet: the PV stays Available.
 */
export function claimRefGone(
  objects: ReadonlyMap<string, ClusterObject>,
  pv: PersistentVolume,
): boolean {
  const ref = pv.spec.claimRef;
  if (ref?.name === undefined) return false;
  const pvc = objects.get(objectKey('PersistentVolumeClaim', ref.name, ref.namespace));
  const uid = (ref as { uid?: unknown }).uid;
  if (typeof uid !== 'string' || uid === '') return false;
  return pvc?.kind !== 'PersistentVolumeClaim' || claimUid(pvc) !== uid;
}
