/**
 * The controller fold's changes to its (volume, node) pairs (types.ts ControllerPair): the
 * desire as pods scheduled to a node come and go (behaviour C4.7), the attachment machine's steps
 * (behaviour C2.1), the detach timers (C3.3), and the indexes by volume and by node kept in step.
 */
import type { AttachmentEvent } from '../../machines/index.js';
import { assert } from '../assert.js';
import type { NodeName, UniquePodName, UniqueVolumeName } from '../ids.js';
import { touchVolume } from '../operations/book.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';
import { attachmentPairs } from '../operations/pair-machines.js';
import {
  addOne,
  addToIndex,
  hasOne,
  removeFromIndex,
  removeOne,
  valuesOf,
  withOne,
  withoutOne,
} from '../desired/one-or-many.js';
import {
  attachmentOf,
  attachmentState,
  desiredOf,
  detachedPair,
  emptyPair,
  newDesired,
  undesiredPair,
} from './memory.js';
import {
  type ControllerAttachment,
  type ControllerPair,
  type ControllerWorld,
  attachmentAt,
  isAttached,
  isDesired,
  pairKey,
  volumesOf,
} from './types.js';

/** The volume is planned again (dirty) and the fold's end looks at it (touched). */
export function touch(world: ControllerWorld, volume: UniqueVolumeName): void {
  touchVolume(world, volume, world.seq);
  world.touched.add(volume);
}

/** Keeps nodesByVolume and volumesByNode in step after a pair came, went or changed. */
export function reindexPair(
  world: ControllerWorld,
  volume: UniqueVolumeName,
  node: NodeName,
): void {
  const pair = world.pairs.get(pairKey(volume, node));
  if (pair !== undefined) addOne(world.nodesByVolume, volume, node);
  else removeOne(world.nodesByVolume, volume, node);
  if (pair !== undefined && isAttached(pair)) addToIndex(world.volumesByNode, node, volume);
  else removeFromIndex(world.volumesByNode, node, volume);
}

/** The pair of `key` set to `next`, or gone when undefined (neither desired nor attached). */
function setPair(world: ControllerWorld, key: string, next: ControllerPair | undefined): void {
  if (next === undefined) world.pairs.delete(key);
  else world.pairs.set(key, next);
}

/** The attachments of one volume (any state), by node. */
export function attachmentsOf(world: ControllerWorld, volume: UniqueVolumeName) {
  const out: ControllerAttachment[] = [];
  for (const node of valuesOf(world.nodesByVolume.get(volume))) {
    const a = attachmentAt(world, pairKey(volume, node));
    if (a !== undefined) out.push(a);
  }
  return out;
}

/**
 * behaviour C4.7 ProcessPodVolumes(remove): the pod leaves the desire of each of its pairs; a pair
 * no pod wants keeps its attachment (to detach), or goes when it has none. No-op for a pod
 * without a record or a node.
 */
export function removePodFromDsw(world: ControllerWorld, uid: UniquePodName): void {
  const record = world.pods.get(uid);
  if (record === undefined || record.node === null) return;
  for (const v of volumesOf(record.volumes)) {
    const key = pairKey(v.volume, record.node);
    const pair = world.pairs.get(key);
    if (pair === undefined || !isDesired(pair) || !hasOne(pair.pods, uid)) continue;
    const pods = withoutOne(pair.pods, uid);
    // The last pod gone: the multi-attach flag goes with the desire, the attachment stays.
    setPair(world, key, pods === undefined ? undesiredPair(pair) : { ...pair, pods });
    reindexPair(world, v.volume, record.node);
    touch(world, v.volume);
  }
}

/** behaviour C4.7 ProcessPodVolumes(add): only for a scheduled, not terminated pod on a managed node. */
export function addPodToDsw(world: ControllerWorld, uid: UniquePodName): void {
  const record = world.pods.get(uid);
  if (record === undefined || record.node === null || record.terminated) return;
  if (world.nodes.get(record.node)?.managed !== true) return;
  for (const v of volumesOf(record.volumes)) {
    const key = pairKey(v.volume, record.node);
    const pair = world.pairs.get(key);
    world.pairs.set(
      key,
      pair === undefined
        ? newDesired(v.volume, record.node, uid, v)
        : desiredOf(pair, withOne(pair.pods ?? undefined, uid), v),
    );
    reindexPair(world, v.volume, record.node);
    touch(world, v.volume);
  }
}

