/**
 * How a simulation of real code on the virtual clock moves on: it lets the event loop run
 * until nothing more happens, then fires the next timer, until the time asked for.
 */
import type { VirtualClock } from '../clock.js';

/**
 * Turns of the event loop until `activity()` (a count of everything the simulation did) has
 * stood still for three turns; a simulation that never settles is a livelock: thrown.
 */
export async function settle(activity: () => number, what: string): Promise<void> {
  let quiet = 0;
  let last = -1;
  for (let turn = 0; turn < 100_000; turn++) {
    await new Promise<void>((resolve) => setImmediate(resolve));
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
