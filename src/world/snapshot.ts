/**
 * World snapshots: the world at a seq, encoded so it can be stored in the log and
 * decoded into an equal world. A snapshot is a cache: when its format is unknown or it
 * does not decode, the caller folds the whole log instead.
 */
import { assert } from '../assert.js';
import type { World } from './types.js';

/** Bump when World's shape changes; older snapshots are then ignored, never misread. */
export const snapshotFormat = 1;

function replacer(this: unknown, _key: string, value: unknown): unknown {
  if (value instanceof Map) return { $map: [...value] };
  if (value instanceof Set) return { $set: [...value] };
  return value;
}

function reviver(_key: string, value: unknown): unknown {
  if (value !== null && typeof value === 'object') {
    const v = value as { $map?: [unknown, unknown][]; $set?: unknown[] };
    if (Array.isArray(v.$map) && Object.keys(v).length === 1) return new Map(v.$map);
    if (Array.isArray(v.$set) && Object.keys(v).length === 1) return new Set(v.$set);
  }
  return value;
}

export function encodeWorld(world: World): string {
  const { dirty: _dirty, ...rest } = world;
  return JSON.stringify(rest, replacer);
}

/** Decodes a snapshot; undefined when it cannot be used (the caller replays instead). */
export function decodeWorld(data: string, format: number): World | undefined {
  if (format !== snapshotFormat) return undefined;
  try {
    const world = JSON.parse(data, reviver) as World;
    assert(world.pods instanceof Map && world.attachments instanceof Map, 'snapshot: not a world');
    world.dirty = new Set();
    return world;
  } catch {
    return undefined;
  }
}
