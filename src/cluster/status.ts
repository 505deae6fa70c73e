/**
 * Node status in etcd, split by writer: a node agent writes its volumesInUse and its CSI
 * drivers' node IDs, the leading controller its volumesAttached, each under status/<node>/
 * (one key, one writer).
 */
import { z } from 'zod';
import { listPrefix } from './informer.js';
import { ClusterKeys } from './keys.js';
import type { KeyValue, KvStore } from './store.js';

const volumesInUseValue = z.object({ volumesInUse: z.array(z.string()) });
const attachedVolume = z.object({ name: z.string(), devicePath: z.string().optional() });
export type AttachedVolume = z.infer<typeof attachedVolume>;
const volumesAttachedValue = z.object({ volumesAttached: z.array(attachedVolume) });
/** A node agent's CSI drivers and the node_id each answered NodeGetInfo with. */
const csiNodeIdsValue = z.object({
  csiNodeIds: z.record(z.string(), z.string()),
  /** Their NodeGetInfo accessible_topology segments, merged: the Node's topology labels. */
  topology: z.record(z.string(), z.string()).optional(),
});

/** The Node annotation the kubelet keeps its drivers' node IDs in (CSINode's predecessor). */
export const csiNodeIdAnnotation = 'csi.volume.kubernetes.io/nodeid';

/** The annotation's value: driver name → node_id (anything else: none). */
export function parseCsiNodeIds(text: string): Record<string, string> | undefined {
  try {
    const parsed = z.record(z.string(), z.string()).safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** The agent's CSI node status: its drivers' node IDs and their topology segments. */
export function decodeCsiNode(kv: KeyValue): z.infer<typeof csiNodeIdsValue> | undefined {
  try {
    const parsed = csiNodeIdsValue.safeParse(JSON.parse(kv.value.toString()));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

export type StatusField = 'volumesInUse' | 'volumesAttached' | 'csiNodeIds';

/** The node and field of a status key, or undefined for a key that is not one. */
export function parseStatusKey(
  keys: ClusterKeys,
  key: string,
): { node: string; field: StatusField } | undefined {
  const [node, field, ...more] = ClusterKeys.rest(key, keys.status).split('/');
  if (node === undefined || node === '' || more.length > 0) return undefined;
  if (field !== 'volumesInUse' && field !== 'volumesAttached' && field !== 'csiNodeIds')
    return undefined;
  return { node, field };
}

export function decodeVolumesInUse(kv: KeyValue): string[] | undefined {
  try {
    const parsed = volumesInUseValue.safeParse(JSON.parse(kv.value.toString()));
    return parsed.success ? parsed.data.volumesInUse : undefined;
  } catch {
    return undefined;
  }
}

export function decodeVolumesAttached(kv: KeyValue): AttachedVolume[] | undefined {
  try {
    const parsed = volumesAttachedValue.safeParse(JSON.parse(kv.value.toString()));
    return parsed.success ? parsed.data.volumesAttached : undefined;
  } catch {
    return undefined;
  }
}

/** Every node's published volumesAttached (what `vole get attachments` shows). */
export async function readVolumesAttached(
  client: KvStore,
  keys: ClusterKeys,
): Promise<{ node: string; volumes: AttachedVolume[]; revision: number }[]> {
  const response = await listPrefix(client, keys.status);
  const out: { node: string; volumes: AttachedVolume[]; revision: number }[] = [];
  for (const kv of response.kvs) {
    const parsed = parseStatusKey(keys, kv.key.toString());
    if (parsed?.field !== 'volumesAttached') continue;
    out.push({
      node: parsed.node,
      volumes: decodeVolumesAttached(kv) ?? [],
      revision: kv.modRevision,
    });
  }
  return out.sort((a, b) => a.node.localeCompare(b.node));
}
