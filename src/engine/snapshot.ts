/**
 * World snapshots: a core's world at a seq, serialized with V8's structured clone (Maps
 * and Sets natively, far faster to read back than JSON: restart targets 200 ms on a
 * 1,000,000-event log). A snapshot is a cache: one written by another V8 version, of
 * another format (another core's), or that does not decode, is ignored and the log
 * replayed instead. The dirty set is not kept: a loaded world has nothing to plan yet.
 */
import { deserialize, serialize } from 'node:v8';
import type { CoreWorld, SnapshotCodec } from './core.js';

interface Envelope<W> {
  readonly v8: string;
  readonly world: Omit<W, 'dirty'>;
}

/**
 * A structured-clone codec for one core's world. `format` tells cores apart (the kubelet
 * world is format 5, the controller's 3); `revive` checks the decoded value's shape and
 * gives it an empty dirty set (undefined: not this core's world).
 */
export function structuredCloneCodec<W extends CoreWorld>(
  format: number,
  revive: (world: Omit<W, 'dirty'>) => W | undefined,
): SnapshotCodec<W> {
  return {
    format,
    encode(world: W): Buffer {
      const { dirty: _dirty, ...rest } = world;
      const envelope: Envelope<W> = { v8: process.versions.v8, world: rest };
      return serialize(envelope);
    },
    decode(data: Buffer, given: number): W | undefined {
      if (given !== format) return undefined;
      try {
        const envelope: Envelope<W> = deserialize(data);
        if (envelope.v8 !== process.versions.v8) return undefined;
        return revive(envelope.world);
      } catch {
        return undefined;
      }
    },
  };
}
