/**
 * The UIDs of pods and claims given without `metadata.uid`: what the manifest source and
 * both engines' object intake give them. Apart from manifests.ts so that the library root,
 * which takes objects but reads no files, loads no YAML parser.
 */
import { randomUUID } from 'node:crypto';
import type { ManifestObject } from '../events/k8s.js';

/** The kinds vole gives a UID when the manifest has none: what a UID names on the node. */
export type IdentifiedKind = 'Pod' | 'PersistentVolumeClaim';

/**
 * Where a pod or claim without `metadata.uid` gets its UID, as the API server gives one
 * when the object is created (metav1.ObjectMeta.UID, set by
 * rest.FillObjectMetaSystemFields): the UID of the object of that kind, namespace and
 * name that exists already (an update keeps it), or a fresh one (a pod deleted and created
 * again is a new pod, a claim a new claim with a new `pvc-<uid>` volume).
 */
export interface PodIdentities {
  /** The UID of the existing object kind namespace/name, if there is one. */
  readonly uidOf?: (namespace: string, name: string, kind: IdentifiedKind) => string | undefined;
  /** A fresh UID (default: a random UUID); the log records it with the object. */
  readonly newUid?: () => string;
}

/** The UIDs of the claims an engine's world holds: what its object intake keeps. */
export function claimIdentitiesOf(objects: {
  lookup(
    kind: string,
    name: string,
    namespace?: string,
  ): { metadata: { uid?: string } } | undefined;
}): PodIdentities {
  return {
    uidOf: (namespace, name, kind) =>
      kind === 'PersistentVolumeClaim'
        ? objects.lookup(kind, name, namespace)?.metadata.uid
        : undefined,
  };
}

/** The object's UID: given, kept from the existing object of its kind and name, or fresh. */
export function uidFor(
  o: { kind: IdentifiedKind; metadata: { name: string; uid?: string | undefined } },
  namespace: string,
  ids: PodIdentities,
  set: { readonly assignedUids?: Set<string> } | undefined,
): string {
  if (o.metadata.uid !== undefined) return o.metadata.uid;
  const uid = ids.uidOf?.(namespace, o.metadata.name, o.kind) ?? (ids.newUid ?? randomUUID)();
  set?.assignedUids?.add(uid);
  return uid;
}

/**
 * A claim without `metadata.uid` gets one (uidFor: the existing claim's, else fresh); every
 * other object is returned as given. The engines' object intake uses it too, so a library
 * caller's claim is a new claim when it is created again.
 */
export function withUid<T extends ManifestObject>(
  object: T,
  ids: PodIdentities,
  set?: { readonly assignedUids?: Set<string> },
): T {
  if (object.kind !== 'PersistentVolumeClaim' || object.metadata.uid !== undefined) return object;
  const namespace = object.metadata.namespace ?? 'default';
  const uid = uidFor(object, namespace, ids, set);
  // In the order the object schema gives its keys, so the log's row is the same as read back.
  const { name, namespace: given, ...rest } = object.metadata;
  const metadata = { name, ...(given === undefined ? {} : { namespace: given }), uid, ...rest };
  return { ...object, metadata };
}
