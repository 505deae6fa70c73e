/**
 * The kubelet's design, for comparison: the same Engine (fold, planner, executor, plugins),
 * but planning only from a loop that wakes every `periodMs`, marks every volume dirty and
 * ticks until all are planned — the reconciler's 100 ms loop over the whole desired and
 * actual state.
 *
 * src/ is unchanged: the engine's event-driven trigger (its private `scheduleTick`, called
 * after every append and after a tick that left work) is replaced on this one instance by
 * a no-op. The check below fails loudly if the engine's internals move.
 */
import type { Engine } from '../../src/engine/engine.js';
import type { Operation } from '../../src/kubelet/planner.js';
import type { World } from '../../src/kubelet/types.js';
import { allVolumes } from '../../src/kubelet/planner.js';

export interface PollingDriver {
  stop(): void;
  readonly ticks: number;
}

/** Turns `engine` (not yet started) into a polling engine; call `stop()` when done. */
export function pollEvery(engine: Engine<World, Operation>, periodMs: number): PollingDriver {
  const proto = Object.getPrototypeOf(engine) as Record<string, unknown>;
  if (typeof proto.scheduleTick !== 'function') {
    throw new Error(
      'polling driver: Engine has no scheduleTick any more; it needs an opt-in option in src/engine/engine.ts',
    );
  }
  Object.defineProperty(engine, 'scheduleTick', { value: () => {}, configurable: true });
  let ticks = 0;
  const timer = setInterval(() => {
    if (!engine.isRunning) return;
    for (const volume of allVolumes(engine.world)) engine.world.dirty.add(volume);
    // One reconcile pass covers every volume: a tick plans at most planOperationsMax
    // volumes and leaves the rest dirty, so tick until nothing is left (the operations it
    // starts dirty their volumes once more, which then plan nothing while they run).
    for (let i = 0; i < 1_000 && engine.world.dirty.size > 0; i++) engine.tick();
    ticks++;
  }, periodMs);
  return {
    stop: () => clearInterval(timer),
    get ticks() {
      return ticks;
    },
  };
}
