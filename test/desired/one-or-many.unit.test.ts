/**
 * The one-or-many values of the indexes (src/desired/one-or-many.ts): one value bare, a
 * Set only from two, in the indexes (changed in place) and in records (new values).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  addOne,
  hasOne,
  type OneOrMany,
  removeOne,
  valuesOf,
  withOne,
  withoutOne,
} from '../../src/desired/one-or-many.js';

test('one-or-many: an index holds one value bare and a Set from two, back to bare at one', () => {
  const index = new Map<string, OneOrMany<string>>();
  addOne(index, 'k', 'a');
  assert.equal(index.get('k'), 'a');
  addOne(index, 'k', 'a');
  assert.equal(index.get('k'), 'a', 'the same value again: still bare');
  addOne(index, 'k', 'b');
  assert.deepEqual(index.get('k'), new Set(['a', 'b']));
  removeOne(index, 'k', 'a');
  assert.equal(index.get('k'), 'b');
  removeOne(index, 'k', 'b');
  assert.equal(index.has('k'), false);
});

test('one-or-many: withOne and withoutOne return new values and leave the held one unchanged', () => {
  const one = withOne(undefined, 'a');
  assert.equal(one, 'a');
  assert.equal(withOne(one, 'a'), 'a');
  const two = withOne(one, 'b');
  assert.deepEqual(two, new Set(['a', 'b']));
  const three = withOne(two, 'c');
  assert.deepEqual(two, new Set(['a', 'b']), 'the Set held before is not changed');
  assert.deepEqual([...valuesOf(three)], ['a', 'b', 'c']);
  assert.ok(hasOne(three, 'c') && hasOne(one, 'a') && !hasOne(one, 'b') && !hasOne(undefined, 'a'));
  assert.deepEqual(withoutOne(three, 'b'), new Set(['a', 'c']));
  assert.deepEqual(three, new Set(['a', 'b', 'c']), 'the Set held before is not changed');
  assert.equal(withoutOne(two, 'a'), 'b', 'one left: bare');
  assert.equal(withoutOne(one, 'a'), undefined, 'none left');
  assert.equal(withoutOne(one, 'b'), 'a', 'another value: unchanged');
});
