/**
 * Forgetting volumes that are gone from the world entirely (not desired, not attached, not
 * mounted, no operation record), so a long-running agent does not grow with every volume
 * it ever saw; the log keeps their history.
 *
 * A volume can only become gone where the fold deletes one of those entries, or where an
 * observation names a volume the world never had. Those places call mayBeGone(); at the
 * end of the event forgetGoneVolumes() checks just them. (Checking every touched volume
 * after every event cost a tenth of the fold: most events touch one and delete nothing.)
 * The candidates are the world's scratch (`maybeGone`), so the fold keeps no state of its
 * own between calls.
 */
import type { UniqueVolumeName } from '../ids.js';
import type { World } from './types.js';
import { forgetVolume, holdsNothing } from './volumes.js';

/** Notes that `volume` may be gone once the event is folded. */
export function mayBeGone(world: World, volume: UniqueVolumeName): void {
  world.maybeGone.push(volume);
}

/** Starts an event afresh (an event that failed an assertion may have left candidates). */
export function startEvent(world: World): void {
  if (world.maybeGone.length > 0) world.maybeGone.length = 0;
}

/** Ends an event: forgets the volumes it left gone, drops the event's scratch. */
export function endEvent(world: World): void {
  forgetGoneVolumes(world);
  if (world.takenVolumes !== undefined) world.takenVolumes = undefined;
}

/** Drops the records, last errors and dirty marks of the candidates gone at the event's end. */
function forgetGoneVolumes(world: World): void {
  const candidates = world.maybeGone;
  for (let i = 0; i < candidates.length; i++) {
    const volume = candidates[i]!;
    const record = world.volumes.get(volume);
    if (record !== undefined && !holdsNothing(record)) continue;
    if (world.ops.has(volume)) continue;
    if (world.operator.pending.has(volume) || world.operator.holds.has(volume)) continue;
    forgetVolume(world, volume); // its record, and the cause it held
    world.lastErrors.delete(volume);
    // Nothing left to plan for it either: a replay's dirty set stays the size of the world.
    // A provisioned volume no longer used here is the reclaimer's to plan (DeleteVolume).
    const { provisioned, inFlight } = world.provisioning;
    if (!provisioned.has(volume) && !inFlight.has(volume)) world.dirty.delete(volume);
  }
  if (candidates.length > 0) candidates.length = 0;
}
