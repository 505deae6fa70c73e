/**
 * A volume's entries by pod (its mount records, its desired-state pods): nearly always one
 * pod, so one entry is kept bare and a Map only holds two or more. A one-entry Map costs
 * about 180 bytes of heap, as much as the record it holds; at 100,000 pairs that was an
 * eighth of the world.
 *
 * Reading goes through podEntry / podEntries / podCount. A Map held here is the fold's own
 * and changed in place (setPodEntry / deletePodEntry); copyByPod gives an immutable
 * record's holder its own copy first.
 */
import type { UniquePodName } from '../ids.js';

export type ByPod<V extends { readonly pod: UniquePodName }> = V | Map<UniquePodName, V>;

const none: readonly never[] = Object.freeze([]);

/** The entry of `pod`, if any. */
export function podEntry<V extends { readonly pod: UniquePodName }>(
  byPod: ByPod<V> | undefined,
  pod: UniquePodName,
): V | undefined {
  if (byPod === undefined) return undefined;
  if (byPod instanceof Map) return byPod.get(pod);
  return byPod.pod === pod ? byPod : undefined;
}

/** Every entry, in insertion order. */
export function podEntries<V extends { readonly pod: UniquePodName }>(
  byPod: ByPod<V> | undefined,
): Iterable<V> {
  if (byPod === undefined) return none;
  return byPod instanceof Map ? byPod.values() : [byPod];
}

export function podCount<V extends { readonly pod: UniquePodName }>(
  byPod: ByPod<V> | undefined,
): number {
  if (byPod === undefined) return 0;
  return byPod instanceof Map ? byPod.size : 1;
}

/** Sets `value` as its pod's entry; returns the holder to keep (a Map is changed in place). */
export function setPodEntry<V extends { readonly pod: UniquePodName }>(
  byPod: ByPod<V> | undefined,
  value: V,
): ByPod<V> {
  if (byPod === undefined) return value;
  if (byPod instanceof Map) return byPod.set(value.pod, value);
  if (byPod.pod === value.pod) return value;
  return new Map([
    [byPod.pod, byPod],
    [value.pod, value],
  ]);
}

/** Removes `pod`'s entry; returns the holder to keep, undefined when none is left. */
export function deletePodEntry<V extends { readonly pod: UniquePodName }>(
  byPod: ByPod<V> | undefined,
  pod: UniquePodName,
): ByPod<V> | undefined {
  if (byPod === undefined) return undefined;
  if (!(byPod instanceof Map)) return byPod.pod === pod ? undefined : byPod;
  byPod.delete(pod);
  if (byPod.size > 1) return byPod;
  // Back to a bare entry (or none): a volume whose pods came and went keeps no Map.
  for (const only of byPod.values()) return only;
  return undefined;
}

/** A holder an immutable record can change without touching the one it replaces. */
export function copyByPod<V extends { readonly pod: UniquePodName }>(
  byPod: ByPod<V> | undefined,
): ByPod<V> | undefined {
  return byPod instanceof Map ? new Map(byPod) : byPod;
}

/** Every entry in pod name order (the planner's order, so plans do not depend on history). */
export function podEntriesByName<V extends { readonly pod: UniquePodName }>(
  byPod: ByPod<V> | undefined,
): readonly V[] {
  if (byPod === undefined) return none;
  if (!(byPod instanceof Map)) return [byPod];
  return [...byPod.values()].sort((a, b) => (a.pod < b.pod ? -1 : a.pod > b.pod ? 1 : 0));
}
