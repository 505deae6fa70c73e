/**
 * The checks of `vole chaos --cluster`: the safety invariants after every step, and the
 * convergence demanded at the end of the liveness phase. (The two rules about the disks
 * themselves — ReadWriteOnce on one node, no unforced detach of a disk in use — are also
 * checked by the cloud at the moment each call takes effect: cluster-cloud.ts.)
 */
import { prefixRange } from '../cluster/store.js';
import { eventCodec } from '../events/index.js';
import { encodeEvent } from '../log/codec.js';
import { decodeLogRow, segmentRows, seqOfRow } from './cluster-archive.js';
import { diskOf } from './cluster-draw.js';
import type { SimReplica } from './cluster-replica.js';
import { type ClusterSim, volumeOfDisk } from './cluster-sim.js';

/** The controller log as it ever was: every row from seq 1, compacted ones included. */
export function storeLog(sim: ClusterSim): string[] {
  return sim.archive.prefix;
}

/** The same, decoded. */
export function loggedEvents(sim: ClusterSim) {
  return storeLog(sim).map(decodeLogRow);
}

/** Every term of every replica process, killed ones included. */
function allReplicas(sim: ClusterSim): SimReplica[] {
  return [...sim.retired, ...sim.replicas.values()];
}

/**
 * The segments in the store now: consecutive seqs up to the head key's, none missing
 * between the first kept one and the head (compaction only takes the oldest).
 */
function checkStoredLog(sim: ClusterSim): void {
  const range = prefixRange(sim.keys.logSegments);
  const kvs = sim.store.range({ start: range.start, end: range.end }).kvs;
  const seqs: number[] = [];
  for (const kv of kvs) {
    if (/\+\d{4}\/\d{4}$/.test(kv.key)) {
      if (kv.key.endsWith('+0000/' + kv.key.slice(-4))) seqs.push(Number(kv.key.slice(-26, -10)));
      continue;
    }
    for (const row of segmentRows(kv.value.toString())) seqs.push(seqOfRow(row));
  }
  const head = Number(sim.store.get(sim.keys.logHead)?.value.toString() ?? '0');
  const last = seqs.at(-1) ?? head;
  if (last !== head)
    sim.fail(`the controller log's head says ${head} but its last stored seq is ${last}`);
  const gap = seqs.findIndex((seq, i) => i > 0 && seq !== seqs[i - 1]! + 1);
  if (gap > 0)
    sim.fail(`the controller log in the store skips from seq ${seqs[gap - 1]} to ${seqs[gap]}`);
}

/**
 * Nothing in any log lost: what each term loaded is in the log's history, and what it
 * appended and believes durable is there at the same seqs (the archive never forgets a
 * row, and fails a seq written twice differently).
 */
function checkLogs(sim: ClusterSim): void {
  checkStoredLog(sim);
  const history = sim.archive.rows;
  const known = sim.archive.prefix.length;
  for (const replica of allReplicas(sim)) {
    for (const term of replica.terms) {
      const where = `${term.replica} (term ${term.term})`;
      if (term.loadedHead > known)
        sim.fail(
          `${where} loaded the log up to seq ${term.loadedHead}, past its history (${known})`,
        );
      for (let seq = term.loadedHead + 1; seq <= term.leading.log.head; seq++) {
        const event = term.appended.get(seq);
        const row =
          event === undefined ? undefined : JSON.stringify(encodeEvent(eventCodec, event, seq));
        if (row !== undefined && history.get(seq) === row) continue;
        const stored =
          history.get(seq) === undefined ? 'ends before it' : 'holds another event there';
        sim.fail(
          `${where} holds seq ${seq} as durable, but the log in the store ${stored}: an event was lost`,
        );
        break;
      }
    }
  }
}

/** The cores' own invariants (S1, S5, S7, …), checked after every event of every replica and agent. */
function checkCores(sim: ClusterSim): void {
  for (const replica of allReplicas(sim))
    for (const v of replica.checker.violations)
      sim.fail(`${replica.name}: invariant ${v.invariant}: ${v.message}`);
  for (const [node, agent] of sim.agents)
    for (const v of agent.checker.violations)
      sim.fail(`${node}: invariant ${v.invariant}: ${v.message}`);
}

/** The safety invariants, after every step. */
export function checkInvariants(sim: ClusterSim): void {
  for (const [volume, nodes] of sim.cloud.attached)
    if (nodes.size > 1)
      sim.fail(`ReadWriteOnce volume ${volume} is attached to ${[...nodes].sort().join(' and ')}`);
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
    sim.fail(
      `${leaders.length} replicas lead at the end (${leaders.map((r) => r.name).join(', ')}); want one`,
    );
    return;
  }
  const world = leaders[0]!.world!;
  if (world.running.size > 0)
    sim.fail(`the leader still runs ${world.running.size} operation(s) at the end`);
}

function checkCloud(sim: ClusterSim): void {
  const want = desired(sim);
  const volumes = new Set([...want.keys(), ...sim.cloud.attached.keys()]);
  for (const volume of [...volumes].sort()) {
    const nodes = sim.cloud.nodesOf(volume);
    const node = want.get(volume);
    const expected = node === undefined ? [] : [node];
    if (nodes.join(',') !== expected.join(','))
      sim.fail(
        `at the end ${volume} is attached to [${nodes.join(', ')}], want [${expected.join(', ')}]`,
      );
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
    if (vm.world.running.size > 0)
      sim.fail(`${node} still runs ${vm.world.running.size} operation(s) at the end`);
    const host = sim.hosts.get(node)!;
    const pods = [...sim.present.values()].filter((p) => p.spec.nodeName === node);
    for (const pod of pods) {
      const mounted = vm.getMountedVolumesForPod(pod.metadata.uid!).size;
      if (mounted !== pod.spec.volumes!.length)
        sim.fail(
          `${node}: pod ${pod.metadata.uid} has ${mounted} of ${pod.spec.volumes!.length} volumes mounted at the end`,
        );
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
