/**
 * The resolved specs of a world read back from a snapshot, as the fold holds them: each
 * spec's traits the one shared object of its kind (src/operations/volume-traits.ts), every
 * place either core's world holds a spec.
 */
import { type ControllerWorld, volumesOf } from '../controller/types.js';
import type { OperationBook } from '../operations/types.js';
import { shareTraits } from '../operations/volume-traits.js';
import { podEntries } from '../kubelet/by-pod.js';
import type { World } from '../kubelet/types.js';

function runningSpecs(book: Pick<OperationBook, 'running'>): void {
  for (const op of book.running.values()) shareTraits(op.spec);
}

/** The kubelet world's specs: its pods', its desired pods', attachments', mounts', operations'. */
export function reviveKubeletSpecs(world: Pick<World, 'pods' | 'volumes' | 'running'>): void {
  for (const record of world.pods.values()) for (const spec of record.volumes) shareTraits(spec);
  for (const record of world.volumes.values()) {
    for (const pod of podEntries(record.pods)) shareTraits(pod.resolved);
    if (record.attachment !== undefined) shareTraits(record.attachment.spec);
    for (const mount of podEntries(record.mounts)) shareTraits(mount.spec);
  }
  runningSpecs(world);
}

/** The controller world's specs: its pods', pairs' (desired and attached), operations'. */
export function reviveControllerSpecs(
  world: Pick<ControllerWorld, 'pods' | 'pairs' | 'running'>,
): void {
  for (const record of world.pods.values())
    for (const spec of volumesOf(record.volumes)) shareTraits(spec);
  for (const pair of world.pairs.values()) {
    shareTraits(pair.desiredSpec);
    shareTraits(pair.attachedSpec);
  }
  runningSpecs(world);
}
