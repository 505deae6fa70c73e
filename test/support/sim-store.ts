/**
 * The simulated etcd (src/sim/store-sim.ts) for unit tests: a store on a virtual clock with
 * a client of its own, and the clock moved on with a turn of the event loop around each
 * timer it fires.
 */
import { VirtualClock } from '../../src/clock.js';
import { SimStore } from '../../src/sim/store-sim.js';
import { SimStoreClient } from '../../src/sim/store-sim-client.js';

/** A store drawing its faults from `random` (0.9: none), and a client named `test`. */
export function simStore(random: () => number = () => 0.9) {
  const clock = new VirtualClock(0);
  const store = new SimStore(clock, random);
  const client = new SimStoreClient(store, clock, 'test');
  return { clock, store, client };
}

export const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Fires every timer due within `durationMs`, a turn after each, and moves the clock there. */
export async function advance(clock: VirtualClock, durationMs: number): Promise<void> {
  const target = clock.nowMs() + durationMs;
  await turn();
  while (clock.fireNext(target)) await turn();
  clock.moveTo(target);
  await turn();
}
