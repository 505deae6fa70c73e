/** Heap measurements for the tests that bound what a record keeps. */
import assert from 'node:assert/strict';
import { heapUsedAfterGc } from '../../scripts/bench/util.js';

/**
 * The heap bytes each of the values `make` returns keeps, after a full collection: the
 * least of three rounds, since what else the process allocates meanwhile (a compiled
 * function, a timer's closure) only ever adds to a round. `make` builds the values in its
 * own frame, so its temporaries are gone when the heap is measured (a frame that measures
 * keeps its own).
 */
export function keptBytesEach(make: () => readonly unknown[], rounds = 3): number {
  let least = Number.POSITIVE_INFINITY;
  for (let round = 0; round < rounds; round++) least = Math.min(least, keptBytesOnce(make));
  return least;
}

function keptBytesOnce(make: () => readonly unknown[]): number {
  const before = heapUsedAfterGc();
  const kept = make();
  const bytes = (heapUsedAfterGc() - before) / kept.length;
  assert.ok(kept.length > 0, 'the values measured are kept');
  return bytes;
}
