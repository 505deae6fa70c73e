/**
 * What a pod's resolution read, and the index from those objects back to their pods.
 *
 * A reference is an object's kind and name, as two entries of one flat list: `[kind, name,
 * kind, name, …]`. The kind is one of the constant kind names; the name is the string the
 * pod (a claim's, a ConfigMap's, a Secret's name) or its claim (the PV's name) already
 * holds, so a reference costs the two slots and no string of its own. A namespaced
 * object is in the pod's namespace (a pod reads no other namespace's objects); a
 * PersistentVolume in none. Building `Kind/namespace/name` keys for them cost ~110 bytes a
 * pod with a claim, in the pod record and again as the index's keys.
 *
 * The index is kind → namespace → name → the one pod that references the object (its bare
 * name), or a Set when several do (a Set costs ~180 bytes). Its keys are the same name
 * strings. Like the world's other indexes it is the fold's own and changed in place.
 */
import { isNamespacedKind, objectKey } from '../events/k8s.js';
import type { UniquePodName } from '../ids.js';
import { addOne, type OneOrMany, removeOne } from './one-or-many.js';

/** `[kind, name, kind, name, …]`: the objects a resolution read (see above). */
export type References = readonly string[];

/** The pods referencing an object: one bare name, or a Set of two or more. */
export type ReferencingPods = OneOrMany<UniquePodName>;

/** kind → namespace ('' for cluster-scoped kinds) → name → pods. */
export type ReferenceIndex = Map<string, Map<string, Map<string, ReferencingPods>>>;

/** The name under which pods waiting for any PV to bind reference PersistentVolumes. */
export const anyPersistentVolumeName = '*';

/** Appends a reference unless the list has it already (two volumes on one claim). */
export function addReference(references: string[], kind: string, name: string): void {
  for (let i = 0; i < references.length; i += 2)
    if (references[i] === kind && references[i + 1] === name) return;
  references.push(kind, name);
}

/** The namespace a referenced object of `kind` is in, for a pod in `podNamespace`. */
function namespaceOf(kind: string, podNamespace: string): string {
  return isNamespacedKind(kind) ? podNamespace : '';
}

/** The references as object keys (`Kind/namespace/name`), for indexes keyed so. */
export function referenceKeys(references: References, podNamespace: string): string[] {
  const keys: string[] = [];
  for (let i = 0; i < references.length; i += 2) {
    const kind = references[i]!;
    keys.push(objectKey(kind, references[i + 1]!, namespaceOf(kind, podNamespace)));
  }
  return keys;
}

/** Adds (or removes) `pod` under every object its references name. */
export function indexReferences(
  index: ReferenceIndex,
  pod: UniquePodName,
  podNamespace: string,
  references: References,
  add: boolean,
): void {
  for (let i = 0; i < references.length; i += 2) {
    const kind = references[i]!;
    const namespace = namespaceOf(kind, podNamespace);
    const name = references[i + 1]!;
    if (add) addPod(index, kind, namespace, name, pod);
    else removePod(index, kind, namespace, name, pod);
  }
}

function addPod(
  index: ReferenceIndex,
  kind: string,
  namespace: string,
  name: string,
  pod: UniquePodName,
): void {
  let byNamespace = index.get(kind);
  if (byNamespace === undefined) index.set(kind, (byNamespace = new Map()));
  let byName = byNamespace.get(namespace);
  if (byName === undefined) byNamespace.set(namespace, (byName = new Map()));
  addOne(byName, name, pod);
}

function removePod(
  index: ReferenceIndex,
  kind: string,
  namespace: string,
  name: string,
  pod: UniquePodName,
): void {
  const byNamespace = index.get(kind);
  const byName = byNamespace?.get(namespace);
  if (byNamespace === undefined || byName === undefined) return;
  removeOne(byName, name, pod);
  if (byName.size === 0) byNamespace.delete(namespace);
  if (byNamespace.size === 0) index.delete(kind);
}

/** The pods referencing an object, in name order (namespace ignored for cluster-scoped kinds). */
export function podsReferencing(
  index: ReferenceIndex,
  kind: string,
  name: string,
  namespace: string | undefined,
): UniquePodName[] {
  const ns = isNamespacedKind(kind) ? (namespace ?? 'default') : '';
  const pods = index.get(kind)?.get(ns)?.get(name);
  if (pods === undefined) return [];
  return typeof pods === 'string' ? [pods] : [...pods].sort();
}

/** Is `value` such an index (and not the key-indexed Map of an older snapshot)? */
export function isReferenceIndex(value: unknown): value is ReferenceIndex {
  if (!(value instanceof Map)) return false;
  for (const byNamespace of value.values()) if (!(byNamespace instanceof Map)) return false;
  return true;
}
