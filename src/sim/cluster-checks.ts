/**
 * The checks of `vole chaos --cluster`: the safety invariants after every step, and the
 * convergence demanded at the end of the liveness phase. (The two rules about the disks
 * themselves — ReadWriteOnce on one node, no unforced detach of a disk in use — are also
 * checked by the cloud at the moment each call takes effect: cluster-cloud.ts.)
 */
import { diskOf } from './cluster-draw.js';
import type { SimReplica } from './cluster-replica.js';
import { type ClusterSim, volumeOfDisk } from './cluster-sim.js';

/** The controller log in the store now: its entries, in seq order. */
export function storeLog(sim: ClusterSim): string[] {
  return sim.store.range(sim.keys.logSegments).kvs.map((kv) => kv.value);
}

/** Every term of every replica process, killed ones included. */
function allReplicas(sim: ClusterSim): SimReplica[] {
  return [...sim.retired, ...sim.replicas.values()];
}

/**
 * Nothing in any log lost: each replica's view of the controller log — what it loaded
 * when it began leading, then what it appended and believes durable — is a prefix of the
 * log in the store, and the store's log has no gap.
 */
function checkLogs(sim: ClusterSim): void {
  const final = storeLog(sim);
  const head = Number(sim.store.get(sim.keys.logHead)?.value ?? '0');
  if (head !== final.length) sim.fail(`the controller log's head says ${head} but it holds ${final.length} entries`);
  for (const replica of allReplicas(sim)) {
    for (const term of replica.terms) {
      const view = [...term.loaded];
      for (let seq = term.loaded.length + 1; seq <= term.log.head; seq++) view.push(term.log.pushed.get(seq)!);
      const diverges = view.findIndex((value, i) => final[i] !== value);
      if (diverges >= 0)
        sim.fail(
          `${term.replica} (term ${term.term}) holds seq ${diverges + 1} as durable, but the log in the store ` +
            `${final[diverges] === undefined ? 'ends before it' : 'holds another event there'}: an event was lost`,
        );
    }
  }
}

/** The cores' own invariants (S1, S5, S7, …), checked after every event of every replica and agent. */
function checkCores(sim: ClusterSim): void {
  for (const replica of allReplicas(sim))
    for (const v of replica.checker.violations) sim.fail(`${replica.name}: invariant ${v.invariant}: ${v.message}`);
  for (const [node, agent] of sim.agents)
    for (const v of agent.checker.violations) sim.fail(`${node}: invariant ${v.invariant}: ${v.message}`);
}

/** The safety invariants, after every step. */
export function checkInvariants(sim: ClusterSim): void {
  for (const [volume, nodes] of sim.cloud.attached)
    if (nodes.size > 1) sim.fail(`ReadWriteOnce volume ${volume} is attached to ${[...nodes].sort().join(' and ')}`);
  checkLogs(sim);
  checkCores(sim);
}

export function invariantChecks(sim: ClusterSim): number {
  let checks = 0;
  for (const replica of allReplicas(sim)) checks += replica.checker.checks;
  for (const agent of sim.agents.values()) checks += agent.checker.checks;
  return checks;
}

/** What the present pods need: disk → node. */
function desired(sim: ClusterSim): Map<string, string> {
  const out = new Map<string, string>();
  for (const pod of sim.present.values()) out.set(volumeOfDisk(diskOf(pod)), pod.spec.nodeName!);
  return out;
}

function checkLeader(sim: ClusterSim): void {
  const leaders = [...sim.replicas.values()].filter((r) => r.leading);
  if (leaders.length !== 1) {
    sim.fail(`${leaders.length} replicas lead at the end (${leaders.map((r) => r.name).join(', ')}); want one`);
    return;
  }
  const world = leaders[0]!.cm!.world;
  if (world.running.size > 0) sim.fail(`the leader still runs ${world.running.size} operation(s) at the end`);
}

function checkCloud(sim: ClusterSim): void {
  const want = desired(sim);
  const volumes = new Set([...want.keys(), ...sim.cloud.attached.keys()]);
  for (const volume of [...volumes].sort()) {
    const nodes = sim.cloud.nodesOf(volume);
    const node = want.get(volume);
    const expected = node === undefined ? [] : [node];
    if (nodes.join(',') !== expected.join(','))
      sim.fail(`at the end ${volume} is attached to [${nodes.join(', ')}], want [${expected.join(', ')}]`);
  }
}

function checkNodes(sim: ClusterSim): void {
  const want = desired(sim);
  for (const [node, agent] of sim.agents) {
    const vm = agent.vm;
    if (!agent.running || vm === undefined) {
      sim.fail(`the agent of ${node} is not running at the end`);
      continue;
    }
    if (vm.world.running.size > 0) sim.fail(`${node} still runs ${vm.world.running.size} operation(s) at the end`);
    const host = sim.hosts.get(node)!;
    const pods = [...sim.present.values()].filter((p) => p.spec.nodeName === node);
    for (const pod of pods) {
      const mounted = vm.getMountedVolumesForPod(pod.metadata.uid!).size;
      if (mounted !== pod.spec.volumes!.length)
        sim.fail(`${node}: pod ${pod.metadata.uid} has ${mounted} of ${pod.spec.volumes!.length} volumes mounted at the end`);
    }
    const uids = new Set(pods.map((p) => p.metadata.uid!));
    for (const entry of host.setUp)
      if (!uids.has(entry.split('|')[1]!)) sim.fail(`${node}: leaked pod volume ${entry}`);
    for (const volume of host.devicesMounted)
      if (want.get(volume) !== node) sim.fail(`${node}: leaked device mount of ${volume}`);
  }
}

/** At the end of the liveness phase: one leader, exactly what the present pods need, nothing running. */
export function checkConvergence(sim: ClusterSim): void {
  checkLeader(sim);
  checkCloud(sim);
  checkNodes(sim);
}
