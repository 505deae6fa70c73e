/**
 * A claim as the controller keeps it: its `spec.volumeName` the bound PV's own name string
 * where that PV is known. The claim and its PV are parsed apart, so each held its own copy
 * of the PV's name (32 bytes for an 11-character name, 56 for a provisioned PV's
 * `pvc-<uid>`), and the PV's is the one the pods' resolved volume specs hold. Strings
 * cannot be told apart by identity, so a claim of a known PV is always rebuilt (its object
 * and its spec, copies of their exact fields). Equal values: nothing observable changes.
 */
import type { ClusterObjects } from '../desired/objects.js';
import type { ClusterObject } from '../events/k8s.js';

/** `object`, or the claim bound to a known PV holding that PV's name string (see above). */
export function withVolumeNameShared(
  object: ClusterObject,
  objects: Pick<ClusterObjects, 'lookup'>,
): ClusterObject {
  if (object.kind !== 'PersistentVolumeClaim' || object.spec.volumeName === undefined)
    return object;
  const pv = objects.lookup('PersistentVolume', object.spec.volumeName);
  if (pv === undefined) return object;
  return { ...object, spec: { ...object.spec, volumeName: pv.metadata.name } };
}
