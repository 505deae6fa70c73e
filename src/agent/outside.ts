/**
 * Which pods can only wait for a change outside vole (`vole run --once` stops early for
 * them): every volume a pod still waits on cannot be processed (a claim without a PV, a
 * plugin or object missing), reads a ConfigMap or Secret that does not exist, or its last
 * operation failed with a final error (a retry of the same input fails the same way).
 * A transient failure (a busy device, a slow driver) is not outside: retries may cure it.
 */
import type { UniquePodName } from '../ids.js';
import { podWaitStatus } from '../kubelet/queries.js';
import type { World } from '../kubelet/types.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';
import { requiredContents } from '../kubelet/content-invariant.js';

/** A ConfigMap or Secret the volume must read that the world does not have. */
function missingContent(world: World, spec: ResolvedVolume): boolean {
  return requiredContents(spec).some(
    (o) => world.objects.lookup(o.kind, o.name, o.namespace) === undefined,
  );
}

/** The volume's operations for this pod last failed with a final error. */
function failedFinally(world: World, spec: ResolvedVolume, pod: UniquePodName): boolean {
  const records = (world.ops.get(spec.volume) ?? []).filter(
    (r) => r.key.pod === '' || r.key.pod === pod,
  );
  return records.length > 0 && records.every((r) => r.lastError?.kind === 'final');
}

/** Does this pod wait only on what a change outside vole can give it? */
function waitsOnOutside(world: World, pod: UniquePodName): boolean {
  const record = world.pods.get(pod);
  if (record === undefined) return false;
  const status = podWaitStatus(world, pod);
  if (status.ready) return false;
  const byOuter = new Map(record.volumes.map((v) => [v.outerVolumeSpecName, v]));
  return status.unmounted.every((name) => {
    const spec = byOuter.get(name);
    if (spec === undefined) return true; // cannot be processed: waits on objects or plugins
    return missingContent(world, spec) || failedFinally(world, spec, pod);
  });
}

/**
 * Does this one pod wait only on outside change, with nothing in flight that may still
 * change it (`vole wait`)? False while the sources have not all reported or any operation
 * runs: a retry in flight may still mount it.
 */
export function podWaitsOnOutside(world: World, pod: UniquePodName): boolean {
  return world.sourcesReady && world.running.size === 0 && waitsOnOutside(world, pod);
}

/**
 * The pods not mounted, when every one of them can only wait for outside change;
 * undefined while any may still make progress, an operation runs, or the sources have not
 * all reported.
 */
export function podsWaitingOnOutside(world: World): UniquePodName[] | undefined {
  // An operation in flight (a retry, a provisioning call) may still change things.
  if (!world.sourcesReady || world.running.size > 0) return undefined;
  const waiting = [...world.pods.keys()].filter((uid) => !podWaitStatus(world, uid).ready);
  if (waiting.length === 0) return undefined;
  return waiting.every((uid) => waitsOnOutside(world, uid)) ? waiting.sort() : undefined;
}
