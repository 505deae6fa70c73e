/**
 * The faults of `vole chaos --cluster` and the other steps of a run, as the simulated
 * cluster (cluster-sim.ts) takes them: pods applied and deleted, time passing, controllers
 * killed (in the middle of an attach, of a snapshot, of a commit), the store's leader lost,
 * the store out of space or compacted, a leader or the log's reader cut off, a node agent
 * stopped past maxWaitForUnmount.
 */
import type { StoreChange } from './store-sim.js';
import type { ClusterStep } from './cluster-draw.js';
import type { ClusterSim } from './cluster-sim.js';

/** Waits (100 ms at a time, 20 s at most) for `ready`. */
async function until(sim: ClusterSim, ready: () => boolean, maxMs = 20_000): Promise<boolean> {
  for (let waitedMs = 0; waitedMs < maxMs && !ready(); waitedMs += 100) await sim.advance(100);
  return ready();
}

async function killLeader(sim: ClusterSim): Promise<void> {
  await until(sim, () => sim.leader() !== undefined, 60_000);
  const leader = sim.leader();
  if (leader === undefined) return sim.say('no leader to kill');
  const midAttach = await until(sim, () => sim.cloud.attachesInFlight(leader.name) > 0);
  if (!leader.leading) return sim.say(`${leader.name} lost its lead before the kill`);
  leader.kill();
  sim.say(`killed ${leader.name} (SIGKILL)${midAttach ? ' in the middle of an attach' : ''}`);
}

function partitionLeader(sim: ClusterSim, durationMs: number): void {
  const leader = sim.leader();
  if (leader === undefined) return sim.say('no leader to cut off');
  leader.client.partition(durationMs);
  sim.say(`${leader.name} cut off from the store for ${durationMs} ms`);
}

function stopAgent(sim: ClusterSim, node: string, durationMs: number): void {
  const agent = sim.agents.get(node)!;
  if (!agent.running) return sim.say(`the agent of ${node} is already stopped`);
  agent.stop();
  sim.say(`stopped the agent of ${node} for ${durationMs} ms`);
  sim.clock.setTimer(sim.clock.nowMs() + durationMs, () => {
    sim.say(`restarted the agent of ${node}`);
    void agent.start();
  });
}

function noSpace(sim: ClusterSim, durationMs: number): void {
  const untilMs = Math.max(sim.noSpaceUntilMs, sim.clock.nowMs() + durationMs);
  sim.noSpaceUntilMs = untilMs;
  sim.store.setNoSpace(true);
  sim.say(`the store is out of space for ${durationMs} ms`);
  sim.clock.setTimer(untilMs, () => {
    if (sim.noSpaceUntilMs !== untilMs) return;
    sim.store.setNoSpace(false);
    sim.say('the store has space again');
  });
}

export async function runStep(sim: ClusterSim, step: ClusterStep): Promise<void> {
  const kind = Object.keys(step)[0]!;
  if (kind !== 'addPod' && kind !== 'removePod' && kind !== 'advance')
    sim.faults[kind] = (sim.faults[kind] ?? 0) + 1;
  if ('addPod' in step) {
    const pod = step.addPod;
    sim.present.set(pod.metadata.uid!, pod);
    sim.adminWrite([{ put: sim.keys.podOf(pod), value: JSON.stringify(pod) }]);
  } else if ('removePod' in step) {
    const pod = sim.present.get(step.removePod.uid)!;
    sim.present.delete(step.removePod.uid);
    sim.adminWrite([{ delete: sim.keys.podOf(pod) }]);
  } else if ('advance' in step) await sim.advance(step.advance);
  else if ('killLeader' in step) await killLeader(sim);
  else if ('startReplica' in step) {
    const dead = [...sim.replicas.values()].find((r) => !r.alive);
    if (dead !== undefined) {
      sim.startReplica(dead.name);
      sim.say(`started ${dead.name} again`);
    }
  } else if ('storeLeaderLost' in step) {
    sim.store.loseLeader(step.storeLeaderLost);
    sim.say(`the store's leader member is lost for ${step.storeLeaderLost} ms`);
  } else if ('noSpace' in step) noSpace(sim, step.noSpace);
  else if ('partitionLeader' in step) partitionLeader(sim, step.partitionLeader);
  else if ('killLeaderMidSnapshot' in step) await killLeaderMidSnapshot(sim);
  else if ('crashMidCommit' in step) await crashMidCommit(sim);
  else if ('partitionReader' in step) partitionReader(sim, step.partitionReader);
  else if ('compactStore' in step) {
    sim.store.compact(sim.store.revision);
    sim.say(`etcd compacted its history up to revision ${sim.store.revision}`);
  } else stopAgent(sim, step.stopAgent.node, step.stopAgent.durationMs);
  await sim.settle();
}

/** The leader, once there is one (60 s at most). */
async function leaderNow(sim: ClusterSim) {
  await until(sim, () => sim.leader() !== undefined, 60_000);
  return sim.leader();
}

/**
 * Kills the leader from inside the store, the moment a change it makes lands (its answer
 * is lost): `when` says which change (and may say why); waits 60 s at most.
 */
async function killAt(
  sim: ClusterSim,
  what: string,
  when: (change: StoreChange, waitedMs: number) => string | undefined,
): Promise<void> {
  const leader = await leaderNow(sim);
  if (leader === undefined) return sim.say(`no leader to kill ${what}`);
  const startMs = sim.clock.nowMs();
  let fired: string | undefined;
  sim.trap = (change) => {
    const why = when(change, sim.clock.nowMs() - startMs);
    if (why === undefined || !leader.leading) return false;
    fired = why;
    leader.kill();
    return true;
  };
  await until(sim, () => fired !== undefined || !leader.leading, 60_000);
  sim.trap = null;
  if (fired === undefined)
    return sim.say(`${leader.name} was not killed ${what}: no such moment came`);
  sim.say(`killed ${leader.name} (SIGKILL) ${what}: ${fired}`);
}

/** After writing a snapshot's chunks, before its meta names them. */
function killLeaderMidSnapshot(sim: ClusterSim): Promise<void> {
  const chunks = `${sim.keys.log.snapshot}/`;
  return killAt(sim, 'in the middle of writing a snapshot', (change) =>
    change.kv !== undefined && change.key.startsWith(chunks)
      ? `chunk ${change.key} written`
      : undefined,
  );
}

/**
 * As a log transaction lands: between two transactions of one commit (rows still to go:
 * a segment boundary) when that comes within 20 s, else at any commit.
 */
function crashMidCommit(sim: ClusterSim): Promise<void> {
  return killAt(sim, 'as its log commit landed', (change, waitedMs) => {
    if (change.key !== sim.keys.log.head || change.kv === undefined) return undefined;
    const head = Number(change.kv.value.toString());
    const appended = sim.leader()?.lastAppended ?? head;
    if (appended > head)
      return `seqs to ${head} in, ${appended - head} more to go (a segment boundary)`;
    return waitedMs >= 20_000 ? `seqs to ${head} in (a whole commit)` : undefined;
  });
}

function partitionReader(sim: ClusterSim, durationMs: number): void {
  sim.reader?.client.partition(durationMs);
  sim.say(`the log's reader cut off from the store for ${durationMs} ms`);
}
