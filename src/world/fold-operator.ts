/**
 * Folding operator requests (vole detach / release / retry): a request waits for the
 * planner's verdict; an accepted one clears the volume's backoff and, for detach and
 * release, holds the volume until the planner reports it done. Nothing here decides.
 */
import { fail } from '../assert.js';
import type { EventOf } from '../events/index.js';
import { type Seq, UniquePodName, UniqueVolumeName } from '../ids.js';
import { touch } from './fold-desired.js';
import { mayBeGone } from './gone.js';
import { setRecords } from './pending.js';
import type { OperatorRequestRecord, World } from './types.js';

function push(
  map: Map<UniqueVolumeName, OperatorRequestRecord[]>,
  volume: UniqueVolumeName,
  record: OperatorRequestRecord,
): void {
  map.set(volume, [...(map.get(volume) ?? []), record]);
}

/** Removes the request with `seq` from `map`; returns it, or undefined. */
function take(
  map: Map<UniqueVolumeName, OperatorRequestRecord[]>,
  volume: UniqueVolumeName,
  seq: number,
): OperatorRequestRecord | undefined {
  const records = map.get(volume) ?? [];
  const found = records.find((r) => r.seq === seq);
  if (found === undefined) return undefined;
  const rest = records.filter((r) => r !== found);
  if (rest.length === 0) map.delete(volume);
  else map.set(volume, rest);
  return found;
}

export function foldOperatorRequested(world: World, event: EventOf<'OperatorRequested'>): void {
  const volume = UniqueVolumeName(event.volume);
  push(world.operator.pending, volume, {
    seq: event.seq as Seq,
    action: event.action,
    volume,
    pod: event.pod === undefined ? null : UniquePodName(event.pod),
    node: event.node ?? null,
    force: event.force,
    reason: event.reason,
  });
  touch(world, volume);
}

/** The failed operation records (in backoff) of a volume, for one pod or all, dropped. */
function clearBackoff(world: World, volume: UniqueVolumeName, pod: UniquePodName | null): void {
  const records = world.ops.get(volume);
  if (records === undefined) return;
  const kept = records.filter(
    (r) => r.pending || r.lastError === null || (pod !== null && r.key.pod !== '' && r.key.pod !== pod),
  );
  setRecords(world.ops, volume, kept);
  if (kept.length === 0) mayBeGone(volume);
}

export function foldOperatorRequestDecided(
  world: World,
  event: EventOf<'OperatorRequestDecided'>,
): void {
  const volume = UniqueVolumeName(event.volume);
  if (event.verdict === 'done') {
    if (take(world.operator.holds, volume, event.requestSeq) === undefined)
      fail(`operator request seq ${event.requestSeq} done but not held (seq ${event.seq})`);
    mayBeGone(volume);
    touch(world, volume);
    return;
  }
  const request = take(world.operator.pending, volume, event.requestSeq);
  if (request === undefined)
    fail(`operator request seq ${event.requestSeq} decided twice or never made (seq ${event.seq})`);
  if (event.verdict === 'accepted') {
    clearBackoff(world, volume, request.pod);
    if (request.action !== 'retry') push(world.operator.holds, volume, request);
  }
  mayBeGone(volume);
  touch(world, volume);
}

/** An accepted `vole detach` is under way for the volume. */
export function detachHeld(world: World, volume: UniqueVolumeName): boolean {
  return world.operator.holds.get(volume)?.some((r) => r.action === 'detach') === true;
}

/** An accepted release (or detach) takes this pod's volume down. */
export function releaseHeld(world: World, volume: UniqueVolumeName, pod: UniquePodName): boolean {
  return (
    world.operator.holds
      .get(volume)
      ?.some((r) => r.action === 'detach' || (r.action === 'release' && r.pod === pod)) === true
  );
}