/**
 * One step of the (volume, node) attachment machine (behaviour C2.1). A pair not attached starts in
 * the machine's initial state, with `spec` (required then); a step to `detached` leaves its
 * desire, or the pair goes. An event the state does not accept fails an assertion, unless
 * it is an observation (accepted in every state or ignored).
 */
export function step(
  world: ControllerWorld,
  volume: UniqueVolumeName,
  node: NodeName,
  spec: ResolvedVolume | null,
  event: AttachmentEvent,
  observation = false,
): void {
  const key = pairKey(volume, node);
  const pair = world.pairs.get(key);
  const existing = pair !== undefined && isAttached(pair) ? pair : undefined;
  assert(
    existing !== undefined || spec !== null,
    () => `attachment ${key}: no spec to create it (seq ${world.seq})`,
  );
  // A pair not attached is in the machine's initial state (its desire, if any, kept).
  const record = pair ?? emptyPair(volume, node);
  const next = attachmentPairs.transition(attachmentState(record), event);
  if (next === undefined) {
    assert(
      observation,
      () =>
        `attachment ${key}: ${event.type} not accepted in state ${record.value} (seq ${world.seq})`,
    );
    return;
  }
  const created =
    existing === undefined || !/^(attached|attachUncertain|detaching)/.test(record.value);
  if (next.value === 'detached') {
    setPair(world, key, detachedPair(record));
    reindexPair(world, volume, node);
    world.reported.get(node)?.delete(volume); // §2.1 MarkVolumeAsDetached: remove from report
    return;
  }
  world.pairs.set(key, attachmentOf(record, next, world.seq, spec));
  if (existing === undefined) reindexPair(world, volume, node);
  // behaviour C2.1 AddVolumeNode on a new entry: "assume mounted until proven otherwise".
  if (created && /^(attached|attachUncertain)/.test(next.value)) {
    const n = world.nodes.get(node);
    if (n !== undefined && !n.volumesInUse.has(volume))
      world.nodes.set(node, { ...n, volumesInUse: new Set([...n.volumesInUse, volume]) });
  }
  if (next.value.startsWith('attached')) reportAttached(world, volume, node);
}

/**
 * The volume goes (back) into the node's report (AddVolumeToReportAsAttached of the
 * controller's actual_state_of_world.go).
 */
function reportAttached(world: ControllerWorld, volume: UniqueVolumeName, node: NodeName): void {
  const set = world.reported.get(node) ?? new Set();
  set.add(volume);
  world.reported.set(node, set);
}

/**
 * A detach that ended with the volume still confirmed attached (verifySafeToDetach found
 * it in use again, or the operation ended before its call) puts it back in the node's
 * report: its start took it out (as the reconciler's RemoveVolumeFromReportAsAttached),
 * and the node's agent mounts only what it reads in volumesAttached, so a pod scheduled
 * there again would wait for it forever. As GenerateDetachVolumeFunc
 * (operation_generator.go) does on any failure.
 */
export function reportIfStillAttached(
  world: ControllerWorld,
  volume: UniqueVolumeName,
  node: NodeName,
): void {
  if (attachmentAt(world, pairKey(volume, node))?.value.startsWith('attached') === true)
    reportAttached(world, volume, node);
}

/** Every volume confirmed attached goes into its node's report (nothing runs: a start). */
export function reportEveryAttached(world: ControllerWorld): void {
  for (const pair of world.pairs.values())
    if (isAttached(pair) && pair.value.startsWith('attached'))
      reportAttached(world, pair.volume, pair.node);
}

/**
 * behaviour C3.3 step 4 / C3.4 step 2 / C7.2 L6: the detach timer starts when an attached volume is
 * first seen undesired and resets only when it is desired and confirmed attached.
 */
export function updateTimers(world: ControllerWorld, volume: UniqueVolumeName, tsMs: number): void {
  for (const a of attachmentsOf(world, volume)) {
    const desired = isDesired(a);
    let at = a.detachRequestedAtMs;
    if (desired && a.value.startsWith('attached')) at = null;
    else if (!desired && at === null) at = tsMs;
    if (at !== a.detachRequestedAtMs)
      world.pairs.set(pairKey(a.volume, a.node), { ...a, detachRequestedAtMs: at });
  }
}
