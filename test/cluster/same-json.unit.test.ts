/** sameJson (src/cluster/same-json.ts) answers exactly as comparing the two JSON.stringify strings. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sameJson } from '../../src/cluster/same-json.js';
import { prng as random } from '../../src/sim/chaos.js';

const leaves = [undefined, null, 0, -0, 1, 1.5, NaN, Infinity, '', 'a', '1', true, false, () => 1];

function value(next: () => number, depth: number): unknown {
  const r = next();
  if (depth === 0 || r < 0.4) return leaves[Math.floor(next() * leaves.length)];
  if (r < 0.6) return Array.from({ length: Math.floor(next() * 4) }, () => value(next, depth - 1));
  if (r < 0.62) return new Date(0);
  const object: Record<string, unknown> = {};
  for (const key of ['a', 'b', '1', 'c'].filter(() => next() < 0.6))
    object[key] = value(next, depth - 1);
  return object;
}

/** A copy changed a little, or not at all: equal pairs must be common for the test to say anything. */
function mutated(v: unknown, next: () => number): unknown {
  if (next() < 0.15) return value(next, 2);
  if (Array.isArray(v)) return v.map((x) => mutated(x, next));
  if (v !== null && typeof v === 'object' && !(v instanceof Date)) {
    const entries = Object.entries(v).map(([k, x]) => [k, mutated(x, next)] as const);
    if (next() < 0.1) entries.reverse();
    if (next() < 0.1) entries.push(['d', next() < 0.5 ? undefined : 1]);
    return Object.fromEntries(entries);
  }
  return v;
}

test('sameJson agrees with comparing JSON.stringify on random values and their near copies', () => {
  let equalPairs = 0;
  for (let seed = 1; seed <= 20_000; seed++) {
    const next = random(seed);
    const a = value(next, 4);
    const b = mutated(a, next);
    const expected = JSON.stringify(a) === JSON.stringify(b);
    if (expected) equalPairs++;
    assert.equal(
      sameJson(a, b),
      expected,
      `seed ${seed}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`,
    );
  }
  assert.ok(equalPairs > 2_000 && equalPairs < 18_000, `equal pairs: ${equalPairs}`);
});

test('sameJson: left-out values, array nulls, key order, non-finite numbers, toJSON', () => {
  assert.equal(sameJson({ a: 1, b: undefined }, { a: 1 }), true);
  assert.equal(sameJson([undefined, () => 1], [null, null]), true);
  assert.equal(sameJson({ a: 1, b: 2 }, { b: 2, a: 1 }), false);
  assert.equal(sameJson({ a: NaN }, { a: null }), true);
  assert.equal(sameJson({ a: 1 }, { a: '1' }), false);
  assert.equal(
    sameJson(undefined, () => 1),
    true,
  );
  assert.equal(sameJson({ t: new Date(0) }, { t: '1970-01-01T00:00:00.000Z' }), true);
  assert.equal(sameJson([1, 2], { 0: 1, 1: 2 }), false);
});
