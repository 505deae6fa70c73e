/**
 * A claim as the controller keeps it:
 * - its `spec.volumeName` the bound PV's own name string where that PV is known. The claim
 *   and its PV are parsed apart, so each held its own copy of the PV's name (32 bytes for an
 *   11-character name, 56 for a provisioned PV's `pvc-<uid>`), and the PV's is the one the
 *   pods' resolved volume specs hold. Strings cannot be told apart by identity, so a claim
 *   of a known PV is always rebuilt (its object and its spec, copies of their exact fields);
 * - its `status` the one shared object of that status (shared-values.ts): bound claims
 *   hold equal ones.
 * Equal values: nothing observable changes.
 */
import type { ClusterObjects } from '../desired/objects.js';
import type { ClusterObject } from '../events/k8s.js';
import { sharedValue } from './shared-values.js';

/** `object`, or the claim with its PV's name string and its status shared (see above). */
export function claimAsKept(
  object: ClusterObject,
  objects: Pick<ClusterObjects, 'lookup'>,
): ClusterObject {
  if (object.kind !== 'PersistentVolumeClaim') return object;
  const status = sharedValue(object.status);
  const volumeName = object.spec.volumeName;
  const pv = volumeName === undefined ? undefined : objects.lookup('PersistentVolume', volumeName);
  if (pv === undefined) return status === object.status ? object : { ...object, status };
  const spec = { ...object.spec, volumeName: pv.metadata.name };
  return status === undefined ? { ...object, spec } : { ...object, spec, status };
}
