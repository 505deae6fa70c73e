/**
 * The kubelet world's snapshots (the codec is the kubelet's own: src/kubelet/snapshot-codec.ts,
 * on the engine's serializer). Kept for the readers that load a kubelet world directly.
 */
import { kubeletCore } from '../engine/cores.js';
import type { World } from '../kubelet/types.js';

/** The kubelet core's format (a V8 structured clone of the world: src/kubelet/snapshot-codec.ts). */
export const worldSnapshotFormat = kubeletCore.snapshot.format;

export function encodeWorldSnapshot(world: World): Buffer {
  return kubeletCore.snapshot.encode(world);
}

/** The world in a snapshot, or undefined when it cannot be used (replay instead). */
export function decodeWorldSnapshot(data: Buffer, format: number): World | undefined {
  return kubeletCore.snapshot.decode(data, format);
}
