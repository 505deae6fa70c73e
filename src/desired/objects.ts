/**
 * The cluster objects both cores' worlds resolve pods against, kept per kind and namespace under
 * their own name strings. A `Kind/namespace/name` key built for each object cost a second
 * copy of a key every reference already holds (~56 bytes a pair at 100,000 pairs).
 *
 * It reads as a ReadonlyMap keyed by objectKey, so the readers that look objects up by key
 * or walk them all need not know; the fold and the resolver use `lookup`, which builds no
 * key. Like the world's other indexes it is the fold's own and changed in place.
 */
import { type ClusterObject, isNamespacedKind, objectKey } from '../events/k8s.js';

/** name → object, one map per namespace ('' for cluster-scoped kinds) and kind. */
type ByName = Map<string, ClusterObject>;

export class ClusterObjects implements ReadonlyMap<string, ClusterObject> {
  /** kind → namespace → name → object. */
  private readonly byKind: Map<string, Map<string, ByName>>;
  private count: number;

  constructor(byKind: Map<string, Map<string, ByName>> = new Map()) {
    this.byKind = byKind;
    let count = 0;
    for (const byNamespace of byKind.values())
      for (const byName of byNamespace.values()) count += byName.size;
    this.count = count;
  }

  /**
   * The store a structured clone of one gave back (a snapshot keeps the maps, not the
   * class), or undefined when `value` is no such clone.
   */
  static revive(value: unknown): ClusterObjects | undefined {
    if (value instanceof ClusterObjects) return value;
    const byKind = (value as { byKind?: unknown } | null)?.byKind;
    return byKind instanceof Map
      ? new ClusterObjects(byKind as Map<string, Map<string, ByName>>)
      : undefined;
  }

  /** A store holding these objects (a snapshot's Map of them read back). */
  static of(objects: Iterable<ClusterObject>): ClusterObjects {
    const store = new ClusterObjects();
    for (const object of objects) store.put(object);
    return store;
  }

  get size(): number {
    return this.count;
  }

  /** The object of that kind, name and namespace (namespace ignored for cluster-scoped kinds). */
  lookup(kind: string, name: string, namespace?: string): ClusterObject | undefined {
    return this.byKind.get(kind)?.get(namespaceOf(kind, namespace))?.get(name);
  }

  /** Adds or replaces an object; returns the one it replaced. */
  put(object: ClusterObject): ClusterObject | undefined {
    const namespace = namespaceOf(object.kind, object.metadata.namespace);
    let byNamespace = this.byKind.get(object.kind);
    if (byNamespace === undefined) this.byKind.set(object.kind, (byNamespace = new Map()));
    let byName = byNamespace.get(namespace);
    if (byName === undefined) byNamespace.set(namespace, (byName = new Map()));
    const previous = byName.get(object.metadata.name);
    if (previous === undefined) this.count++;
    // The object's own name string is the key: no new string.
    byName.set(object.metadata.name, object);
    return previous;
  }

  remove(kind: string, name: string, namespace?: string): boolean {
    const byNamespace = this.byKind.get(kind);
    const ns = namespaceOf(kind, namespace);
    const byName = byNamespace?.get(ns);
    if (byName === undefined || !byName.delete(name)) return false;
    this.count--;
    if (byName.size === 0) byNamespace!.delete(ns);
    if (byNamespace!.size === 0) this.byKind.delete(kind);
    return true;
  }

  /** Every object of one kind, in the order they arrived. */
  *ofKind(kind: string): IterableIterator<ClusterObject> {
    const byNamespace = this.byKind.get(kind);
    if (byNamespace === undefined) return;
    for (const byName of byNamespace.values()) yield* byName.values();
  }

  get(key: string): ClusterObject | undefined {
    const [kind, namespace, name, extra] = key.split('/');
    if (kind === undefined || name === undefined || extra !== undefined) return undefined;
    const object = this.lookup(kind, name, namespace);
    return object !== undefined && objectKey(kind, name, namespace) === key ? object : undefined;
  }

  has(key: string): boolean {
    return this.get(key) !== undefined;
  }

  *values(): IterableIterator<ClusterObject> {
    for (const byNamespace of this.byKind.values())
      for (const byName of byNamespace.values()) yield* byName.values();
  }

  *keys(): IterableIterator<string> {
    for (const object of this.values()) yield keyOf(object);
  }

  *entries(): IterableIterator<[string, ClusterObject]> {
    for (const object of this.values()) yield [keyOf(object), object];
  }

  [Symbol.iterator](): IterableIterator<[string, ClusterObject]> {
    return this.entries();
  }

  forEach(
    callback: (value: ClusterObject, key: string, map: ReadonlyMap<string, ClusterObject>) => void,
  ): void {
    for (const [key, object] of this.entries()) callback(object, key, this);
  }
}

/** objectKey of an object. */
function keyOf(object: ClusterObject): string {
  return objectKey(object.kind, object.metadata.name, object.metadata.namespace);
}

/** The namespace an object of `kind` is kept under: '' for cluster-scoped kinds. */
function namespaceOf(kind: string, namespace: string | undefined): string {
  // objectKey's rule.
  return isNamespacedKind(kind) ? (namespace ?? 'default') : '';
}
