/**
 * What the kubelet's core tells the readers of its world (CoreReader, src/engine/core.ts):
 * an operation's spec, a PersistentVolume, the gauges read on scrape. Pure reads.
 */
import { bindingVolume } from '../binding/claims.js';
import type { Decision } from '../events/index.js';
import type { PersistentVolume } from '../events/k8s.js';
import { OpId, UniquePodName, UniqueVolumeName } from '../ids.js';
import { type CoreGauges, type OperationRef, uncertainAttachments } from '../operations/reader.js';
import { podEntries, podEntry } from './by-pod.js';
import type { World } from './types.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';

/** The spec of the volume an operation acts on, from the world after its OperationStarted. */
export function operationSpec(world: World, op: OperationRef): ResolvedVolume | undefined {
  const running = world.running.get(OpId(op.opId));
  if (running?.spec) return running.spec;
  const volume = UniqueVolumeName(op.volume);
  const attachment = world.attachments.get(volume);
  if (attachment !== undefined) return attachment.spec;
  const byPod = world.mounts.get(volume);
  const mount = op.pod === undefined ? undefined : podEntry(byPod, UniquePodName(op.pod));
  if (mount !== undefined) return mount.spec;
  for (const any of podEntries(byPod)) return any.spec;
  for (const entry of podEntries(world.dsw.get(volume)?.pods)) return entry.resolved;
  return undefined;
}

export function persistentVolume(world: World, name: string): PersistentVolume | undefined {
  const pv = world.objects.lookup('PersistentVolume', name);
  return pv?.kind === 'PersistentVolume' ? pv : undefined;
}

/** volume_manager_total_volumes: one per (volume, pod) to mount, and per mounted one. */
export function gauges(world: World): CoreGauges {
  const desired: ResolvedVolume[] = [];
  const actual: ResolvedVolume[] = [];
  let attachment = 0;
  let mount = 0;
  for (const volume of world.dsw.values())
    for (const entry of podEntries(volume.pods)) desired.push(entry.resolved);
  for (const byPod of world.mounts.values())
    for (const m of podEntries(byPod)) {
      if (m.value === 'mounted') actual.push(m.spec);
      if (m.value === 'mountUncertain') mount++;
    }
  for (const a of world.attachments.values()) if (uncertainAttachments.has(a.value)) attachment++;
  const uncertain = new Map([
    ['attachment', attachment],
    ['mount', mount],
  ] as const);
  return { desired, actual, uncertain, inUse: [] };
}

/** A node's decisions act on its volumes. */
export function decisionTarget(d: Decision): string {
  return d.volume;
}

/** The binder's pseudo-volume: planning it makes the claim decisions. */
export const claimDecisionVolumes: readonly UniqueVolumeName[] = [bindingVolume];
