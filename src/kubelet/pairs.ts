/**
 * Pair record updates: every change of an attachment or mount record goes through these,
 * so the machines stay the only definition of legal transitions.
 */
import type {
  AttachmentContext,
  AttachmentEvent,
  MountContext,
  MountEvent,
} from '../../machines/index.js';
import { fail } from '../assert.js';
import type { NodeName, Seq, UniquePodName, UniqueVolumeName } from '../ids.js';
import { deletePodEntry, podEntry, setPodEntry } from './by-pod.js';
import { attachmentPairs, mountPairs } from '../operations/pair-machines.js';
import { flat } from '../desired/flat.js';
import { mayBeGone } from './gone.js';
import { setAttachment, setMounts } from './volumes.js';
import type { AttachmentRecord, MountRecord, World } from './types.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';

export { attachmentPairs, mountPairs } from '../operations/pair-machines.js';

export function attachmentName(volume: string, node: string): string {
  return `${volume}@${node}`;
}

export function mountName(volume: string, pod: string): string {
  return `${volume} × pod ${pod}`;
}

/** The attachment record of a volume, or a fresh `detached` one built from its spec. */
export function attachmentOrNew(
  world: World,
  volume: UniqueVolumeName,
  spec: ResolvedVolume | undefined,
): AttachmentRecord {
  const existing = world.volumes.get(volume)?.attachment;
  if (existing !== undefined) return existing;
  if (spec === undefined)
    fail(
      `attachment ${attachmentName(volume, world.config.node)}: no spec to create it (seq ${world.seq})`,
    );
  return {
    volume,
    node: world.config.node as NodeName,
    spec,
    value: attachmentPairs.initial.value,
    context: attachmentPairs.initial.context,
    seq: world.seq,
  };
}

/**
 * Applies a machine event to an attachment. An event the state does not accept means a
 * corrupt log or an engine bug: it fails an assertion naming the pair and the seq
 * (docs/style.md rule 3), unless `observation` says it may be ignored (a crash notice).
 */
export function stepAttachment(
  world: World,
  record: AttachmentRecord,
  event: AttachmentEvent,
  opts: { observation: boolean } = { observation: false },
): void {
  const next = attachmentPairs.transition(record, event);
  if (next === undefined) {
    if (!opts.observation)
      fail(
        `attachment ${attachmentName(record.volume, record.node)}: ${event.type} not accepted in ` +
          `state ${record.value} (seq ${world.seq})`,
      );
    return;
  }
  if (next.value === 'detached') {
    setAttachment(world, record.volume, undefined);
    mayBeGone(world, record.volume);
  } else {
    // The paths an event brought stay as long as the attachment: flat, not as the trees of
    // parts a template leaves (flat.ts).
    if (next.context !== record.context) flattenPaths(next.context);
    // A literal of the record's fields, not a spread: every record then shares one shape.
    setAttachment(world, record.volume, {
      volume: record.volume,
      node: record.node,
      spec: record.spec,
      value: next.value,
      context: next.context,
      seq: world.seq as Seq,
    });
  }
}

/** A fresh context of the transition (the fold's own until it is stored): its paths flat. */
function flattenPaths(context: AttachmentContext): void {
  const fresh = context as { devicePath: string; deviceMountPath: string };
  fresh.devicePath = flat(fresh.devicePath);
  fresh.deviceMountPath = flat(fresh.deviceMountPath);
}

export function mountOrNew(
  world: World,
  volume: UniqueVolumeName,
  pod: UniquePodName,
  spec: ResolvedVolume | undefined,
): MountRecord {
  const existing = podEntry(world.volumes.get(volume)?.mounts, pod);
  if (existing !== undefined) return existing;
  if (spec === undefined)
    fail(`mount ${mountName(volume, pod)}: no spec to create it (seq ${world.seq})`);
  return {
    volume,
    pod,
    spec,
    value: mountPairs.initial.value,
    context: mountPairs.initial.context,
    seq: world.seq,
  };
}

/** Applies a machine event to a mount record; the same contract as stepAttachment. */
export function stepMount(
  world: World,
  record: MountRecord,
  event: MountEvent,
  opts: { observation: boolean } = { observation: false },
): void {
  const next = mountPairs.transition(record, event);
  if (next === undefined) {
    if (!opts.observation)
      fail(
        `mount ${mountName(record.volume, record.pod)}: ${event.type} not accepted in state ` +
          `${record.value} (seq ${world.seq})`,
      );
    return;
  }
  const byPod = world.volumes.get(record.volume)?.mounts;
  if (next.value === 'unmounted') {
    const left = deletePodEntry(byPod, record.pod);
    if (left === byPod) return;
    setMounts(world, record.volume, left);
    if (left === undefined) mayBeGone(world, record.volume);
    return;
  }
  const kept = setPodEntry(byPod, {
    volume: record.volume,
    pod: record.pod,
    spec: record.spec,
    value: next.value,
    context: next.context === record.context ? next.context : settledContext(world, next.context),
    seq: world.seq,
  });
  if (kept !== byPod) setMounts(world, record.volume, kept);
}

/** Settled contexts are shared for this many outer volume names at most (world.mountContexts). */
const settledContextNamesMax = 256;

/**
 * A mount set up and settled (no remount required, no setUp under way) has the context
 * `{ outerVolumeSpecName, volumeGidValue, remountRequired: false, mountFrom: null }`: the
 * pods mounting a volume under the same name (and gid) share one, 56 bytes a mounted pair
 * less. Contexts are immutable, so sharing one changes nothing else.
 */
function settledContext(world: World, context: MountContext): MountContext {
  if (context.remountRequired || context.mountFrom !== null) return context;
  const shared = world.mountContexts.get(context.outerVolumeSpecName);
  if (shared !== undefined)
    return shared.volumeGidValue === context.volumeGidValue ? shared : context;
  if (world.mountContexts.size < settledContextNamesMax)
    world.mountContexts.set(context.outerVolumeSpecName, context);
  return context;
}
