/**
 * Mount intents (docs/reliability.md, "Durable points"). A kubelet's attach names, in its
 * OperationStarted, the pods waiting to mount its volume (`mountsIntended`); that event is
 * durable before the attach call. From then on, while the pod is in the world, the first
 * mount of each of the pod's volumes runs without a commit of its own: its first call waits
 * only for the attach's OperationStarted (RunningOp.coveredBy), which it finds durable.
 *
 * So a crash may lose any of such a mount's events, and even the attach's answer before
 * it. The next EngineStarted takes every volume of an intended pod that the log does not
 * hold mounted as maybe mounted (its device maybe mounted too), as it takes an operation
 * the log holds started: uncertain, set up again while desired, torn down when not, never
 * detached under it.
 */
import type { EventOf } from '../events/index.js';
import { type Seq, UniquePodName, type UniqueVolumeName } from '../ids.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';
import { podEntry } from './by-pod.js';
import { touch } from './fold-desired.js';
import { attachmentOrNew, mountOrNew, stepAttachment, stepMount } from './pairs.js';
import type { World } from './types.js';

/** An attach's OperationStarted: its pods' mounts are intended from this seq on. */
export function recordMountIntents(world: World, event: EventOf<'OperationStarted'>): void {
  if (event.mountsIntended === undefined) return;
  for (const uid of event.mountsIntended) {
    const record = world.pods.get(UniquePodName(uid));
    if (record !== undefined) world.mountIntents.set(record.uid, event.seq as Seq);
  }
}

/**
 * The seq a mount of `volume` for `pod` waits for instead of its own OperationStarted: its
 * pod's intent, for a first mount (no mount record yet). A remount, or a retry after an
 * uncertain outcome, waits for its own.
 */
export function mountCoveredBy(
  world: World,
  volume: UniqueVolumeName,
  pod: UniquePodName | null,
): Seq | undefined {
  if (pod === null || podEntry(world.mounts.get(volume), pod) !== undefined) return undefined;
  return world.mountIntents.get(pod);
}

/**
 * EngineStarted, after the running operations are cut off: each volume of an intended
 * pod that is not known mounted may have been mounted by a mount the crash lost. Then the
 * intents end (the restarted engine's attaches make new ones).
 */
export function cutOffMountIntents(world: World): void {
  for (const pod of world.mountIntents.keys()) {
    const record = world.pods.get(pod);
    for (const volume of record?.volumes ?? []) {
      const entry = podEntry(world.dsw.get(volume.volume)?.pods, pod);
      if (entry !== undefined) mayHaveMounted(world, entry.resolved, pod);
    }
  }
  world.mountIntents.clear();
}

/** The device (if it has one) and the pod's mount of `spec` may exist: uncertain. */
function mayHaveMounted(world: World, spec: ResolvedVolume, pod: UniquePodName): void {
  // Mounted, or uncertain already: the log knows (a mount record in flight was cut off).
  if (podEntry(world.mounts.get(spec.volume), pod) !== undefined) return;
  const hasDevice = spec.traits.deviceMountable || spec.traits.volumeMode === 'Block';
  const attachment = world.attachments.get(spec.volume);
  if (spec.traits.attachable) {
    // Not attached: its attach is durable before it runs, so no mount ran since.
    if (attachment === undefined) return;
    // The attach's answer was lost with the mount's events: the device may be mounted.
    if (attachment.value === 'attachUncertain' && hasDevice)
      stepAttachment(world, attachment, { type: 'DEVICE_MAY_EXIST' });
  } else if (attachment === undefined && hasDevice) {
    // A volume that needs no attach is verified at once, and the verify waits for no commit.
    const created = attachmentOrNew(world, spec.volume, spec);
    stepAttachment(world, created, { type: 'VERIFY_OK', devicePath: '' });
  }
  const device = world.attachments.get(spec.volume);
  if (hasDevice && device?.value === 'attached.deviceUnmounted') {
    stepAttachment(world, device, { type: 'MOUNT_DEVICE_START', deviceMountPath: '' });
    stepAttachment(world, world.attachments.get(spec.volume)!, { type: 'CRASH' });
  }
  stepMount(world, mountOrNew(world, spec.volume, pod, spec), {
    type: 'SETUP_START',
    outerVolumeSpecName: spec.outerVolumeSpecName,
    volumeGidValue: spec.traits.volumeGidValue,
  });
  stepMount(world, podEntry(world.mounts.get(spec.volume), pod)!, { type: 'CRASH' });
  touch(world, spec.volume);
}
