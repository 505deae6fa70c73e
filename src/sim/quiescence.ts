/**
 * How a simulation of real code on the virtual clock moves on: it lets the event loop run
 * until nothing more happens, then fires the next timer, until the time asked for.
 */
import type { VirtualClock } from '../clock.js';

/** Whether a callback given to setImmediate has yet to run (a ref'd one: unref'd are not listed). */
const immediatePending = () => process.getActiveResourcesInfo().includes('Immediate');

/**
 * Turns of the event loop until the simulation is quiescent; one that never settles is a
 * livelock: thrown. `exact` (a simulation whose only macrotasks are immediates: no real
 * timers, no I/O): a turn ends with every microtask drained, so once no immediate is left
 * to run nothing more can happen before the next virtual timer, and one turn usually
 * tells. Otherwise `activity()` (a count of everything the simulation did) must stand
 * still for three turns, which costs four turns of the event loop for each timer fired.
 */
export async function settle(activity: () => number, what: string, exact = false): Promise<void> {
  let quiet = 0;
  let last = -1;
  for (let turn = 0; turn < 100_000; turn++) {
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (exact) {
      if (!immediatePending()) return;
      continue;
    }
    const now = activity();
    quiet = now === last ? quiet + 1 : 0;
    last = now;
    if (quiet >= 3) return;
  }
  throw new Error(`${what}: no quiescence within 100,000 turns (a livelock?)`);
}

/** Every timer due within `durationMs`, each followed by a settle, then the clock moved on. */
export async function advance(
  clock: VirtualClock,
  durationMs: number,
  settled: () => Promise<void>,
): Promise<void> {
  const target = clock.nowMs() + durationMs;
  while (clock.fireNext(target)) await settled();
  clock.moveTo(target);
  await settled();
}
