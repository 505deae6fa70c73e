/**
 * The provisioner's, resizer's and pvc-protection controller's decisions (docs/design.md
 * "Decisions are planned, effects are events"), in the persistent-volume controller's and
 * CSI external-provisioner's order:
 *
 * - an unbound claim of a class whose provisioner is a CSI driver with CREATE_DELETE_VOLUME,
 *   that no static PV of its class satisfies, is provisioned (pv_controller.go
 *   syncUnboundClaim → provisionClaim; external-provisioner controller.go Provision):
 *   `Immediate` at once, `WaitForFirstConsumer` once a pod uses it;
 * - a CreateVolume that may still be in progress for a claim deleted meanwhile is retried
 *   under the same name (external-provisioner: provisioning "in background");
 * - a provisioned PV Released with reclaim policy Delete is deleted once its volume is
 *   unmounted and detached everywhere (pv_controller.go reclaimVolume → deleteVolumeOperation);
 * - a bound claim asking for more than its PV has, in a class that allows expansion, gets
 *   ControllerExpandVolume (external-resizer);
 * - a claim being deleted that no pod uses any more loses its pvc-protection finalizer.
 *
 * Pure. Operations go through the plan's Claims (one operation per volume, backoff).
 */
import type { NewEvent, ProvisionRequest } from '../events/index.js';
import { type PersistentVolumeClaim, type StorageClass } from '../events/k8s.js';
import type { UniqueVolumeName } from '../ids.js';
import type { Claims } from '../operations/book.js';
import { provisionRequestOf } from '../binding/provision-request.js';
import { boundVolumes, findVolumeForClaim } from '../binding/claims.js';
import { claimInUse, provisioningClass } from './provisioning.js';
import {
  isProvisionedVolumeName,
  provisionableClaim,
  provisionedVolumeName,
  reclaimable,
  retriesUnderSameName,
  storageWaits as storageStateWaits,
} from '../binding/provisioning.js';
import { nodeTopology } from '../binding/storage-class.js';
import { wantedExpansions } from '../binding/expansion.js';
import { claimFinalizerDecisions } from '../binding/claim-protection.js';
import type { World } from './types.js';
import type { Operation, StorageOperation } from './operations.js';

export interface StorageScope {
  /** Every claim and provisioned volume (a full plan, or the claims were touched). */
  readonly all: boolean;
  /** Otherwise only the operations on these volumes (retries, finished operations). */
  readonly volumes: ReadonlySet<UniqueVolumeName>;
}

/** The CreateVolume request for a claim (and why it cannot be made, when it cannot). */
function provisionRequestFor(
  world: World,
  pvc: PersistentVolumeClaim,
  chosen: { readonly sc: StorageClass; readonly selected: boolean },
): { request: ProvisionRequest; refused?: string } {
  const { sc, selected } = chosen;
  const node = { name: world.config.node, topology: nodeTopology(world.plugins, sc.provisioner) };
  return provisionRequestOf(pvc, sc, node, selected);
}

/** Provision operations for the unbound claims no static PV serves (sorted by key). */
function planProvisions(world: World, claims: Claims<Operation>, scope: StorageScope): void {
  if (world.unboundClaims.size === 0) return;
  // Asked about some volumes only: a provisioned volume's name is `…^pvc-<uid>`.
  if (!scope.all && ![...scope.volumes].some(isProvisionedVolumeName)) return;
  const keys = [...world.unboundClaims].sort();
  let taken: ReadonlyMap<string, string> | undefined;
  for (const key of keys) {
    const pvc = provisionableClaim(world, world.bindings, key);
    if (pvc === undefined) continue;
    const chosen = provisioningClass(world, pvc);
    if (chosen === undefined) continue;
    const volume = provisionedVolumeName(chosen.sc, pvc);
    if (!scope.all && !scope.volumes.has(volume)) continue;
    taken ??= boundVolumes(world.objects, world.bindings);
    if (findVolumeForClaim(pvc, world.objects, taken).ok) continue; // a static PV first
    const { request, refused } = provisionRequestFor(world, pvc, chosen);
    const op: StorageOperation = {
      op: 'provision',
      volume,
      key: { volume, pod: '', node: '' },
      cause: world.causes.get(volume) ?? world.bindingCause,
      provision: request,
      ...(refused === undefined ? {} : { refused }),
    };
    claims.tryRun(op);
  }
}

