/**
 * What the controller's core tells the readers of its world (CoreReader,
 * src/operations/reader.ts): an operation's spec and the gauges read on scrape. It keeps
 * attachments only, and provisions nothing (no PersistentVolume to give).
 */
import type { Decision } from '../events/index.js';
import { OpId, type UniqueVolumeName } from '../ids.js';
import { bindingVolume } from '../binding/claims.js';
import type { CoreGauges, OperationRef } from '../operations/reader.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';
import { allAttachments, type ControllerWorld, allDesired } from './types.js';
import { uncertainAttachments } from '../operations/reader.js';

/** The spec of the volume an operation acts on, from the world after its OperationStarted. */
export function operationSpec(
  world: ControllerWorld,
  op: OperationRef,
): ResolvedVolume | undefined {
  const running = world.running.get(OpId(op.opId));
  if (running?.spec) return running.spec;
  const pair = world.pairs.get(`${op.volume}@${op.node ?? ''}`);
  return pair?.attachedSpec ?? pair?.desiredSpec ?? undefined;
}

/** attachdetach_controller_total_volumes: desired and attached (volume, node) pairs. */
export function gauges(world: ControllerWorld): CoreGauges {
  const desired: ResolvedVolume[] = [];
  const actual: ResolvedVolume[] = [];
  const inUse: { node: string; spec: ResolvedVolume }[] = [];
  let attachment = 0;
  for (const entry of allDesired(world)) {
    desired.push(entry.desiredSpec);
    inUse.push({ node: entry.node, spec: entry.desiredSpec });
  }
  for (const a of allAttachments(world)) {
    const value = a.value;
    if (value.startsWith('attached')) actual.push(a.attachedSpec);
    if (uncertainAttachments.has(value)) attachment++;
  }
  return { desired, actual, uncertain: new Map([['attachment', attachment]]), inUse };
}

/** The controller's decisions act on one attachment: volume@node. */
export function decisionTarget(d: Decision): string {
  return `${d.volume}@${d.node ?? ''}`;
}

/** The claim decisions (ClaimBound, ClaimFinalizerRemoved) come from a plan of claims. */
export const claimDecisionVolumes: readonly UniqueVolumeName[] = [bindingVolume];
