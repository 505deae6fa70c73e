/**
 * Where a disk driver volume lives: the node holding its image. The node's topology is one
 * segment, `{topology.disk.csi.vole.dev/node: <node id>}`; a volume is placed there when the
 * request's requisite topologies include that node (or name none), and its accessible
 * topology is that segment.
 */
import type { Topology } from './common.js';
import { DriverError } from './errors.js';

/** Whether topology `wanted` includes the node with `segments`: every key of it agrees. */
export function segmentsMatch(
  wanted: Readonly<Record<string, string>>,
  segments: Readonly<Record<string, string>>,
): boolean {
  const keys = Object.keys(wanted);
  return keys.length > 0 && keys.every((key) => segments[key] === wanted[key]);
}

/**
 * The segments of a volume created here. With requisite topologies, this node must be one of
 * them (RESOURCE_EXHAUSTED otherwise, as the spec answers a requisite it cannot meet);
 * preferred topologies only order a choice, and this driver has one place to offer.
 */
export function placeVolume(
  segments: Readonly<Record<string, string>>,
  requirements: { requisite: Topology[]; preferred: Topology[] } | null | undefined,
  rpc: string,
): Readonly<Record<string, string>> {
  const requisite = requirements?.requisite ?? [];
  if (requisite.length > 0 && !requisite.some((t) => segmentsMatch(t.segments ?? {}, segments)))
    throw new DriverError(
      'RESOURCE_EXHAUSTED',
      `${rpc}: this driver serves ${JSON.stringify(segments)}, which is none of the requisite ` +
        `topologies ${JSON.stringify(requisite.map((t) => t.segments))}; ` +
        'call the driver on one of those nodes',
    );
  return segments;
}
