/** Heap measurements for the tests that bound what a record keeps. */
import assert from 'node:assert/strict';
import { heapUsedAfterGc } from '../../scripts/bench/util.js';

/**
 * The heap bytes each of the values `make` returns keeps, after a full collection. `make`
 * builds them in its own frame, so its temporaries are gone when the heap is measured (a
 * frame that measures keeps its own).
 */
export function keptBytesEach(make: () => readonly unknown[]): number {
  const before = heapUsedAfterGc();
  const kept = make();
  const bytes = (heapUsedAfterGc() - before) / kept.length;
  assert.ok(kept.length > 0, 'the values measured are kept');
  return bytes;
}
