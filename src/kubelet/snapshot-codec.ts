/**
 * The kubelet world's snapshot codec: format 8, the whole world in one structured clone
 * (the serializer is the engine's, given through the port: src/operations/snapshot-codec.ts).
 * One record per volume, the traits of a spec one shared object of its kind. A snapshot is
 * a cache: one of another format or shape is ignored and the log replayed. The views over
 * the volume records are made again, not read back. Pure.
 */
import { ClusterObjects } from '../desired/objects.js';
import { isReferenceIndex } from '../desired/references.js';
import type { SnapshotCodec, WorldSerializer } from '../operations/snapshot-codec.js';
import { shareRunningTraits, shareTraits } from '../operations/volume-traits.js';
import { podEntries } from './by-pod.js';
import type { World } from './types.js';
import { volumeTable } from './volumes.js';

/** The shape the kubelet's snapshots are written in; another one is not read. */
export const kubeletSnapshotFormat = 8;

/**
 * Structured clone reads back a copy of the traits for each spec: the shared ones again
 * (src/operations/volume-traits.ts), wherever the world holds a spec: its pods', its desired
 * pods', attachments', mounts' and operations'.
 */
function specsShared(world: Pick<World, 'pods' | 'volumes' | 'running'>): void {
  for (const record of world.pods.values()) for (const spec of record.volumes) shareTraits(spec);
  for (const record of world.volumes.values()) {
    for (const pod of podEntries(record.pods)) shareTraits(pod.resolved);
    if (record.attachment !== undefined) shareTraits(record.attachment.spec);
    for (const mount of podEntries(record.mounts)) shareTraits(mount.spec);
  }
  shareRunningTraits(world);
}

/** A decoded kubelet world made whole, or undefined when it is not of this shape. */
export function reviveKubeletWorld(world: Omit<World, 'dirty'>): World | undefined {
  const objects = ClusterObjects.revive(world.objects);
  const read =
    world.volumes instanceof Map &&
    isReferenceIndex(world.podsByObject) &&
    world.unboundClaims instanceof Set &&
    world.oneNameLists instanceof Map &&
    world.mountContexts instanceof Map &&
    world.mountIntents instanceof Map &&
    world.operator !== undefined &&
    world.provisioning !== undefined;
  if (read) specsShared(world);
  return read && objects
    ? {
        ...world,
        objects,
        ...volumeTable(world.volumes),
        maybeGone: [],
        takenVolumes: undefined,
        dirty: new Set(),
      }
    : undefined;
}

/** The kubelet's snapshot codec, on the engine's serializer. */
export function kubeletSnapshotCodec(serializer: WorldSerializer): SnapshotCodec<World> {
  return serializer.whole<World>(kubeletSnapshotFormat, reviveKubeletWorld);
}
