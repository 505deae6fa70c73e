/**
 * A revoked Secret never reaches a pod: no setUp of a configMap, secret or projected volume
 * succeeds while a ConfigMap or Secret it must read (not optional) is missing from the
 * world. The kubelet's managers fail such a setUp (`secret "s" not found`); a setUp that
 * succeeds anyway wrote data the cluster no longer has, or never had.
 *
 * It concerns the moment of one event, not a state (a mounted pod keeps its files when
 * its Secret is deleted later, as in Kubernetes), so it is checked on the event, where
 * the world is the truth of the objects: in `vole simulate` and `vole chaos`, whose
 * plugins read the objects as the scenario applied them.
 */
import type { VoleEvent } from '../events/index.js';
import { OpId } from '../ids.js';
import type { Violation } from '../operations/violation.js';
import type { World } from './types.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';

/** The ConfigMaps and Secrets (kind, namespace, name) a volume must read to be set up. */
export function requiredContents(
  spec: ResolvedVolume,
): { kind: 'ConfigMap' | 'Secret'; namespace: string; name: string }[] {
  const s = spec.source;
  const parts =
    s.kind === 'configMap' || s.kind === 'secret'
      ? [{ part: s, namespace: s.namespace }]
      : s.kind === 'projected'
        ? s.sources.map((part) => ({ part, namespace: s.namespace }))
        : [];
  const required: { kind: 'ConfigMap' | 'Secret'; namespace: string; name: string }[] = [];
  for (const { part, namespace } of parts) {
    if (part.kind !== 'configMap' && part.kind !== 'secret') continue;
    if (part.optional === true) continue;
    const kind = part.kind === 'configMap' ? 'ConfigMap' : 'Secret';
    required.push({ kind, namespace: namespace ?? 'default', name: part.name });
  }
  return required;
}

/** The violation of a setUp that succeeded (this event, folded) with an object missing. */
export function checkSetUpContents(world: World, event: VoleEvent): Violation[] {
  if (event.type !== 'CallSucceeded' || event.call !== 'setUp') return [];
  const op = world.running.get(OpId(event.opId));
  if (op?.spec === undefined || op.spec === null) return [];
  const missing = requiredContents(op.spec).filter(
    (o) => world.objects.lookup(o.kind, o.name, o.namespace) === undefined,
  );
  return missing.map((o) => ({
    seq: world.seq,
    invariant: 'content-exists',
    message:
      `setUp of ${op.volume} for pod ${op.pod ?? '?'} succeeded while ${o.kind} ` +
      `${o.namespace}/${o.name} does not exist (seq ${world.seq})`,
  }));
}
