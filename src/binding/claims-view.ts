/**
 * Where each claim stands with binding and provisioning, and each PV's phase as the PV
 * controller would set it, for people (`vole why`, `vole status`, `vole get pvcs` and
 * `pvs`, the inspector), of whichever world binds claims: the kubelet's in standalone mode
 * (src/kubelet/provisioning.ts names its first consumers), the leading controller's in
 * cluster mode (src/controller/provisioning.ts). A pure query of the folded world.
 */
import type { PluginCaps } from '../events/index.js';
import {
  type ClusterObject,
  parseQuantityBytes,
  type PersistentVolume,
  type PersistentVolumeClaim,
  type StorageClass,
} from '../events/k8s.js';
import type { UniqueVolumeName } from '../ids.js';
import {
  boundVolumes,
  type ClaimBinding,
  claimName,
  claimUid,
  isClaimBound,
  lookupOf,
} from './claims.js';
import { provisionedVolumeName, provisionerClass } from './provisioning.js';
import { retryAtMs } from '../operations/pending.js';
import { claimClassName, provisionedByAnnotation } from './storage-class.js';
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

/** Every claim the world that binds them knows, by `namespace/name`. */
export function claimStandings(world: StorageWorld, inUse: ClaimInUse): ClaimView[] {
  const views: ClaimView[] = [];
  for (const object of lookupOf(world.objects).ofKind('PersistentVolumeClaim'))
    if (object.kind === 'PersistentVolumeClaim') views.push(claimStanding(world, object, inUse));
  return views.sort((a, b) => (a.claim < b.claim ? -1 : a.claim > b.claim ? 1 : 0));
}

/** What a PV's phase reads: the objects and bindings of the kubelet's or the controller's world. */
export interface PvWorld {
  readonly objects: ReadonlyMap<string, ClusterObject>;
  readonly bindings: ReadonlyMap<string, ClaimBinding>;
}

/** A PV's phase as the PV controller would set it (status.phase of a source's PV wins). */
function pvPhase(world: PvWorld, pv: PersistentVolume, taken: ReadonlyMap<string, string>) {
  if (taken.has(pv.metadata.name)) return 'Bound';
  const ref = pv.spec.claimRef;
  if (ref?.name !== undefined) {
    const pvc = lookupOf(world.objects).lookup(
      'PersistentVolumeClaim',
      ref.name,
      ref.namespace ?? 'default',
    );
    const uid = (ref as { uid?: string }).uid;
    const same =
      pvc?.kind === 'PersistentVolumeClaim' && (uid === undefined || claimUid(pvc) === uid);
    if (!same) return 'Released';
    return 'Bound';
  }
  return pv.status?.phase ?? 'Available';
}

/** `namespace/name` of the claim a PV's claimRef names, or null. */
function pvClaim(pv: PersistentVolume, taken: ReadonlyMap<string, string>): string | null {
  const holder = taken.get(pv.metadata.name);
  if (holder !== undefined) return holder;
  const ref = pv.spec.claimRef;
  return ref?.name === undefined ? null : `${ref.namespace ?? 'default'}/${ref.name}`;
}

/** A PV as `state.pvs`, `vole get pvs` and the inspector show it. */
export interface PvView {
  readonly name: string;
  readonly phase: string;
  readonly claim: string | null;
  readonly volumeHandle: string | null;
  readonly capacityBytes: number | null;
  readonly reclaimPolicy: string | null;
  /** The topology value its node affinity requires (the zone), or null. */
  readonly zone: string | null;
  readonly storageClassName: string | null;
  readonly provisioned: boolean;
}

/** Every PV the world knows, by name, with its phase (pvPhase). */
export function persistentVolumes(world: PvWorld): PvView[] {
  const taken = boundVolumes(world.objects, world.bindings);
  const views: PvView[] = [];
  for (const object of lookupOf(world.objects).ofKind('PersistentVolume')) {
    if (object.kind !== 'PersistentVolume') continue;
    const expression =
      object.spec.nodeAffinity?.required?.nodeSelectorTerms[0]?.matchExpressions?.[0];
    views.push({
      name: object.metadata.name,
      phase: pvPhase(world, object, taken),
      claim: pvClaim(object, taken),
      volumeHandle: object.spec.csi?.volumeHandle ?? null,
      capacityBytes: parseQuantityBytes(object.spec.capacity?.storage) ?? null,
      reclaimPolicy:
        object.spec.persistentVolumeReclaimPolicy ??
        (object.spec.claimRef === undefined ? 'Retain' : null),
      zone: expression?.values?.[0] ?? null,
      storageClassName: object.spec.storageClassName ?? null,
      provisioned: object.metadata.annotations?.[provisionedByAnnotation] !== undefined,
    });
  }
  return views.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
