/**
 * The node's own part of dynamic provisioning's state (the fold's part is
 * fold-provisioning.ts; the policy both cores share, CreateVolume's bookkeeping and the PV
 * it records, is src/binding/provisioning.ts), as Kubernetes' external-resizer and
 * pvc-protection controller record it:
 *
 * - a bound claim asking for more than its PV has, in a class that allows expansion;
 * - a claim deleted while a pod uses it stays, being deleted, until the pvc-protection
 *   controller's decision (ClaimFinalizerRemoved) removes it;
 * - a claim's first consumer is a pod of this node that uses it: which claims the planner
 *   provisions now, and where each stands (src/binding/claims-view.ts) in this world.
 *
 * Pure: the fold's part; the decisions are the planner's (src/kubelet/plan-provision.ts).
 */
import type { EventOf } from '../events/index.js';
import { objectKey, type PersistentVolumeClaim } from '../events/k8s.js';
import { bindingVolume } from '../binding/claims.js';
import { type ClaimView, claimStanding, claimStandings } from '../binding/claims-view.js';
import { provisionerClass } from '../binding/provisioning.js';

import { podsReferencing } from '../desired/references.js';
import { claimWantsExpansion } from '../binding/expansion.js';
import type { World } from './types.js';

/**
 * A claim changed: expansion is wanted while it is bound, its class allows expansion and
 * it asks for more than its PV has (the API server refuses the growth otherwise).
 */
export function trackResize(world: World, key: string, pvc: PersistentVolumeClaim): void {
  if (claimWantsExpansion(world.objects, world.bindings.get(key), pvc))
    world.provisioning.resizing.add(key);
  else world.provisioning.resizing.delete(key);
}

/**
 * pvc-protection: a claim deleted while a pod uses it is kept, being deleted (its
 * deletionTimestamp set, as the API server does for an object with a finalizer). True when
 * it is kept; the planner removes it once no pod uses it.
 */
export function protectClaim(world: World, event: EventOf<'ObjectRemoved'>): boolean {
  // Where claims are bound elsewhere (cluster mode) the API server applies it: a claim
  // removed from the source is gone.
  if (event.kind !== 'PersistentVolumeClaim' || world.config.bindClaims === false) return false;
  const pvc = world.objects.lookup('PersistentVolumeClaim', event.name, event.namespace);
  if (pvc?.kind !== 'PersistentVolumeClaim') return false;
  if (!claimInUse(world, pvc)) return false;
  const deletionTimestamp = pvc.metadata.deletionTimestamp ?? rfc3339(event.tsMs);
  world.objects.put({ ...pvc, metadata: { ...pvc.metadata, deletionTimestamp } });
  world.provisioning.protectedClaims.add(
    objectKey('PersistentVolumeClaim', event.name, event.namespace),
  );
  world.dirty.add(bindingVolume);
  return true;
}

/** Is some pod of this node using the claim (its resolution read it)? */
export function claimInUse(world: World, pvc: PersistentVolumeClaim): boolean {
  const { name, namespace } = pvc.metadata;
  for (const _uid of podsReferencing(world.podsByObject, 'PersistentVolumeClaim', name, namespace))
    return true;
  return false;
}

/**
 * A claim is gone (the intake dropped it and its binding): its wanted expansion goes, and
 * a provisioning for it that cannot have begun.
 */
export function claimGone(world: World, key: string): void {
  world.provisioning.resizing.delete(key);
  for (const [volume, record] of world.provisioning.inFlight) {
    const { namespace, name } = record.request.claim;
    if (objectKey('PersistentVolumeClaim', name, namespace) !== key || record.mayExist) continue;
    const running = world.ops.get(volume)?.some((r) => r.pending) === true;
    if (!running) world.provisioning.inFlight.delete(volume);
  }
}

/** An RFC 3339 UTC time of a log timestamp (civil-from-days: no Date in the core). */
export function rfc3339(tsMs: number): string {
  const days = Math.floor(tsMs / 86_400_000);
  const msOfDay = tsMs - days * 86_400_000;
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor(
    (doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365,
  );
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  const [h, m, sec] = [msOfDay / 3_600_000, (msOfDay / 60_000) % 60, (msOfDay / 1000) % 60].map(
    Math.floor,
  );
  return `${pad(year, 4)}-${pad(month)}-${pad(day)}T${pad(h!)}:${pad(m!)}:${pad(sec!)}Z`;
}

/**
 * The class of a claim that this engine provisions now, or undefined: a class whose
 * provisioner is a registered CSI driver able to create volumes, and for
 * WaitForFirstConsumer a pod that uses the claim (its first consumer).
 */
export function provisioningClass(world: World, pvc: PersistentVolumeClaim) {
  const chosen = provisionerClass(world, pvc, (p) => claimInUse(world, p));
  if (chosen === undefined || chosen.driverMissing || chosen.waitsForConsumer) return undefined;
  return { sc: chosen.sc, selected: chosen.selected };
}

/** One claim's standing in a kubelet's world (standalone mode: the agent provisions). */
export function claimView(world: World, pvc: PersistentVolumeClaim): ClaimView {
  return claimStanding(world, pvc, (p) => claimInUse(world, p));
}

/** Every claim a kubelet's world knows, by `namespace/name`. */
export function claimViews(world: World): ClaimView[] {
  return claimStandings(world, (p) => claimInUse(world, p));
}
