/**
 * The checks of `vole chaos --kube`. At the moment each write lands on the API server:
 * a controller replica writes only while the Lease names it (the fence), and deletes a
 * VolumeAttachment (detaches) only of a volume its node does not report in use and has
 * not mounted, unless that replica logged the detach as forced, with its reason. The
 * cloud refuses a second attach of a disk and records one asked while the first node reports
 * it in use (kube-attacher.ts).
 * After every step the kubelet cores' own invariants; at the end, every fault over,
 * convergence: no mount left of a deleted pod (one deleted while its agent was cut off
 * or down included), every present pod's volume mounted, the disks attached where the
 * present pods need them and nowhere else, no pod left half deleted.
 */
import type { JsonObject } from '../kube/http.js';
import type { KubeChange } from './kube-api-sim.js';
import { handleOfPv } from './kube-attacher.js';
import { handleOf, type KubeSim, leasePath, volumeOf } from './kube-sim.js';

/** Installs the write-time checks (fence, detach of a volume in use) on the simulation. */
export function installWriteChecks(sim: KubeSim): void {
  const order = new NodeWriteOrder();
  sim.onChange.push((change, client) => {
    if (change.resource === 'v1/nodes') order.observe(change, client.startsWith('replica:'));
    if (!client.startsWith('replica:')) return;
    sim.checks++;
    const identity = client.slice('replica:'.length).replace(/#\d+$/, '');
    checkFence(sim, identity, change);
    if (change.resource === 'storage.k8s.io/v1/volumeattachments')
      checkDetach(sim, identity, change, order);
  });
}

type NodeStatusLists = { volumesAttached?: { name: string }[]; volumesInUse?: string[] };
const listsOf = (o: JsonObject | undefined) => (o?.status ?? {}) as NodeStatusLists;

/**
 * The order of the writes to each Node that make a detach of a volume its node reports in
 * use safe, as Kubernetes has it: a replica wrote status.volumesAttached without the volume,
 * and only after that the node's volumesInUse began to name it. The kubelet then reads the
 * Node (verifyControllerAttachedVolume's GET) after its report landed, finds the volume not
 * attached and mounts nothing; the controller's GET before the detach came before the report.
 */
class NodeWriteOrder {
  /** node → rv of each replica write to it, with the volumes its volumesAttached lists. */
  private readonly replicaWrites = new Map<string, { rv: number; attached: Set<string> }[]>();
  /** `node|volume` → rv of the write with which volumesInUse began to name it. */
  private readonly reported = new Map<string, number>();

  observe(change: KubeChange, byReplica: boolean): void {
    const node = (change.after?.metadata as { name?: string } | undefined)?.name;
    if (node === undefined) return;
    const wasInUse = new Set(listsOf(change.before).volumesInUse ?? []);
    for (const volume of listsOf(change.after).volumesInUse ?? [])
      if (!wasInUse.has(volume)) this.reported.set(`${node}|${volume}`, change.rv);
    if (!byReplica) return;
    const attached = new Set((listsOf(change.after).volumesAttached ?? []).map((v) => v.name));
    const writes = this.replicaWrites.get(node) ?? [];
    writes.push({ rv: change.rv, attached });
    this.replicaWrites.set(node, writes);
  }

  /** The node's report of the volume landed after a replica left it out of volumesAttached. */
  reportedAfterLeftOut(node: string, volume: string, attachedNow: boolean): boolean {
    const reported = this.reported.get(`${node}|${volume}`);
    if (attachedNow || reported === undefined) return false;
    // No replica write listed it since the report, and the last one before the report did not.
    const writes = this.replicaWrites.get(node) ?? [];
    if (writes.some((w) => w.rv > reported && w.attached.has(volume))) return false;
    const last = writes.filter((w) => w.rv < reported).at(-1);
    return last !== undefined && !last.attached.has(volume);
  }
}

function checkFence(sim: KubeSim, identity: string, change: KubeChange): void {
  const object = change.after ?? change.before;
  const name = (object?.metadata as { name?: string } | undefined)?.name;
  if (change.resource === 'coordination.k8s.io/v1/leases' && name === 'vole-ad') return;
  const lease = sim.api.peek(leasePath);
  const holder = (lease?.spec as { holderIdentity?: string } | undefined)?.holderIdentity;
  if (holder !== identity)
    sim.fail(
      `deposed replica ${identity} wrote ${change.resource} ${name ?? ''} ` +
        `while the Lease names ${holder || 'nobody'}`,
    );
}

const vaOf = (o: JsonObject | undefined) => {
  if (o === undefined) return undefined;
  const spec = o.spec as { nodeName: string; source: { persistentVolumeName: string } };
  const deleting = (o.metadata as { deletionTimestamp?: string }).deletionTimestamp !== undefined;
  return { node: spec.nodeName, pv: spec.source.persistentVolumeName, deleting };
};

/** A detach starts when the controller deletes the VolumeAttachment. */
function checkDetach(
  sim: KubeSim,
  identity: string,
  change: KubeChange,
  order: NodeWriteOrder,
): void {
  const before = vaOf(change.before);
  const after = vaOf(change.after);
  const starts =
    before !== undefined && !before.deleting && (after === undefined || after.deleting);
  if (!starts) return;
  const disk = Number(handleOfPv(before.pv).replace(/^disk-/, ''));
  const volume = volumeOf(disk);
  const reported = sim.volumesInUse(before.node).includes(volume);
  const mounted = [...(sim.nodes.get(before.node)?.host.devicesMounted ?? [])].some((v) =>
    v.includes(handleOf(disk)),
  );
  if (!reported && !mounted) return;
  const node = sim.api.peek(`/api/v1/nodes/${before.node}`);
  const attachedNow = (listsOf(node).volumesAttached ?? []).some((v) => v.name === volume);
  if (!mounted && order.reportedAfterLeftOut(before.node, volume, attachedNow)) {
    sim.say(
      `${identity}: detach of ${volume} from ${before.node}, reported in use only after ` +
        'volumesAttached left it out (the node mounts nothing)',
    );
    return;
  }
  const forced = sim.replicas.get(identity)?.forced.get(`${volume}|${before.node}`);
  if (forced !== undefined) {
    sim.say(`${identity}: forced detach of ${volume} from ${before.node} (${forced})`);
    return;
  }
  const why = reported ? 'reports it in use' : 'has it mounted';
  sim.fail(`${identity} detached ${volume} from ${before.node}, which ${why}, without forcing`);
}

/** After every step: each agent's kubelet core held its invariants. */
export function checkCores(sim: KubeSim): void {
  for (const node of sim.nodes.values()) {
    sim.checks++;
    for (const violation of node.checker.violations)
      sim.fail(`${node.name}: kubelet invariant: ${violation}`);
  }
}

/** Pod uids the API server holds now, by name, and those half deleted. */
function podsNow(sim: KubeSim): { uids: Map<string, string>; deleting: string[] } {
  const uids = new Map<string, string>();
  const deleting: string[] = [];
  for (const pod of sim.api.all('v1/pods')) {
    const meta = pod.metadata as { name: string; uid: string; deletionTimestamp?: string };
    uids.set(meta.name, meta.uid);
    if (meta.deletionTimestamp !== undefined) deleting.push(meta.name);
  }
  return { uids, deleting };
}

/** At the end, every fault over and time given: the cluster holds what the pods need. */
export function checkConvergence(sim: KubeSim): void {
  sim.checks++;
  const { uids, deleting } = podsNow(sim);
  if (deleting.length > 0) sim.fail(`pods still being deleted at the end: ${deleting.join(' ')}`);
  const liveUids = new Set(uids.values());
  const needed = new Map<string, Set<number>>();
  for (const [pod, { node, disk }] of sim.present) {
    if (!uids.has(pod)) sim.fail(`pod ${pod} the user never deleted is gone`);
    const set = needed.get(node) ?? new Set<number>();
    set.add(disk);
    needed.set(node, set);
  }
  for (const node of sim.nodes.values()) {
    for (const entry of node.host.setUp) {
      const pod = entry.split('|')[1] ?? '';
      if (!liveUids.has(pod)) sim.fail(`${node.name}: a mount of deleted pod ${entry} leaked`);
    }
    const wants = needed.get(node.name) ?? new Set<number>();
    for (const device of node.host.devicesMounted)
      if (![...wants].some((d) => device.includes(handleOf(d))))
        sim.fail(`${node.name}: device ${device} still mounted, no present pod needs it`);
  }
  checkDisks(sim, needed);
}

/** The cloud: a disk attached only where a present pod needs it; a lone claimant has it. */
function checkDisks(sim: KubeSim, needed: Map<string, Set<number>>): void {
  const claimants = new Map<number, string[]>();
  for (const [node, disks] of needed)
    for (const d of disks) claimants.set(d, [...(claimants.get(d) ?? []), node]);
  for (const [disk, node] of sim.attacher.cloud) {
    const d = Number(disk.replace(/^disk-/, ''));
    if (!(claimants.get(d) ?? []).includes(node))
      sim.fail(`${disk} still attached to ${node}, where no present pod needs it`);
  }
  for (const [d, nodes] of claimants) {
    if (nodes.length !== 1) continue; // Multi-Attach: one of them, whichever came first
    if (sim.attacher.cloud.get(handleOf(d)) !== nodes[0])
      sim.fail(`${handleOf(d)} is not attached to ${nodes[0]}, where a present pod needs it`);
    const node = sim.nodes.get(nodes[0]!)!;
    const mounted = [...node.host.setUp].some((e) => e.includes(handleOf(d)));
    if (!mounted) sim.fail(`${nodes[0]}: the pod needing ${handleOf(d)} has it not mounted`);
  }
}
