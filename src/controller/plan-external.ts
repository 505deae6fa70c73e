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
 * The policy is the shared one (src/binding/external-provisioning.ts); the fold applies
 * each decision to the world's copy at once (fold-external.ts).
 */
import { assert } from '../assert.js';
import type { NewEvent } from '../events/index.js';
import { lookupOf } from '../binding/claims.js';
import { claimRefGone, externalProvisioningRequest } from '../binding/external-provisioning.js';
import { consumerNode } from './provisioning.js';
import type { ControllerWorld } from './types.js';

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
    const request = externalProvisioningRequest(world, pvc, (p) => consumerNode(world, p));
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
    if (phase === 'Released' || phase === 'Failed' || !claimRefGone(world.objects, pv)) continue;
    events.push({ type: 'VolumeReleased', tsMs: nowMs, pv: pv.metadata.name, cause });
  }
  return events;
}
