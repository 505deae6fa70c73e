/**
 * The snapshot compactor (src/engine/compact.ts): what a frame decoded, copied equal, its
 * sharing inside a frame kept, none made across frames, and what it cannot rebuild kept
 * as read. That the copy is smaller is in test/engine/sliced-snapshot.unit.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deserialize, serialize } from 'node:v8';
import { Compactor } from '../../src/engine/compact.js';

const readBack = <T>(value: T): T => deserialize(serialize(value)) as T;

test('compactor: a frame copied equal, Maps, Sets, arrays, undefined and nulls kept', () => {
  const value = {
    a: 'ReadWriteOnce',
    n: 1.5e12,
    u: undefined,
    z: null,
    list: [1, 'two', { three: 3 }],
    map: new Map<unknown, unknown>([['k', { v: ['x'] }]]),
    set: new Set(['s', 't']),
    '1': 'an integer key',
  };
  const read = readBack(value);
  const copy = new Compactor().value(read);
  assert.deepStrictEqual(copy, value);
  assert.notEqual(copy, read, 'a new object');
  assert.deepEqual(Object.keys(copy), Object.keys(value), 'its keys in their order');
});

test('compactor: an object shared in a frame is one copy; frames share none', () => {
  const spec = { volume: 'fake.disk/disk-1', accessModes: ['ReadWriteOnce'] };
  const read = readBack({ dsw: { spec }, attachment: { spec } });
  const compactor = new Compactor();
  const copy = compactor.value(read);
  assert.equal(copy.dsw.spec, copy.attachment.spec, 'shared as it was read');
  compactor.frame();
  assert.notEqual(compactor.value(read.dsw.spec), copy.dsw.spec, 'another frame, another copy');
  assert.equal(compactor.stringCount, 2, 'each string held once');
});

test('compactor: an own __proto__ key and objects of other prototypes are kept as read', () => {
  const odd = JSON.parse('{"__proto__": {"polluted": true}, "name": "x"}') as object;
  const compactor = new Compactor();
  const copy = compactor.value(readBack(odd));
  assert.equal(Object.getPrototypeOf(copy), Object.prototype, 'the prototype untouched');
  assert.deepEqual(Object.keys(copy), ['__proto__', 'name']);
  assert.equal(({} as { polluted?: boolean }).polluted, undefined);
  const date = new Date(0);
  assert.equal(compactor.value(date), date, 'a Date is not a record');
});
