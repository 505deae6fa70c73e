/**
 * World snapshots in the log: the world at a seq, serialized with V8's structured clone
 * (Maps and Sets natively, far faster to read back than JSON with a reviver: restart
 * targets 200 ms on a 1,000,000-event log). A snapshot is a cache: one written by another
 * V8 version, or of an unknown format, or that does not decode, is ignored and the log
 * replayed instead.
 */
import { deserialize, serialize } from 'node:v8';
import type { World } from '../world/types.js';

/** Format 2: V8 structured clone (format 1 was JSON with tagged Maps and Sets). */
export const worldSnapshotFormat = 2;

interface Envelope {
  readonly v8: string;
  readonly world: Omit<World, 'dirty'>;
}

export function encodeWorldSnapshot(world: World): Buffer {
  const { dirty: _dirty, ...rest } = world;
  const envelope: Envelope = { v8: process.versions.v8, world: rest };
  return serialize(envelope);
}

/** The world in a snapshot, or undefined when it cannot be used (replay instead). */
export function decodeWorldSnapshot(data: Buffer, format: number): World | undefined {
  if (format !== worldSnapshotFormat) return undefined;
  try {
    const envelope = deserialize(data) as Envelope;
    if (envelope.v8 !== process.versions.v8 || !(envelope.world.pods instanceof Map)) return undefined;
    // Snapshots from before operator requests existed hold none.
    const operator = envelope.world.operator ?? { pending: new Map(), holds: new Map() };
    return { ...envelope.world, operator, dirty: new Set() } as World;
  } catch {
    return undefined;
  }
}
