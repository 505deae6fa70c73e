/**
 * The controller world's snapshot codec: format 6, written in slices (the serializer is the
 * engine's, given through the port: src/operations/snapshot-codec.ts), so a leader encoding
 * its world keeps its lease; a pair in one record, the traits of a spec one shared object
 * of its kind. A snapshot is a cache: one of another format or shape is ignored and the
 * log replayed. The fold's indexes are not written: they are built again. Pure.
 */
import type { ClusterObject } from '../events/k8s.js';
import { ClusterObjects } from '../desired/objects.js';
import type { SlicedCodec, SlicedFields, WorldSerializer } from '../operations/snapshot-codec.js';
import { shareRunningTraits, shareTraits } from '../operations/volume-traits.js';
import { deviceOf, startingDevice } from './attachment-record.js';
import { rebuildControllerIndexes } from './fold.js';
import {
  attachableOf,
  type ControllerPod,
  type ControllerWorld,
  pairKey,
  volumesOf,
} from './types.js';

/** The shape the controller's snapshots are written in; another one is not read. */
export const controllerSnapshotFormat = 6;

/** The pairs (desired and actual attachments) of a pod's volumes on its node. */
function* podPairs(
  name: keyof ControllerWorld,
  value: unknown,
): Generator<readonly [keyof ControllerWorld & string, string]> {
  if (name !== 'pods') return;
  const record = value as ControllerPod;
  if (record.node === null) return;
  for (const v of volumesOf(record.volumes)) yield ['pairs', pairKey(v.volume, record.node)];
}

/** The large maps of the controller's world, written in slices. */
const controllerFields: SlicedFields<ControllerWorld> = {
  maps: ['pods', 'objects', 'bindings', 'nodes', 'pairs', 'causes'],
  sets: ['reported'],
  derived: ['podsByObject', 'nodesByVolume', 'volumesByNode'],
  // A pod's specs are its pairs' desired and attached specs: one slice, one copy.
  shared: ['pairs'],
  companions: podPairs,
};

/**
 * The device fields every attachment starts with are one shared object (`startingDevice`),
 * which a snapshot reads back as a copy for each slice: the shared one again.
 */
function startingDevicesShared(pairs: ControllerWorld['pairs']): ControllerWorld['pairs'] {
  for (const [key, pair] of pairs)
    if (pair.device !== startingDevice && deviceOf(pair.device) === startingDevice)
      pairs.set(key, { ...pair, device: startingDevice });
  return pairs;
}

/**
 * Structured clone reads back a copy of the traits for each spec: the shared ones again
 * (src/operations/volume-traits.ts), wherever the world holds a spec: its pods', its pairs'
 * (desired and attached) and its operations'.
 */
function specsShared(world: Pick<ControllerWorld, 'pods' | 'pairs' | 'running'>): void {
  for (const record of world.pods.values())
    for (const spec of volumesOf(record.volumes)) shareTraits(spec);
  for (const pair of world.pairs.values()) {
    shareTraits(pair.desiredSpec);
    shareTraits(pair.attachedSpec);
  }
  shareRunningTraits(world);
}

/** A decoded controller world made whole, or undefined when it is not of this shape. */
export function reviveControllerWorld(
  world: Omit<ControllerWorld, 'dirty'>,
): ControllerWorld | undefined {
  if (
    !(world.reported instanceof Map && world.unboundClaims instanceof Set) ||
    !(world.pairs instanceof Map) ||
    world.operator === undefined ||
    world.provisioning === undefined
  )
    return undefined;
  // Written a slice of entries at a time, the objects are read back as a Map.
  const objects =
    world.objects instanceof Map
      ? ClusterObjects.of((world.objects as Map<string, ClusterObject>).values())
      : undefined;
  if (objects === undefined) return undefined;
  const revived: ControllerWorld = {
    ...world,
    pairs: startingDevicesShared(world.pairs),
    objects,
    dirty: new Set(),
  };
  for (const [uid, record] of revived.pods) {
    // A list of one volume is held bare, none as the shared empty list (structured clone
    // reads the empty one back as a list of its own).
    const volumes = Array.isArray(record.volumes) ? attachableOf(record.volumes) : record.volumes;
    if (volumes !== record.volumes) revived.pods.set(uid, { ...record, volumes });
  }
  specsShared(revived);
  // The fold's indexes are not written (derived): built again from the records.
  rebuildControllerIndexes(revived);
  return revived;
}

/** The controller's snapshot codec, on the engine's serializer. */
export function controllerSnapshotCodec(serializer: WorldSerializer): SlicedCodec<ControllerWorld> {
  return serializer.sliced<ControllerWorld>(
    controllerSnapshotFormat,
    controllerFields,
    reviveControllerWorld,
  );
}
