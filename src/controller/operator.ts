/**
 * Operator requests sent to the attach/detach controller (`vole detach --controller`):
 * decided by its planner like its other decisions, and recorded as OperatorRequestDecided.
 * An accepted detach holds the (volume, node) pair: the attach pass leaves it alone and
 * the detach pass detaches it even while a pod scheduled there wants it, until it is done.
 */
import type { NewEvent } from '../events/index.js';
import { NodeName, type UniqueVolumeName } from '../ids.js';
import { accepted, decideRetry, refused, type Verdict } from '../operations/operator-verdict.js';
import type { OperatorRequestRecord } from '../operations/types.js';
import { attachmentAt, type ControllerWorld, desiredAt, desiredPods, pairKey } from './types.js';

function decideDetach(world: ControllerWorld, r: OperatorRequestRecord): Verdict {
  if (r.node === null) return refused('name the node to detach the volume from (--node)');
  const a = attachmentAt(world, pairKey(r.volume, r.node));
  if (a === undefined) return refused(`${r.volume} is not attached to node ${r.node}`);
  const inUse = world.nodes.get(NodeName(r.node))?.volumesInUse.has(r.volume) === true;
  const desired = desiredAt(world, pairKey(r.volume, r.node));
  const wanted = (desired === undefined ? [] : desiredPods(world, desired)).map(
    (p) => `${p.namespace}/${p.name}`,
  );
  if ((inUse || wanted.length > 0) && !r.force) {
    const why = [
      ...(inUse ? [`node ${r.node} reports it in use (volumesInUse): a pod mount may exist`] : []),
      ...(wanted.length > 0 ? [`pods scheduled there want it: ${wanted.join(', ')}`] : []),
    ].join('; ');
    return refused(`${r.volume} on ${r.node}: ${why}; use --force to detach anyway (recorded)`);
  }
  const forced = inUse || wanted.length > 0 ? 'forced, without the in-use check: ' : '';
  return accepted(`${forced}detaching ${r.volume} from ${r.node} (${a.value})`);
}

function decide(world: ControllerWorld, r: OperatorRequestRecord): Verdict {
  switch (r.action) {
    case 'retry':
      return decideRetry(world, r);
    case 'release':
      return refused(
        'the attach/detach controller mounts nothing: send release to the node agent (vole release)',
      );
    case 'detach':
      return decideDetach(world, r);
  }
}

/** The accepted detach holding (volume, node), if any. */
export function heldDetach(
  world: ControllerWorld,
  volume: UniqueVolumeName,
  node: string,
): OperatorRequestRecord | undefined {
  return world.operator.holds.get(volume)?.find((r) => r.action === 'detach' && r.node === node);
}

/** Verdicts on undecided requests, and "done" for holds whose pair is detached. */
export function planControllerOperatorRequests(
  world: ControllerWorld,
  volumes: Iterable<UniqueVolumeName>,
  nowMs: number,
): { events: NewEvent[]; decided: Set<UniqueVolumeName> } {
  const events: NewEvent[] = [];
  const decided = new Set<UniqueVolumeName>();
  if (world.operator.pending.size === 0 && world.operator.holds.size === 0)
    return { events, decided };
  const base = { type: 'OperatorRequestDecided' as const, tsMs: nowMs };
  for (const volume of volumes) {
    for (const r of world.operator.pending.get(volume) ?? []) {
      events.push({ ...base, requestSeq: r.seq, volume, ...decide(world, r) });
      decided.add(volume);
    }
    for (const hold of world.operator.holds.get(volume) ?? []) {
      if (attachmentAt(world, pairKey(volume, hold.node ?? '')) !== undefined) continue;
      const message = `${volume} detached from ${hold.node}`;
      events.push({ ...base, requestSeq: hold.seq, volume, verdict: 'done', message });
      decided.add(volume);
    }
  }
  return { events, decided };
}
