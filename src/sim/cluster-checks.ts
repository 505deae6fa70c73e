/**
 * The checks of `vole chaos --cluster`: the safety invariants after every step, and the
 * convergence demanded at the end of the liveness phase. (The two rules about the disks
 * themselves — ReadWriteOnce on one node, no unforced detach of a disk in use — are also
 * checked by the cloud at the moment each call takes effect: cluster-cloud.ts.)
 */
import { decodeVolumesAttached } from '../cluster/status.js';
import { prefixRange } from '../cluster/store.js';
import { eventCodec } from '../events/index.js';
import { encodeEvent } from '../log/codec.js';
import { decodeLogRow } from './cluster-archive.js';
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
  const { keys } = sim;
  const range = prefixRange(keys.log.segments);
  const seqAt = keys.log.segments.length;
  let last: number | undefined;
  for (const kv of sim.store.range({ start: range.start, end: range.end }).kvs) {
    const first = Number(kv.key.slice(seqAt, seqAt + 16));
    const part = /\+(\d{4})\/\d{4}$/.exec(kv.key);
    if (part !== null && part[1] !== '0000') continue;
    if (last !== undefined && first !== last + 1)
      sim.fail(`the controller log in the store skips from seq ${last} to ${first}`);
    // One row a line; a row in parts is one row.
    last = part !== null ? first : first + kv.value.toString().split('\n').length - 1;
  }
  const head = Number(sim.store.get(keys.log.head)?.value.toString() ?? '0');
  if ((last ?? head) !== head)
    sim.fail(`the controller log's head says ${head} but its last stored seq is ${last}`);
}

/**
 * The snapshot the log names is whole, and no chunks older than it stay behind (those of
 * a snapshot cut off mid-write go with the next one; newer ones may be being written).
 */
function checkSnapshot(sim: ClusterSim): void {
  const { keys, store } = sim;
  const meta = store.get(keys.log.snapshot);
  if (meta === undefined) return;
  const { seq, chunks } = JSON.parse(meta.value.toString()) as { seq: number; chunks: number };
  const base = `${keys.log.snapshot}/`;
  const range = prefixRange(base);
  const held = new Map<number, number>();
  for (const kv of store.range({ start: range.start, end: range.end, keysOnly: true }).kvs) {
    const of = Number(kv.key.slice(base.length).split('/')[0]);
    held.set(of, (held.get(of) ?? 0) + 1);
  }
  if (held.get(seq) !== chunks)
    sim.fail(
      `the snapshot at seq ${seq} has ${held.get(seq) ?? 0} of its ${chunks} chunks in the store`,
    );
  for (const of of held.keys())
    if (of < seq) sim.fail(`chunks of a snapshot at seq ${of} stayed behind the one at seq ${seq}`);
}

/**
 * Nothing in any log lost: what each term loaded is in the log's history, and what it
 * appended and believes durable is there at the same seqs (the archive never forgets a
 * row, and fails a seq written twice differently).
 */
function checkLogs(sim: ClusterSim): void {
  checkStoredLog(sim);
  checkSnapshot(sim);
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

/**
 * Each node's volumesAttached in the store names exactly the disks attached to it: the
 * node's agent mounts only what it lists, and a disk attached but left out of it holds
 * a pod back for good (or, mounted before it went, hides that from the pod checks).
 */
function checkPublished(sim: ClusterSim): void {
  for (const node of sim.plan.nodes) {
    const kv = sim.store.get(sim.keys.volumesAttached(node));
    const listed = kv === undefined ? [] : (decodeVolumesAttached(kv) ?? []).map((v) => v.name);
    const attached = [...sim.cloud.attached].filter(([, nodes]) => nodes.has(node));
    const want = attached.map(([volume]) => volume).sort();
    if (listed.sort().join(',') !== want.join(','))
      sim.fail(
        `at the end ${node}'s volumesAttached lists [${listed.join(', ')}], want [${want.join(', ')}]`,
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
      const mounted = vm.status.getMountedVolumesForPod(pod.metadata.uid!).size;
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

/**
 * At the end of the liveness phase: one leader, exactly what the present pods need (in the
 * cloud, in each node's volumesAttached, on each node), nothing running.
 */
export function checkConvergence(sim: ClusterSim): void {
  checkLeader(sim);
  checkReader(sim);
  checkCloud(sim);
  checkPublished(sim);
  checkNodes(sim);
}

/**
 * The log's reader (`vole inspect --etcd`) caught up with the log, whatever was compacted
 * while it was cut off: its head is the log's, and each event it holds is the log's.
 */
function checkReader(sim: ClusterSim): void {
  const mirror = sim.reader?.mirror;
  if (mirror === undefined) return sim.fail('the log reader never opened');
  const head = sim.archive.head;
  if (mirror.head().seq !== head)
    return sim.fail(`the log reader is at seq ${mirror.head().seq}, the log at ${head}`);
  for (const event of mirror.read()) {
    const row = JSON.stringify(encodeEvent(eventCodec, event, event.seq));
    if (sim.archive.rows.get(event.seq) !== row)
      return sim.fail(`the log reader holds another event than the log at seq ${event.seq}`);
  }
}
