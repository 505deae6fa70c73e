/**
 * The planner's binding decisions (docs/design.md "Decisions are planned, effects are events"):
 * each unbound claim that some PV satisfies gets a ClaimBound event, in claim-key order,
 * a PV bound once per plan. No host call: the event is the whole effect.
 */
import type { NewEvent } from '../events/index.js';
import type { PersistentVolumeClaim } from '../events/k8s.js';
import { boundVolumes, claimName, findVolumeForClaim, isClaimBound, lookupOf } from './claims.js';
import { claimClassName, storageClassOf, waitsForFirstConsumer } from './storage-class.js';
import type { BindingWorld } from './claims.js';

/**
 * WaitForFirstConsumer (pv_controller.go shouldDelayBinding): a claim of such a class
 * binds, statically too, only once a pod uses it. A claim with volumeName is not delayed.
 */
function waitsForConsumer(
  world: BindingWorld,
  pvc: PersistentVolumeClaim,
  inUse: ((pvc: PersistentVolumeClaim) => boolean) | undefined,
): boolean {
  // A binder that cannot tell who uses a claim (the controller core) does not delay.
  if ((pvc.spec.volumeName ?? '') !== '' || inUse === undefined) return false;
  const lookup = lookupOf(world.objects);
  const sc = storageClassOf(lookup, claimClassName(pvc, lookup));
  if (sc === undefined || !waitsForFirstConsumer(sc)) return false;
  return !inUse(pvc);
}

export function planBindings(
  world: BindingWorld,
  nowMs: number,
  opts: { readonly inUse?: (pvc: PersistentVolumeClaim) => boolean } = {},
): NewEvent[] {
  if (world.unboundClaims.size === 0) return []; // the common case: nothing waits to bind
  const unbound: [string, PersistentVolumeClaim][] = [];
  for (const key of world.unboundClaims) {
    const object = world.objects.get(key);
    if (object?.kind !== 'PersistentVolumeClaim' || isClaimBound(object, world.bindings)) continue;
    if (object.metadata.deletionTimestamp !== undefined) continue;
    const phase = object.status?.phase;
    if (phase !== undefined && phase !== 'Pending') continue; // Lost: the controller's call
    if (waitsForConsumer(world, object, opts.inUse)) continue;
    unbound.push([key, object]);
  }
  if (unbound.length === 0) return [];
  unbound.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const taken = boundVolumes(world.objects, world.bindings);
  const events: NewEvent[] = [];
  for (const [, pvc] of unbound) {
    const verdict = findVolumeForClaim(pvc, world.objects, taken);
    if (!verdict.ok) continue;
    const volume = verdict.pv.metadata.name;
    taken.set(volume, claimName(pvc));
    events.push({
      type: 'ClaimBound',
      tsMs: nowMs,
      namespace: pvc.metadata.namespace ?? 'default',
      claim: pvc.metadata.name,
      volume,
      capacityBytes: verdict.capacityBytes,
      cause: world.bindingCause,
    });
  }
  return events;
}
