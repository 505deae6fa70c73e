/**
 * Which volumes the node's world may have left gone (not desired, not attached, not
 * mounted); the rule that forgets them is both cores' (src/desired/gone.ts).
 *
 * A volume can only become gone where the fold deletes one of those entries, or where an
 * observation names a volume the world never had. Those places call mayBeGone(); at the
 * end of the event forgetGoneVolumes() checks just them. (Checking every touched volume
 * after every event cost a tenth of the fold: most events touch one and delete nothing.)
 * The candidates are the world's scratch (`maybeGone`), so the fold keeps no state of its
 * own between calls.
 */
import { bookHolds, forgetGone } from '../desired/gone.js';
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

/** Drops the records, causes, last errors and dirty marks of the candidates gone at the event's end. */
function forgetGoneVolumes(world: World): void {
  const candidates = world.maybeGone;
  for (let i = 0; i < candidates.length; i++) {
    const volume = candidates[i]!;
    const record = world.volumes.get(volume);
    if (record !== undefined && !holdsNothing(record)) continue;
    if (bookHolds(world, volume)) continue;
    forgetVolume(world, volume); // its record, and the cause it held
    forgetGone(world, volume);
  }
  if (candidates.length > 0) candidates.length = 0;
}
