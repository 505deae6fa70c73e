/**
 * A small cluster in a store for the tests of a new leader's inputs: nodes with heartbeats
 * and status, disks, pods using them, and rounds of changes to it.
 */
import type { ControllerManager } from '../../src/agent/controller-manager.js';
import type { ClusterKeys } from '../../src/cluster/keys.js';
import { storedForm } from '../../src/cluster/objects.js';
import { type KvStore, put, remove } from '../../src/cluster/store.js';
import type { VoleEvent } from '../../src/events/index.js';
import type { ClusterObject, Pod } from '../../src/events/k8s.js';
import { claim, diskObjects, pod } from './builders.js';

/** A small cluster in the store: nodes with heartbeats and status, disks, pods using them. */
export async function writeCluster(client: KvStore, keys: ClusterKeys): Promise<void> {
  for (let n = 0; n < 4; n++) {
    const node = `node-${n}`;
    const object = { apiVersion: 'v1', kind: 'Node', metadata: { name: node } };
    await put(client, keys.object('Node', node), JSON.stringify(object));
    await put(client, keys.heartbeat(node), '{}');
    await put(client, keys.volumesInUse(node), JSON.stringify({ volumesInUse: [] }));
  }
  for (let i = 0; i < 12; i++) await writeDisk(client, keys, `d${i}`);
  for (let i = 0; i < 12; i++) await writePod(client, keys, `p${i}`, `node-${i % 4}`, `d${i}`);
}

/**
 * A disk's PV and claim; the claim without a UID unless `uid` (a log gives such a claim a
 * random one: two leaders would log different ones for a claim new to both).
 */
async function writeDisk(
  client: KvStore,
  keys: ClusterKeys,
  handle: string,
  uid?: string,
): Promise<void> {
  for (const event of diskObjects(handle)) {
    const object = (event as { object: ClusterObject }).object;
    if (uid !== undefined && object.kind === 'PersistentVolumeClaim') object.metadata.uid = uid;
    await put(client, keys.objectOf(object), JSON.stringify(storedForm(object)));
  }
}

async function writePod(
  client: KvStore,
  keys: ClusterKeys,
  uid: string,
  node: string,
  handle: string,
): Promise<Pod> {
  const p = pod(uid, [claim(handle)]);
  p.spec.nodeName = node;
  await put(client, keys.podOf(p), JSON.stringify(p));
  return p;
}

/** What changes in the store while nobody leads (after the first leader's list). */
export async function changeCluster(
  client: KvStore,
  keys: ClusterKeys,
  round: number,
): Promise<void> {
  await remove(
    client,
    keys.podOf({ ...pod(`p${round}`, []), spec: { nodeName: `node-${round % 4}` } }),
  );
  await writeDisk(client, keys, `e${round}`, `uid-e${round}`);
  await writePod(client, keys, `q${round}`, `node-${(round + 1) % 4}`, `e${round}`);
  await remove(client, keys.heartbeat(`node-${round % 4}`));
  const inUse = { volumesInUse: [`fake.disk/d${(round + 1) % 12}`] };
  await put(client, keys.volumesInUse(`node-${(round + 1) % 4}`), JSON.stringify(inUse));
  const labelled = {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'node-0', labels: { round: String(round) } },
  };
  await put(client, keys.object('Node', 'node-0'), JSON.stringify(labelled));
  await remove(client, keys.object('PersistentVolume', `pv-d${11 - round}`));
}

/** Events without their timestamps (the two leaders start at different times). */
export const untimed = (events: readonly VoleEvent[]) =>
  events.map(({ tsMs: _ts, ...rest }) => rest);

export function worldOf(cm: Pick<ControllerManager, 'world'>) {
  const { objects, pods, nodes } = cm.world;
  return {
    objects: [...objects.entries()],
    pods: [...pods.entries()].map(([uid, r]) => [uid, r.pod, r.node, r.volumes]),
    nodes: [...nodes.entries()],
  };
}
