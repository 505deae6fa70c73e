/**
 * `JSON.stringify(a) === JSON.stringify(b)` without building either string: how a new
 * leader's inputs compare what they list with the world (150,000 keys at 50,000 pods; the
 * two strings a key and their collection were a fifth of a takeover's inputs). It walks
 * both values as JSON.stringify would: a property whose value is undefined, a function or
 * a symbol is left out, such an array element is null, as is a number that is not finite;
 * keys compare in their order. Anything JSON.stringify treats specially (a toJSON method,
 * a class instance, a boxed primitive, a bigint) makes it compare the two strings.
 */

/** A value JSON.stringify leaves out of an object (and writes as null in an array). */
const omitted = Symbol('omitted');

class Unusual extends Error {}

type Json = null | boolean | number | string | readonly unknown[] | Record<string, unknown>;

/** The value as JSON.stringify sees it. */
function seen(value: unknown): Json | typeof omitted {
  switch (typeof value) {
    case 'undefined':
    case 'function':
    case 'symbol':
      return omitted;
    case 'number':
      return Number.isFinite(value) ? value : null;
    case 'string':
    case 'boolean':
      return value;
    case 'bigint':
      throw new Unusual();
  }
  if (value === null) return null;
  const proto: unknown = Object.getPrototypeOf(value);
  const plain = proto === Object.prototype || proto === null || proto === Array.prototype;
  if (!plain || 'toJSON' in (value as object)) throw new Unusual();
  return value as Json;
}

function equal(a: unknown, b: unknown): boolean {
  if (a === b && typeof a !== 'number') return true;
  const x = seen(a);
  const y = seen(b);
  if (x === y) return true; // the same primitive, object or array, or both left out
  if (x === null || y === null || typeof x !== 'object' || typeof y !== 'object') return false;
  if (Array.isArray(x) !== Array.isArray(y)) return false;
  if (Array.isArray(x)) return sameArray(x, y as readonly unknown[]);
  return sameObject(x as Record<string, unknown>, y as Record<string, unknown>);
}

function sameArray(x: readonly unknown[], y: readonly unknown[]): boolean {
  if (x.length !== y.length) return false;
  for (let i = 0; i < x.length; i++) {
    const a = seen(x[i]);
    const b = seen(y[i]);
    if ((a === omitted ? null : a) === (b === omitted ? null : b)) continue;
    if (!equal(x[i], y[i])) return false;
  }
  return true;
}

/** The same keys in the same order (those left out skipped), each with an equal value. */
function sameObject(x: Record<string, unknown>, y: Record<string, unknown>): boolean {
  const xs = Object.keys(x);
  const ys = Object.keys(y);
  let j = 0;
  for (const key of xs) {
    if (seen(x[key]) === omitted) continue;
    while (j < ys.length && seen(y[ys[j]!]) === omitted) j++;
    if (j === ys.length || ys[j] !== key || !equal(x[key], y[key])) return false;
    j++;
  }
  while (j < ys.length && seen(y[ys[j]!]) === omitted) j++;
  return j === ys.length;
}

export function sameJson(a: unknown, b: unknown): boolean {
  try {
    return equal(a, b);
  } catch (error) {
    if (!(error instanceof Unusual)) throw error;
    return JSON.stringify(a) === JSON.stringify(b);
  }
}
