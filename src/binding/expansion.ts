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
import { claimClassName, type ObjectLookup, storageClassOf } from './storage-class.js';

/** The bytes a claim's request asks for above its PV's capacity, or 0 when none is wanted. */
export function expansionWantedBytes(
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
