/**
 * The resolved specs of a world read back from a snapshot, as the fold holds them: each
 * spec's traits the one shared object of its kind (src/operations/volume-traits.ts), and a
 * spec of the flat shape that snapshots held before the traits were shared made of this
 * shape, once for all its holders. Both cores' worlds, every place a spec is held.
 */
import type { AttachableVolumes, ControllerWorld } from '../controller/types.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';
import type { OperationBook } from '../operations/types.js';
import { SpecReviver } from '../operations/volume-traits.js';
import type { ByPod } from '../world/by-pod.js';
import type { UniquePodName } from '../ids.js';
import type { World } from '../world/types.js';

/** `record` with its spec as the fold holds it: the same record unless the spec changed. */
function withSpec<R extends { readonly spec: ResolvedVolume }>(record: R, r: SpecReviver): R {
  const spec = r.spec(record.spec);
  return spec === record.spec ? record : { ...record, spec };
}

/** `specs` as the fold holds them: the same list unless one changed. */
function specList(specs: readonly ResolvedVolume[], r: SpecReviver): readonly ResolvedVolume[] {
  const revived = specs.map((spec) => r.spec(spec));
  return revived.every((spec, i) => spec === specs[i]) ? specs : revived;
}

/** A volume's entries by pod, each revived by `one` (a Map read back is changed in place). */
function byPod<V extends { readonly pod: UniquePodName }>(
  held: ByPod<V> | undefined,
  one: (value: V) => V,
): ByPod<V> | undefined {
  if (held === undefined) return undefined;
  if (!(held instanceof Map)) return one(held);
  for (const [pod, value] of held) held.set(pod, one(value));
  return held;
}

function runningSpecs(book: Pick<OperationBook, 'running'>, r: SpecReviver): void {
  for (const [opId, op] of book.running) {
    const spec = r.maybe(op.spec);
    if (spec !== op.spec) book.running.set(opId, { ...op, spec });
  }
}

/** The kubelet world's specs: its pods', its desired pods', attachments', mounts', operations'. */
export function reviveKubeletSpecs(world: Pick<World, 'pods' | 'volumes' | 'running'>): void {
  const r = new SpecReviver();
  for (const [uid, record] of world.pods) {
    const volumes = specList(record.volumes, r);
    if (volumes !== record.volumes) world.pods.set(uid, { ...record, volumes });
  }
  for (const record of world.volumes.values()) {
    record.pods = byPod(record.pods, (pod) => {
      const resolved = r.spec(pod.resolved);
      return resolved === pod.resolved ? pod : { ...pod, resolved };
    });
    if (record.attachment !== undefined) record.attachment = withSpec(record.attachment, r);
    record.mounts = byPod(record.mounts, (mount) => withSpec(mount, r));
  }
  runningSpecs(world, r);
}

function isSpecList(held: AttachableVolumes): held is readonly ResolvedVolume[] {
  return Array.isArray(held);
}

/** The controller world's specs: its pods', pairs' (desired and attached), operations'. */
export function reviveControllerSpecs(
  world: Pick<ControllerWorld, 'pods' | 'pairs' | 'running'>,
): void {
  const r = new SpecReviver();
  for (const [uid, record] of world.pods) {
    const held = record.volumes;
    const volumes = isSpecList(held) ? specList(held, r) : r.spec(held);
    if (volumes !== held) world.pods.set(uid, { ...record, volumes });
  }
  for (const [key, pair] of world.pairs) {
    const desiredSpec = r.maybe(pair.desiredSpec);
    const attachedSpec = r.maybe(pair.attachedSpec);
    if (desiredSpec !== pair.desiredSpec || attachedSpec !== pair.attachedSpec)
      world.pairs.set(key, { ...pair, desiredSpec, attachedSpec });
  }
  runningSpecs(world, r);
}
