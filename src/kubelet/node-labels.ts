/**
 * This node's labels as a PV's node affinity is checked against them: the Node object's
 * labels (when a source gave one), `kubernetes.io/hostname`, and the topology segments
 * its CSI drivers answered NodeGetInfo with (the kubelet's CSI plugin labels the Node
 * with them).
 */
import type { PluginCaps } from '../events/index.js';
import type { ClusterObjects } from '../desired/objects.js';

export function nodeLabels(
  node: string,
  objects: ClusterObjects,
  plugins: ReadonlyMap<string, PluginCaps>,
): Record<string, string> {
  const object = objects.lookup('Node', node);
  const labels: Record<string, string> = { 'kubernetes.io/hostname': node };
  if (object?.kind === 'Node') Object.assign(labels, object.metadata.labels ?? {});
  for (const caps of plugins.values()) Object.assign(labels, caps.csi?.accessibleTopology ?? {});
  return labels;
}
