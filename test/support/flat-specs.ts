/**
 * Worlds as snapshots held them before a resolved spec's traits were shared: every spec
 * flat, its traits' fields in the spec itself (src/operations/volume-traits.ts refuses them).
 */
import type { ResolvedVolume } from '../../src/operations/volume-spec.js';

function isSpec(value: object): value is ResolvedVolume {
  return 'outerVolumeSpecName' in value && 'traits' in value;
}

function isFlatSpec(value: object): boolean {
  return 'outerVolumeSpecName' in value && 'pluginName' in value && !('traits' in value);
}

/** Every place under `root` that can hold a value: a Map's values, an array's or object's fields. */
function* holders(value: object): Generator<[get: () => unknown, set: (v: unknown) => void]> {
  if (value instanceof Map) {
    for (const key of value.keys()) yield [() => value.get(key), (v) => value.set(key, v)];
  } else if (value instanceof Set) {
    for (const item of value) yield [() => item, () => {}];
  } else if (!Object.isFrozen(value)) {
    const record = value as Record<string, unknown>;
    for (const key of Object.keys(record)) yield [() => record[key], (v) => (record[key] = v)];
  }
}

/**
 * Replaces, in place, every spec under `root` by its flat copy (one copy a spec, so what
 * shared it still does); returns how many specs were made flat.
 */
export function flattenSpecs(root: object): number {
  const flat = new Map<object, unknown>();
  const seen = new Set<object>();
  const walk = (value: object): void => {
    if (seen.has(value)) return;
    seen.add(value);
    for (const [get, set] of holders(value)) {
      const held = get();
      if (typeof held !== 'object' || held === null) continue;
      if (!isSpec(held)) {
        walk(held);
        continue;
      }
      let copy = flat.get(held);
      if (copy === undefined) {
        const { traits, ...rest } = held;
        flat.set(held, (copy = { ...rest, ...traits }));
      }
      set(copy);
    }
  };
  walk(root);
  return flat.size;
}

/** How many flat specs are under `root` (0 once a snapshot is read). */
export function flatSpecCount(root: object): number {
  let count = 0;
  const seen = new Set<object>();
  const walk = (value: object): void => {
    if (seen.has(value)) return;
    seen.add(value);
    if (isFlatSpec(value)) count++;
    for (const [get] of holders(value)) {
      const held = get();
      if (typeof held === 'object' && held !== null) walk(held);
    }
  };
  walk(root);
  return count;
}
