/**
 * Forgetting volumes gone from a world, the same way in both cores: a volume that nothing
 * the core holds names any more (the node: no desired pod, attachment or mount; the
 * controller: desired and attached on no node), with no operation record and no operator
 * request, loses its cause, last error and dirty mark, so a long-running engine does not
 * grow with every volume it ever saw (the log keeps their history). Which volumes to check
 * is the core's: the node notes candidates where its fold deletes (src/kubelet/gone.ts), the
 * controller checks the volumes an event touched.
 */
import type { UniqueVolumeName } from '../ids.js';

/** What forgetting reads and drops of a world, kubelet's or controller's. */
export interface ForgettingWorld {
  readonly ops: ReadonlyMap<UniqueVolumeName, unknown>;
  readonly operator: {
    readonly pending: ReadonlyMap<UniqueVolumeName, unknown>;
    readonly holds: ReadonlyMap<UniqueVolumeName, unknown>;
  };
  readonly lastErrors: Map<UniqueVolumeName, unknown>;
  readonly causes: { delete(volume: UniqueVolumeName): boolean };
  readonly dirty: Set<UniqueVolumeName>;
  readonly provisioning: {
    readonly inFlight: ReadonlyMap<UniqueVolumeName, unknown>;
    readonly provisioned: ReadonlyMap<UniqueVolumeName, string>;
  };
}

/** Does the operation book still name the volume (an operation record, an operator request)? */
export function bookHolds(world: ForgettingWorld, volume: UniqueVolumeName): boolean {
  return (
    world.ops.has(volume) || world.operator.pending.has(volume) || world.operator.holds.has(volume)
  );
}

/**
 * Drops what a world keeps of a gone volume: its cause and last error, and its dirty mark
 * (a replay's dirty set stays the size of the world) unless provisioning has it to plan
 * still (a provisioned volume's reclaim, a CreateVolume that may have taken effect).
 */
export function forgetGone(world: ForgettingWorld, volume: UniqueVolumeName): void {
  world.causes.delete(volume);
  world.lastErrors.delete(volume);
  const { provisioned, inFlight } = world.provisioning;
  if (!provisioned.has(volume) && !inFlight.has(volume)) world.dirty.delete(volume);
}
