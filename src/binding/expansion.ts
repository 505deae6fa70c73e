/**
 * Volume expansion as the CSI external-resizer decides it in cluster mode: a bound claim
 * of a class with `allowVolumeExpansion: true` whose request is above its CSI PV's
 * capacity wants ControllerExpandVolume (the API server refuses growth in other classes).
 * Pure.
 */
import {
  parseQuantityBytes,
  type PersistentVolume,
  type PersistentVolumeClaim,
} from '../events/k8s.js';
import type { UniqueVolumeName } from '../ids.js';
import type { ClaimBinding } from './claims.js';
import { csiVolumeName } from './provisioning.js';
import { claimClassName, type ObjectLookup, storageClassOf } from './storage-class.js';

/** The bytes a claim's request asks for above its PV's capacity, or 0 when none is wanted. */
function expansionWantedBytes(
  objects: ObjectLookup,
  pvc: PersistentVolumeClaim,
  pv: PersistentVolume,
): number {
  if (pv.spec.csi?.volumeHandle === undefined) return 0; // only CSI volumes are expanded
  const sc = storageClassOf(objects, claimClassName(pvc, objects));
  if (sc?.allowVolumeExpansion !== true) return 0;
  const requested = parseQuantityBytes(pvc.spec.resources?.requests?.storage) ?? 0;
  const has = parseQuantityBytes(pv.spec.capacity?.storage) ?? 0;
  return requested > has ? requested : 0;
}

/** A byte count as a Kubernetes quantity (`2Gi`, `300Mi`, else plain bytes). */
export function bytesQuantity(bytes: number): string {
  if (bytes > 0 && bytes % 2 ** 30 === 0) return `${bytes / 2 ** 30}Gi`;
  if (bytes > 0 && bytes % 2 ** 20 === 0) return `${bytes / 2 ** 20}Mi`;
  return String(bytes);
}

/**
 * Does the claim under `key` want expansion (the resizer's watch): bound, its class
 * allowing it, asking for more than its CSI PV has. Both cores keep such claims in their
 * `resizing` set, looked at again when the claim, its binding or its PV changes.
 */
export function claimWantsExpansion(
  objects: ObjectLookup,
  binding: ClaimBinding | undefined,
  pvc: PersistentVolumeClaim,
): boolean {
  const pv = binding === undefined ? undefined : objects.lookup('PersistentVolume', binding.volume);
  return pv?.kind === 'PersistentVolume' && expansionWantedBytes(objects, pvc, pv) > 0;
}

/** One ControllerExpandVolume a plan may make: the claim, its PV, its CSI volume, the size. */
export interface WantedExpansion {
  readonly claimKey: string;
  readonly pv: string;
  readonly volume: UniqueVolumeName;
  readonly sizeBytes: number;
}

/**
 * The resizer's decisions over the claims kept in `resizing`, in key order: each bound
 * claim asking for more than its CSI PV has. The core makes each an operation of its own.
 */
export function* wantedExpansions(
  objects: ObjectLookup & { get(key: string): ReturnType<ObjectLookup['lookup']> },
  bindings: ReadonlyMap<string, ClaimBinding>,
  resizing: ReadonlySet<string>,
): Generator<WantedExpansion> {
  for (const claimKey of [...resizing].sort()) {
    const pvc = objects.get(claimKey);
    const binding = bindings.get(claimKey);
    if (pvc?.kind !== 'PersistentVolumeClaim' || binding === undefined) continue;
    const pv = objects.lookup('PersistentVolume', binding.volume);
    if (pv?.kind !== 'PersistentVolume') continue;
    const sizeBytes = expansionWantedBytes(objects, pvc, pv);
    const csi = pv.spec.csi;
    if (sizeBytes === 0 || csi?.volumeHandle === undefined) continue;
    const volume = csiVolumeName(csi.driver, csi.volumeHandle);
    yield { claimKey, pv: binding.volume, volume, sizeBytes };
  }
}
