/**
 * The kubelet world's snapshots (the codec is src/engine/snapshot.ts; each core names
 * its own format). Kept for the readers that load a kubelet world directly.
 */
import { kubeletCore } from '../engine/cores.js';
import type { World } from '../world/types.js';

/** Format 2: V8 structured clone (format 1 was JSON with tagged Maps and Sets). */
export const worldSnapshotFormat = kubeletCore.snapshot.format;

export function encodeWorldSnapshot(world: World): Buffer {
  return kubeletCore.snapshot.encode(world);
}

/** The world in a snapshot, or undefined when it cannot be used (replay instead). */
export function decodeWorldSnapshot(data: Buffer, format: number): World | undefined {
  return kubeletCore.snapshot.decode(data, format);
}
