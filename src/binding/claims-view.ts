/**
 * Where each claim stands with binding and provisioning, for people (`vole why`, `vole
 * status`, the inspector) and for the planner (which claims it provisions now). A pure
 * query of the folded world.
 */
import type { PluginCaps } from '../events/index.js';
import type { ClusterObject, PersistentVolumeClaim, StorageClass } from '../events/k8s.js';
import type { UniqueVolumeName } from '../ids.js';
import { type ClaimBinding, claimName, isClaimBound, lookupOf } from './claims.js';
import { provisionedVolumeName, provisionerClass } from './provisioning.js';
import { retryAtMs } from '../operations/pending.js';
import { claimInUse } from '../kubelet/provisioning.js';
import { claimClassName } from './storage-class.js';
import type { World } from '../kubelet/types.js';
import type { LastError, OpRecord } from '../operations/types.js';

/**
 * What a claim's standing reads, of whichever world binds claims: the kubelet's in
 * standalone mode, the leading controller's in cluster mode.
 */
export interface StorageWorld {
  readonly objects: ReadonlyMap<string, ClusterObject>;
  readonly bindings: ReadonlyMap<string, ClaimBinding>;
  readonly plugins: ReadonlyMap<string, PluginCaps>;
  readonly ops: ReadonlyMap<UniqueVolumeName, readonly OpRecord[]>;
  readonly lastErrors: ReadonlyMap<UniqueVolumeName, LastError>;
}

/** Does a pod that counts as the claim's first consumer use it (WaitForFirstConsumer)? */
export type ClaimInUse = (pvc: PersistentVolumeClaim) => boolean;

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

export interface ClaimView {
  /** `namespace/name`. */
  readonly claim: string;
  readonly storageClassName: string;
  /** Bound, Provisioning, WaitingForFirstConsumer, WaitingForProvisioner, Pending, Deleting. */
  readonly state: string;
  readonly detail: string;
  /** The PV it is bound to, or the volume being provisioned for it. */
  readonly volume: string | null;
  readonly running: boolean;
  readonly lastError: {
    readonly message: string;
    readonly seq: number;
    readonly tsMs: number;
  } | null;
  readonly nextRetryAtMs: number | null;
}

function provisioningOf(world: StorageWorld, volume: UniqueVolumeName) {
  const records = world.ops.get(volume) ?? [];
  const failed = records.find((r) => !r.pending && r.lastError !== null);
  return {
    running: records.some((r) => r.pending),
    lastError: world.lastErrors.get(volume) ?? null,
    nextRetryAtMs: failed === undefined ? null : retryAtMs(failed),
  };
}

/** One claim's standing in a kubelet's world (standalone mode: the agent provisions). */
export function claimView(world: World, pvc: PersistentVolumeClaim): ClaimView {
  return claimStanding(world, pvc, (p) => claimInUse(world, p));
}

/** One claim's standing in the world that binds it; `inUse` names its first consumer. */
export function claimStanding(
  world: StorageWorld,
  pvc: PersistentVolumeClaim,
  inUse: ClaimInUse,
): ClaimView {
  const claim = claimName(pvc);
  const className = claimClassName(pvc, lookupOf(world.objects));
  const base = {
    claim,
    storageClassName: className,
    running: false,
    lastError: null,
    nextRetryAtMs: null,
  };
  const key = `PersistentVolumeClaim/${claim}`;
  const deleting = pvc.metadata.deletionTimestamp !== undefined;
  if (isClaimBound(pvc, world.bindings)) {
    const volume = world.bindings.get(key)?.volume ?? pvc.spec.volumeName ?? null;
    const state = deleting ? 'Deleting' : 'Bound';
    const detail = deleting
      ? 'deleted; kept while a pod uses it (pvc-protection)'
      : `bound to ${volume}`;
    return { ...base, state, detail, volume };
  }
  const lookup = { objects: lookupOf(world.objects), plugins: world.plugins };
  const chosen = provisionerClass(lookup, pvc, inUse);
  if (chosen === undefined) return { ...base, ...pendingWhy(className), volume: null };
  const volume = provisionedVolumeName(chosen.sc, pvc);
  const about = provisioner(chosen.sc);
  if (chosen.driverMissing)
    return {
      ...base,
      state: 'WaitingForProvisioner',
      volume,
      detail: `${about}: CSI driver "${chosen.sc.provisioner}" absent or makes no volumes`,
    };
  if (chosen.waitsForConsumer)
    return {
      ...base,
      state: 'WaitingForFirstConsumer',
      volume,
      detail: `${about}: waiting for the first pod that uses the claim`,
    };
  return {
    ...base,
    ...provisioningOf(world, volume),
    state: 'Provisioning',
    volume,
    detail: `${about}: CreateVolume ${volume.slice(volume.indexOf('^') + 1)}`,
  };
}

function provisioner(sc: StorageClass): string {
  return `provisioner "${sc.provisioner}" (StorageClass "${sc.metadata.name}")`;
}

function pendingWhy(className: string) {
  return className === ''
    ? { state: 'Pending', detail: 'no class: waits for a static PersistentVolume without one' }
    : {
        state: 'Pending',
        detail: `StorageClass "${className}" not found or provisions nothing here`,
      };
}

/** Every claim a kubelet's world knows, by `namespace/name`. */
export function claimViews(world: World): ClaimView[] {
  return claimStandings(world, (p) => claimInUse(world, p));
}

/** Every claim the world that binds them knows, by `namespace/name`. */
export function claimStandings(world: StorageWorld, inUse: ClaimInUse): ClaimView[] {
  const views: ClaimView[] = [];
  for (const object of lookupOf(world.objects).ofKind('PersistentVolumeClaim'))
    if (object.kind === 'PersistentVolumeClaim') views.push(claimStanding(world, object, inUse));
  return views.sort((a, b) => (a.claim < b.claim ? -1 : a.claim > b.claim ? 1 : 0));
}
