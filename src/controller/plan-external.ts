/**
 * The PersistentVolume controller's part for volumes another program provisions and
 * deletes (Kubernetes mode: `vole controller --kubeconfig --controllers
 * …,persistentvolume-binder`, where Kubernetes' external-provisioner serves the CSI
 * driver). Pure decisions, each an event the log records and the API writer carries out
 * (src/kube/claim-binder.ts):
 *
 * - ExternalProvisioningRequested: an unbound claim no static PV serves, of a class whose
 *   provisioner no plugin here provisions with, is annotated for the external-provisioner
 *   (pv_controller.go syncUnboundClaim → provisionClaim → setClaimProvisioner). A
 *   WaitForFirstConsumer claim waits until it has a selected node. Where pods arrive with
 *   spec.nodeName (no scheduler runs, or a pod bypassed it), the decision plays the
 *   scheduler's part and selects the node of the claim's first consumer pod. Where
 *   kube-scheduler runs, a consumer has no spec.nodeName until the scheduler's
 *   VolumeBinding plugin has selected the node and the claim is bound (its PreBind waits for
 *   that), so no consumer is on a node while the claim lacks the annotation: vole selects
 *   nothing and needs no flag to know.
 * - VolumeReleased: a PV whose claimRef names a claim that is gone (or made again: another
 *   uid) is Released (syncVolume). The external-provisioner deletes a Released PV with
 *   reclaim policy Delete; one with Retain stays Released.
 *
 * The fold applies each decision to the world's copy at once (fold-external.ts).
 */
import { assert } from '../assert.js';
import type { NewEvent } from '../events/index.js';
import { objectKey, type PersistentVolume, type PersistentVolumeClaim } from '../events/k8s.js';
import { claimUid, isClaimBound, lookupOf } from '../binding/claims.js';
import { bindingModeOf, claimClassName, storageClassOf } from '../binding/storage-class.js';
import {
  betaStorageProvisionerAnnotation,
  selectedNodeAnnotation,
  storageProvisionerAnnotation,
} from './fold-external.js';
import { consumerNode } from './provisioning.js';
import type { ControllerWorld } from './types.js';

/** What the claim needs annotated, or undefined when it needs nothing (or must wait). */
function requestFor(
  world: ControllerWorld,
  pvc: PersistentVolumeClaim,
): { provisioner: string; selectedNode?: string } | undefined {
  if (isClaimBound(pvc, world.bindings) || (pvc.spec.volumeName ?? '') !== '') return;
  if (pvc.metadata.deletionTimestamp !== undefined) return;
  const phase = pvc.status?.phase;
  if (phase !== undefined && phase !== 'Pending') return; // Lost: not provisioned again
  const lookup = lookupOf(world.objects);
  const className = claimClassName(pvc, lookup);
  if (className === '') return; // "": static PVs only
  const sc = storageClassOf(lookup, className);
  if (sc === undefined) return; // the class may come later; a claim change asks again
  if (world.plugins.get(sc.provisioner)?.csi?.createDelete === true) return; // ours to make
  const annotations = pvc.metadata.annotations ?? {};
  let selectedNode: string | undefined;
  if (bindingModeOf(sc) === 'WaitForFirstConsumer' && !annotations[selectedNodeAnnotation]) {
    selectedNode = consumerNode(world, pvc); // the scheduler's part
    if (selectedNode === undefined) return; // no consumer yet: the claim waits
  }
  const done =
    annotations[storageProvisionerAnnotation] === sc.provisioner &&
    annotations[betaStorageProvisionerAnnotation] === sc.provisioner;
  if (done && selectedNode === undefined) return;
  return { provisioner: sc.provisioner, ...(selectedNode === undefined ? {} : { selectedNode }) };
}

/** Is the claim the PV's claimRef names gone, or made again (another uid)? */
function claimGone(world: ControllerWorld, pv: PersistentVolume): boolean {
  const ref = pv.spec.claimRef;
  if (ref?.name === undefined) return false;
  const pvc = world.objects.get(objectKey('PersistentVolumeClaim', ref.name, ref.namespace));
  const uid = (ref as { uid?: unknown }).uid;
  // No uid: pre-bound to a claim not made yet, so it stays Available (syncVolume).
  if (typeof uid !== 'string' || uid === '') return false;
  return pvc?.kind !== 'PersistentVolumeClaim' || claimUid(pvc) !== uid;
}

/**
 * The PV controller's decisions of one plan (claims by key, then PVs by name), when the
 * world is configured to leave provisioning to an external provisioner. Called when
 * claims, PVs or a claim's consumers changed.
 */
export function planExternalProvisioning(world: ControllerWorld, nowMs: number): NewEvent[] {
  if (world.config.externalProvisioning !== true) return [];
  assert(Number.isFinite(nowMs), () => `external provisioning: bad nowMs ${nowMs}`);
  const events: NewEvent[] = [];
  const cause = world.bindingCause;
  for (const key of [...world.unboundClaims].sort()) {
    const pvc = world.objects.get(key);
    if (pvc?.kind !== 'PersistentVolumeClaim') continue;
    const request = requestFor(world, pvc);
    if (request === undefined) continue;
    const { name: claim, namespace = 'default' } = pvc.metadata;
    events.push({
      type: 'ExternalProvisioningRequested',
      tsMs: nowMs,
      namespace,
      claim,
      ...request,
      cause,
    });
  }
  const pvs = [...lookupOf(world.objects).ofKind('PersistentVolume')].sort((a, b) =>
    a.metadata.name < b.metadata.name ? -1 : 1,
  );
  for (const pv of pvs) {
    if (pv.kind !== 'PersistentVolume' || pv.metadata.deletionTimestamp !== undefined) continue;
    const phase = pv.status?.phase;
    if (phase === 'Released' || phase === 'Failed' || !claimGone(world, pv)) continue;
    events.push({ type: 'VolumeReleased', tsMs: nowMs, pv: pv.metadata.name, cause });
  }
  return events;
}
