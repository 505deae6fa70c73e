/**
 * The CreateVolume request for a claim of a StorageClass (external-provisioner's
 * prepareProvision), one rule for whoever provisions: the node agent in standalone mode and
 * the leading controller in cluster mode. Pure.
 */
import type { ProvisionRequest } from '../events/index.js';
import {
  parseQuantityBytes,
  type PersistentVolumeClaim,
  type StorageClass,
} from '../events/k8s.js';
import { claimUid } from './claims.js';
import { classParameters, reclaimPolicyOf, requisiteOf } from './storage-class.js';

/** The node a request is made for: its name and the driver's topology segment on it. */
export interface ProvisionNode {
  readonly name: string;
  readonly topology: Record<string, string>;
}

/**
 * The request `pvc-<claim uid>` for `pvc` of `sc`, and why it cannot be made when it cannot
 * (a reserved class parameter, a selected node outside allowedTopologies). `selected`: the
 * node was chosen for the claim's first consumer (WaitForFirstConsumer), so the request
 * asks for its topology and names it as the selected node.
 */
export function provisionRequestOf(
  pvc: PersistentVolumeClaim,
  sc: StorageClass,
  node: ProvisionNode,
  selected: boolean,
): { request: ProvisionRequest; refused?: string } {
  const params = classParameters(sc);
  const requisite = requisiteOf(sc, node, selected);
  const uid = claimUid(pvc);
  const request: ProvisionRequest = {
    claim: { namespace: pvc.metadata.namespace ?? 'default', name: pvc.metadata.name, uid },
    storageClassName: sc.metadata.name,
    driver: sc.provisioner,
    name: `pvc-${uid}`,
    requiredBytes: parseQuantityBytes(pvc.spec.resources?.requests?.storage) ?? 0,
    accessModes: [...(pvc.spec.accessModes ?? [])],
    volumeMode: pvc.spec.volumeMode ?? 'Filesystem',
    fsType: params.ok ? params.fsType : '',
    mountOptions: [...(sc.mountOptions ?? [])],
    parameters: params.ok ? params.parameters : {},
    reclaimPolicy: reclaimPolicyOf(sc),
    requisite: requisite.ok ? requisite.requisite : [],
    ...(selected ? { selectedNode: node.name } : {}),
  };
  const refused = !params.ok ? params.error : !requisite.ok ? requisite.error : undefined;
  const prefix = `failed to provision volume with StorageClass "${sc.metadata.name}"`;
  return refused === undefined ? { request } : { request, refused: `${prefix}: ${refused}` };
}
