/**
 * Small values that many records hold equal, held once: a bound claim's status (`{ phase:
 * 'Bound' }`, with its access modes and capacity in a real cluster) and a pod's volumes of
 * no claim (the emptyDir, ConfigMap and Secret volumes every replica of a workload declares
 * alike). Each was an object of its own per claim or pod, 150,000 times over: 32 bytes for
 * a status of one field, 64 for `{ name: 'scratch', emptyDir: {} }`.
 *
 * A value is found by its JSON (equal JSON, equal value: these are parsed objects of plain
 * data) and kept deeply frozen: the controller never writes to an object it keeps (a
 * change is a new object, built by a spread), and a write to a shared one throws. Values
 * whose JSON is longer than `sharedValueJsonCharsMax` are kept as they are.
 */
import { sharedValueJsonCharsMax, sharedValuesMax } from '../constants.js';

const held = new Map<string, unknown>();

/** The one shared, frozen value equal to `value` (a copy of the first one met). */
export function sharedValue<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  const json = JSON.stringify(value);
  if (json.length > sharedValueJsonCharsMax) return value;
  const known = held.get(json);
  if (known !== undefined) return known as T;
  if (held.size >= sharedValuesMax) held.clear();
  // A copy: the value met may be part of an event still buffered, left as it is.
  const frozen = deepFrozen(JSON.parse(json) as T);
  held.set(json, frozen);
  return frozen;
}

/** How many values are held for sharing (for tests). */
export function sharedValuesHeld(): number {
  return held.size;
}

function deepFrozen<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  for (const key of Object.keys(value)) deepFrozen((value as Record<string, unknown>)[key]);
  return Object.freeze(value);
}
