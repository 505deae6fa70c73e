/**
 * Folding operator requests (vole detach / release / retry): a request waits for the
 * planner's verdict; an accepted one clears the volume's backoff and, for detach and
 * release, holds the volume until the planner reports it done. Nothing here decides.
 */
import { fail } from '../assert.js';
import type { EventOf } from '../events/index.js';
import { type Seq, UniquePodName, UniqueVolumeName } from '../ids.js';
import { setRecords } from './pending.js';
import type { OperationBook, OperatorRequestRecord, OperatorState } from './types.js';

/** What both cores' worlds have that operator requests need. */
export type OperatorWorld = OperationBook & { seq: Seq; operator: OperatorState };

/** What a fold does with a volume an operator event changed: plan it (and maybe forget it). */
export interface OperatorFoldHooks {
  touch(volume: UniqueVolumeName): void;
  mayBeGone?(volume: UniqueVolumeName): void;
}

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

export function foldOperatorRequested(
  world: OperatorWorld,
  event: EventOf<'OperatorRequested'>,
  hooks: OperatorFoldHooks,
): void {
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
  hooks.touch(volume);
}

/** The failed operation records (in backoff) of a volume, for one pod or all, dropped. */
function clearBackoff(
  world: OperatorWorld,
  volume: UniqueVolumeName,
  pod: UniquePodName | null,
  hooks: OperatorFoldHooks,
): void {
  const records = world.ops.get(volume);
  if (records === undefined) return;
  const kept = records.filter(
    (r) =>
      r.pending || r.lastError === null || (pod !== null && r.key.pod !== '' && r.key.pod !== pod),
  );
  setRecords(world.ops, volume, kept);
  if (kept.length === 0) hooks.mayBeGone?.(volume);
}

export function foldOperatorRequestDecided(
  world: OperatorWorld,
  event: EventOf<'OperatorRequestDecided'>,
  hooks: OperatorFoldHooks,
): void {
  const volume = UniqueVolumeName(event.volume);
  if (event.verdict === 'done') {
    if (take(world.operator.holds, volume, event.requestSeq) === undefined)
      fail(`operator request seq ${event.requestSeq} done but not held (seq ${event.seq})`);
    hooks.mayBeGone?.(volume);
    hooks.touch(volume);
    return;
  }
  const request = take(world.operator.pending, volume, event.requestSeq);
  if (request === undefined)
    fail(`operator request seq ${event.requestSeq} decided twice or never made (seq ${event.seq})`);
  if (event.verdict === 'accepted') {
    clearBackoff(world, volume, request.pod, hooks);
    if (request.action !== 'retry') push(world.operator.holds, volume, request);
  }
  hooks.mayBeGone?.(volume);
  hooks.touch(volume);
}

/** An accepted `vole detach` is under way for the volume. */
export function detachHeld(
  world: { operator: OperatorState },
  volume: UniqueVolumeName,
  node?: string,
): boolean {
  return (
    world.operator.holds
      .get(volume)
      ?.some((r) => r.action === 'detach' && (node === undefined || r.node === node)) === true
  );
}

/** An accepted release (or detach) takes this pod's volume down. */
export function releaseHeld(
  world: { operator: OperatorState },
  volume: UniqueVolumeName,
  pod: UniquePodName,
): boolean {
  return (
    world.operator.holds
      .get(volume)
      ?.some((r) => r.action === 'detach' || (r.action === 'release' && r.pod === pod)) === true
  );
}
