/**
 * Operator requests (vole detach / release / retry), decided by the planner like any
 * other decision: pure, from the world, recorded as OperatorRequestDecided. An accepted
 * detach or release holds its volume (plan.ts then unmounts and detaches it through the
 * machines, never around them) until the planner sees it done.
 */
import type { NewEvent } from '../events/index.js';
import type { UniqueVolumeName } from '../ids.js';
import { podEntries, podEntry, type OperatorRequestRecord, type World } from './index.js';
import { accepted, decideRetry, refused, type Verdict } from '../operations/operator-verdict.js';

function decideRelease(world: World, r: OperatorRequestRecord): Verdict {
  if (r.pod === null) return refused('a release names the pod whose volume it unmounts');
  const mount = podEntry(world.mounts.get(r.volume), r.pod);
  if (mount === undefined)
    return refused(`pod ${r.pod} has nothing of ${r.volume} mounted on ${world.config.node}`);
  const state = mount.value;
  if (podEntry(world.dsw.get(r.volume)?.pods, r.pod) !== undefined) {
    if (!r.force)
      return refused(
        `pod ${r.pod} still uses ${r.volume} (mount ${state}): remove the pod first, or use --force ` +
          'to unmount it under the pod (recorded; it is mounted again afterwards)',
      );
    return accepted(
      `forced: unmounting ${r.volume} under pod ${r.pod}, which still uses it (mount ${state})`,
    );
  }
  return accepted(`unmounting ${r.volume} from pod ${r.pod} (mount ${state})`);
}

function decideDetach(world: World, r: OperatorRequestRecord): Verdict {
  const node = world.config.node;
  if (r.node !== null && r.node !== node)
    return refused(
      `this agent runs node ${node}, not ${r.node}: send the request to that node's agent`,
    );
  if (world.config.controllerAttachDetach)
    return refused(
      `node ${node} leaves attach and detach to the attach/detach controller: ask the controller`,
    );
  const attachment = world.attachments.get(r.volume);
  if (attachment === undefined || !attachment.spec.traits.attachable)
    return refused(`${r.volume} is not an attached volume of node ${node}`);
  const mounted = [...podEntries(world.mounts.get(r.volume))].map(
    (m) => `pod ${m.pod} (${m.value})`,
  );
  const wanted = [...podEntries(world.dsw.get(r.volume)?.pods)].map((p) => `pod ${p.pod}`);
  if (mounted.length + wanted.length > 0 && !r.force) {
    const why = [
      ...(mounted.length > 0 ? [`a pod mount may exist: ${mounted.join(', ')}`] : []),
      ...(wanted.length > 0 ? [`wanted by ${wanted.join(', ')}`] : []),
    ].join('; ');
    return refused(
      `${r.volume} is in use on ${node} (${why}): release the pods first, or use --force to ` +
        'unmount them and detach (recorded)',
    );
  }
  const forced = mounted.length + wanted.length > 0 ? 'forced: unmounting every pod, then ' : '';
  return accepted(`${forced}detaching ${r.volume} from ${node} (${attachment.value})`);
}

function decide(world: World, request: OperatorRequestRecord): Verdict {
  switch (request.action) {
    case 'retry':
      return decideRetry(world, request);
    case 'release':
      return decideRelease(world, request);
    case 'detach':
      return decideDetach(world, request);
  }
}

/** An accepted request whose action has completed: the pair it took down is gone. */
function holdDone(world: World, hold: OperatorRequestRecord): string | undefined {
  if (hold.action === 'detach')
    return world.attachments.has(hold.volume) ? undefined : `${hold.volume} detached`;
  if (hold.pod !== null && podEntry(world.mounts.get(hold.volume), hold.pod) === undefined)
    return `${hold.volume} unmounted from pod ${hold.pod}`;
  return undefined;
}

/**
 * The operator decisions for the given volumes: a verdict on each undecided request and
 * a "done" for each hold whose action completed. `decided` lists the volumes the events
 * change: the caller plans them again after the events are folded.
 */
export function planOperatorRequests(
  world: World,
  volumes: readonly UniqueVolumeName[],
  nowMs: number,
): { events: NewEvent[]; decided: UniqueVolumeName[] } {
  const events: NewEvent[] = [];
  const decided: UniqueVolumeName[] = [];
  if (world.operator.pending.size === 0 && world.operator.holds.size === 0)
    return { events, decided };
  for (const volume of volumes) {
    const before = events.length;
    for (const request of world.operator.pending.get(volume) ?? []) {
      const { verdict, message } = decide(world, request);
      events.push({
        type: 'OperatorRequestDecided',
        tsMs: nowMs,
        requestSeq: request.seq,
        volume,
        verdict,
        message,
      });
    }
    for (const hold of world.operator.holds.get(volume) ?? []) {
      const done = holdDone(world, hold);
      if (done !== undefined)
        events.push({
          type: 'OperatorRequestDecided',
          tsMs: nowMs,
          requestSeq: hold.seq,
          volume,
          verdict: 'done',
          message: done,
        });
    }
    if (events.length > before) decided.push(volume);
  }
  return { events, decided };
}