/**
 * The entries of a map by volume that a plan looks at: all of them, or those of the
 * volumes it was asked about (a retry, a finished operation): O(what changed), not O(map).
 */
function* inScope<V>(
  map: ReadonlyMap<UniqueVolumeName, V>,
  scope: StorageScope,
): Generator<[UniqueVolumeName, V]> {
  if (scope.all) {
    yield* map;
    return;
  }
  for (const volume of scope.volumes) {
    const value = map.get(volume);
    if (value !== undefined) yield [volume, value];
  }
}

/** A CreateVolume that may have taken effect for a claim now gone: retried, same request. */
function planOrphanProvisions(world: World, claims: Claims<Operation>, scope: StorageScope) {
  for (const [volume, record] of inScope(world.provisioning.inFlight, scope)) {
    if (!retriesUnderSameName(world.objects, record)) continue;
    claims.tryRun({
      op: 'provision',
      volume,
      key: { volume, pod: '', node: '' },
      cause: world.causes.get(volume) ?? world.bindingCause,
      provision: record.request,
    });
  }
}

/** Does anything on this node still use the volume (desired, attached or mounted)? */
function inUseHere(world: World, volume: UniqueVolumeName): boolean {
  const record = world.volumes.get(volume);
  if (record === undefined) return false;
  return (
    record.pods !== undefined || record.attachment !== undefined || record.mounts !== undefined
  );
}

/** reclaimVolume: a Released provisioned PV with policy Delete, once nothing uses it. */
function planReclaims(world: World, claims: Claims<Operation>, scope: StorageScope): void {
  for (const [volume, pvName] of inScope(world.provisioning.provisioned, scope)) {
    if (!reclaimable(world.objects, pvName) || inUseHere(world, volume)) continue;
    claims.tryRun({
      op: 'deleteVolume',
      volume,
      key: { volume, pod: '', node: '' },
      cause: world.causes.get(volume) ?? world.bindingCause,
      pv: pvName,
    });
  }
}

/** The resizer: ControllerExpandVolume for each bound claim asking for more than its PV. */
function planExpansions(world: World, claims: Claims<Operation>, scope: StorageScope): void {
  const { objects, bindings, provisioning } = world;
  for (const wanted of wantedExpansions(objects, bindings, provisioning.resizing)) {
    const { volume } = wanted;
    if (!scope.all && !scope.volumes.has(volume)) continue;
    claims.tryRun({
      op: 'controllerExpand',
      volume,
      key: { volume, pod: '', node: '' },
      cause: world.causes.get(volume) ?? world.bindingCause,
      pv: wanted.pv,
      sizeBytes: wanted.sizeBytes,
    });
  }
}

/**
 * The storage decisions of one plan: operations claimed through `claims` (before any
 * other operation, so a volume being expanded is not also mounted in the same plan), and
 * the pvc-protection decisions, which are events.
 */
export function planStorage(
  world: World,
  claims: Claims<Operation>,
  scope: StorageScope & { readonly nowMs: number },
): NewEvent[] {
  planProvisions(world, claims, scope);
  planOrphanProvisions(world, claims, scope);
  planReclaims(world, claims, scope);
  planExpansions(world, claims, scope);
  if (!scope.all) return [];
  const at = { nowMs: scope.nowMs, cause: world.bindingCause, seq: world.seq };
  const inUse = (pvc: PersistentVolumeClaim) => claimInUse(world, pvc);
  return claimFinalizerDecisions(world.objects, world.provisioning.protectedClaims, inUse, at);
}

/** Is some storage state waiting, so that a plan must look at storage at all? */
export function storageWaits(world: World): boolean {
  return storageStateWaits(world.unboundClaims, world.provisioning);
}
