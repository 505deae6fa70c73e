/**
 * pvc-protection where a store plays the API server (cluster mode: `vole apply` and `vole
 * delete` on etcd, the simulator's controller mode), as Kubernetes does it:
 *
 * - admission (plugin/pkg/admission/storage/storageobjectinuseprotection) gives every new
 *   claim the `kubernetes.io/pvc-protection` finalizer;
 * - deleting an object with finalizers only sets its `deletionTimestamp` (the API
 *   server's graceful deletion); it goes once its last finalizer is removed;
 * - the pvc-protection controller (pkg/controller/volume/pvcprotection, isBeingUsed and
 *   podUsesPVC) removes the finalizer of a claim being deleted once no scheduled pod
 *   names it: the leading controller's planner decides it (ClaimFinalizerRemoved) and the
 *   bindings writer carries it out.
 *
 * Both cores decide the same way; which pods count is each core's (the node's pods that
 * read the claim; the controller's scheduled pods). Pure: objects in, objects out.
 */
import { assert } from '../assert.js';
import type { NewEvent } from '../events/index.js';
import type { ClusterObject, PersistentVolumeClaim } from '../events/k8s.js';

/** Any object with Kubernetes metadata (a manifest's or a log's form). */
interface WithMeta {
  readonly kind: string;
  readonly metadata: { readonly finalizers?: string[]; readonly deletionTimestamp?: string };
}

/** The finalizer the admission plugin adds and the pvc-protection controller removes. */
export const pvcProtectionFinalizer = 'kubernetes.io/pvc-protection';

/** Admission: a claim not being deleted gets the finalizer (other objects are unchanged). */
export function admitObject<T extends WithMeta>(object: T): T {
  if (object.kind !== 'PersistentVolumeClaim') return object;
  const { finalizers = [], deletionTimestamp } = object.metadata;
  if (deletionTimestamp !== undefined || finalizers.includes(pvcProtectionFinalizer)) return object;
  return {
    ...object,
    metadata: { ...object.metadata, finalizers: [...finalizers, pvcProtectionFinalizer] },
  };
}

/**
 * Graceful deletion: the object as a delete leaves it when it has finalizers (its
 * deletionTimestamp set, kept if set already), or undefined when it goes at once.
 */
export function markedForDeletion<T extends WithMeta>(
  object: T,
  deletionTimestamp: string,
): T | undefined {
  if ((object.metadata.finalizers ?? []).length === 0) return undefined;
  if (object.metadata.deletionTimestamp !== undefined) return object;
  return { ...object, metadata: { ...object.metadata, deletionTimestamp } };
}

/** IsDeletionCandidate: a claim being deleted that still holds the pvc-protection finalizer. */
export function isProtectionCandidate(pvc: PersistentVolumeClaim): boolean {
  return (
    pvc.metadata.deletionTimestamp !== undefined &&
    (pvc.metadata.finalizers ?? []).includes(pvcProtectionFinalizer)
  );
}

/**
 * removeFinalizer: the claim without the pvc-protection finalizer, or undefined when that
 * was its last finalizer and it is being deleted (the API server removes it then).
 */
export function withoutProtectionFinalizer(
  pvc: PersistentVolumeClaim,
): PersistentVolumeClaim | undefined {
  const finalizers = (pvc.metadata.finalizers ?? []).filter((f) => f !== pvcProtectionFinalizer);
  if (finalizers.length === 0 && pvc.metadata.deletionTimestamp !== undefined) return undefined;
  return { ...pvc, metadata: { ...pvc.metadata, finalizers } };
}

/** Where and why the decisions are made: the plan's time, the cause they cite, the head. */
export interface ProtectionMoment {
  readonly nowMs: number;
  readonly cause: number;
  readonly seq: number;
}

/** One ClaimFinalizerRemoved for each protected claim no pod uses, in key order. */
export function claimFinalizerDecisions(
  objects: { get(key: string): ClusterObject | undefined },
  protectedClaims: ReadonlySet<string>,
  inUse: (pvc: PersistentVolumeClaim) => boolean,
  at: ProtectionMoment,
): NewEvent[] {
  const events: NewEvent[] = [];
  for (const key of [...protectedClaims].sort()) {
    const pvc = objects.get(key);
    if (pvc?.kind !== 'PersistentVolumeClaim' || inUse(pvc)) continue;
    assert(
      pvc.metadata.deletionTimestamp !== undefined,
      () => `pvc-protection: claim ${key} released while not being deleted (seq ${at.seq})`,
    );
    events.push({
      type: 'ClaimFinalizerRemoved',
      tsMs: at.nowMs,
      namespace: pvc.metadata.namespace ?? 'default',
      claim: pvc.metadata.name,
      cause: at.cause,
    });
  }
  return events;
}
