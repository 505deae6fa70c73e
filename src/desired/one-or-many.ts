/**
 * Indexes from a key to the values under it (the controller's, and the pods by object
 * both folds keep: references.ts), holding one value bare and a Set only from two: most of a large cluster's volumes are on one node and most of its
 * objects are read by one pod, and a Set of one costs about 150 bytes of heap per key
 * (150,000 pods: some 60 MiB). Values are never Sets themselves.
 */
export type OneOrMany<V> = V | ReadonlySet<V>;

export function addOne<K, V>(index: Map<K, OneOrMany<V>>, key: K, value: V): void {
  const held = index.get(key);
  if (held === undefined) index.set(key, value);
  else if (held instanceof Set) (held as Set<V>).add(value);
  else if (held !== value) index.set(key, new Set([held as V, value]));
}

export function removeOne<K, V>(index: Map<K, OneOrMany<V>>, key: K, value: V): void {
  const held = index.get(key);
  if (held === undefined) return;
  if (!(held instanceof Set)) {
    if (held === value) index.delete(key);
    return;
  }
  const set = held as Set<V>;
  set.delete(value);
  if (set.size === 0) index.delete(key);
  else if (set.size === 1) index.set(key, set.values().next().value as V);
}

/** The values under a key (none when absent). */
export function valuesOf<V>(held: OneOrMany<V> | undefined): Iterable<V> {
  if (held === undefined) return [];
  return held instanceof Set ? (held as ReadonlySet<V>) : [held as V];
}

/** Plain Set indexes (a key's values, the key gone with its last value). */
export function addToIndex<K, V>(index: Map<K, Set<V>>, key: K, value: V): void {
  const set = index.get(key);
  if (set === undefined) index.set(key, new Set([value]));
  else set.add(value);
}

export function removeFromIndex<K, V>(index: Map<K, Set<V>>, key: K, value: V): void {
  const set = index.get(key);
  if (set === undefined) return;
  set.delete(value);
  if (set.size === 0) index.delete(key);
}

/** Whether `value` is among those held. */
export function hasOne<V>(held: OneOrMany<V> | undefined, value: V): boolean {
  return held instanceof Set ? (held as ReadonlySet<V>).has(value) : held === value;
}

/** The values held with `value` added, as a new value: a record holding them stays unchanged. */
export function withOne<V>(held: OneOrMany<V> | undefined, value: V): OneOrMany<V> {
  if (held === undefined || held === value) return value;
  if (held instanceof Set) return new Set([...(held as ReadonlySet<V>), value]);
  return new Set([held as V, value]);
}

/** The values held without `value`, as a new value (undefined when none is left). */
export function withoutOne<V>(held: OneOrMany<V>, value: V): OneOrMany<V> | undefined {
  if (!(held instanceof Set)) return held === value ? undefined : held;
  const rest = [...(held as ReadonlySet<V>)].filter((v) => v !== value);
  if (rest.length === 0) return undefined;
  const [only] = rest;
  return rest.length === 1 ? (only as V) : new Set(rest);
}
