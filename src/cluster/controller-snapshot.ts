/**
 * Snapshots of the controller's world for the etcd log, as the kubelet's are for SQLite
 * (src/log/world-snapshot.ts): V8 structured clone, a cache that is ignored (the log is
 * replayed instead) when another V8 wrote it or it does not decode.
 */
import { deserialize, serialize } from 'node:v8';
import type { ControllerWorld } from '../controller/types.js';
import type { UniqueVolumeName } from '../ids.js';

export const controllerSnapshotFormat = 1001;

interface Envelope {
  readonly v8: string;
  readonly world: Omit<ControllerWorld, 'dirty'>;
}

export function encodeControllerSnapshot(world: ControllerWorld): Buffer {
  const { dirty: _dirty, ...rest } = world;
  return serialize({ v8: process.versions.v8, world: rest } satisfies Envelope);
}

/** The world of a snapshot, every volume in it marked to be planned again; undefined when unusable. */
export function decodeControllerSnapshot(data: Buffer, format: number): ControllerWorld | undefined {
  if (format !== controllerSnapshotFormat) return undefined;
  try {
    const envelope = deserialize(data) as Envelope;
    if (envelope.v8 !== process.versions.v8 || !(envelope.world.attachments instanceof Map)) return undefined;
    const dirty = new Set<UniqueVolumeName>();
    for (const a of envelope.world.attachments.values()) dirty.add(a.volume);
    for (const d of envelope.world.dsw.values()) dirty.add(d.volume);
    return { ...envelope.world, dirty } as ControllerWorld;
  } catch {
    return undefined;
  }
}
