/**
 * Safety invariants of the controller world (behaviour C7.1),
 * checked after every event in controller-mode simulations and `vole verify`, over the
 * touched volumes (the controller core's `invariants`).
 */
import { backoffMsMax } from '../constants.js';
import type { UniqueVolumeName } from '../ids.js';
import type { Violation } from '../operations/violation.js';
import { keysConflict } from '../operations/pending.js';
import { attachmentAt, type ControllerWorld, isAttached } from './types.js';

/**
 * Where a volume is confirmed attached or being attached. A detaching entry is not counted:
 * it may come from an uncertain one, beside which Kubernetes lets an attach elsewhere go ahead
 * (behaviour C3.4, S7), and an attach beside a confirmed entry is caught while that entry is attached.
 */
const onNode = /^(attached|attaching)/;

export function checkControllerVolume(
  world: ControllerWorld,
  volume: UniqueVolumeName,
): Violation[] {
  const out: Violation[] = [];
  const at = (invariant: string, message: string) =>
    out.push({ seq: world.seq, invariant, message: `${message} (seq ${world.seq})` });
  const pairs = [...world.pairs.values()].filter((p) => p.volume === volume);
  // The pair record: attached (a spec) exactly when its machine is not `detached`.
  for (const p of pairs)
    if (isAttached(p) !== (p.value !== 'detached'))
      at(
        'pair',
        `${volume}@${p.node}: ${p.value} with attached spec ${isAttached(p) ? 'set' : 'null'}`,
      );
  const attachments = pairs.filter(isAttached);
  // S7: a ReadWriteOnce volume is confirmed attached (or attaching) on one node at most.
  const nodes = attachments.filter((a) => onNode.test(a.value));
  if (nodes.length > 1 && nodes.some((a) => !a.attachedSpec.traits.multiAttachAllowed)) {
    at(
      'S7',
      `ReadWriteOnce volume ${volume} on ${nodes.length} nodes: ${nodes.map((a) => `${a.node} ${a.value}`).join(', ')}`,
    );
  }
  // S5: a volume is reported attached to a node only while confirmed there (node.status.
  // volumesAttached, which the node's agent waits on before it mounts).
  for (const [node, reported] of world.reported) {
    if (!reported.has(volume)) continue;
    const a = attachmentAt(world, `${volume}@${node}`);
    if (a === undefined || !a.value.startsWith('attached'))
      at('S5', `${volume} reported attached to ${node} while ${a?.value ?? 'detached'}`);
  }
  // S5's other half: confirmed attached, and no detach of it running there, it is reported;
  // the node's agent mounts only what volumesAttached lists.
  const running = [...world.running.values()].filter((op) => op.volume === volume);
  for (const a of attachments) {
    if (!a.value.startsWith('attached') || world.reported.get(a.node)?.has(volume) === true)
      continue;
    if (!running.some((op) => op.op === 'detach' && op.node === a.node))
      at('S5', `${volume} confirmed attached to ${a.node} but not reported, and no detach runs`);
  }
  // S1: one operation per conflicting key; backoff bounded.
  for (let i = 0; i < running.length; i++) {
    for (let j = i + 1; j < running.length; j++) {
      if (keysConflict(running[i]!.key, running[j]!.key))
        at(
          'S1',
          `operations ${running[i]!.opId} and ${running[j]!.opId} run on conflicting keys of ${volume}`,
        );
    }
  }
  for (const r of world.ops.get(volume) ?? []) {
    if (r.durationMsBeforeRetry > backoffMsMax)
      at('backoff', `${r.opName} of ${volume} backs off ${r.durationMsBeforeRetry} ms`);
  }
  return out;
}
