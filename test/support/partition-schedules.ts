/**
 * Partition schedules for PartitionCluster: the fixed set CI runs (each named, each with
 * the checks of its fault) and seeded random ones (`seededSchedule(seed)`), and the checks
 * every schedule ends with (`runSchedule`): after healing, the cluster converges; no
 * ReadWriteOnce disk was ever published attached to two nodes; the controller log holds
 * every row the observer saw, each seq once, folds with the invariants and has no detach
 * of a volume in use unless forced; one replica leads and the other stands by.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { checkControllerLog } from './history-invariants.js';
import {
  type Disk,
  disks,
  heartbeatTtlS,
  leaseTtlS,
  members,
  type Node,
  nodes,
  type PartitionCluster,
  replicas,
} from './partition-cluster.js';
import { eventually, historyEpochMs } from './vole-procs.js';
import { prng as random } from '../../src/sim/chaos.js';

/** The time (epoch ms) of a history line `+12.345s …`. */
const stampMs = (line: string) => historyEpochMs + Math.round(parseFloat(line.slice(1)) * 1000);

export interface Schedule {
  readonly name: string;
  /** A known gap the schedule shows (run and reported as a todo, not failing CI). */
  readonly knownGap?: string;
  /** Applies the faults and checks what they must show while they last. */
  run(c: PartitionCluster, say: (line: string) => void): Promise<void>;
}

const other = <T extends string>(list: readonly T[], one: string): T =>
  list.find((x) => x !== one)!;
/** How long a standby may take to lead once the leader is cut off (see docs/reliability.md). */
const takeoverTimeoutMs = Number(process.env.VOLE_PARTITION_TAKEOVER_MS ?? 60_000);
/** etcd's --election-timeout in test/support/etcd-cluster.ts. */
const etcdElectionTimeoutMs = 1000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Whether the replica runs and its last word on leadership is that it leads. */
function saysLeading(c: PartitionCluster, replica: string): boolean {
  const proc = c.procs.get(replica);
  if (proc === undefined || !proc.alive) return false;
  const said = proc.output.match(/leading \(term|leadership lost|exited/g) ?? [];
  return said.at(-1) === 'leading (term';
}

/**
 * The leading replica's name and the other's, once the leader key names a replica that
 * runs and says it leads and the other runs too: a leader that lost its lease just before
 * (a lossy link of the schedule before) is still named until its lease expires, and is
 * restarted as a standby.
 */
async function leaderAndStandby(c: PartitionCluster): Promise<[string, string]> {
  let leader = '';
  await eventually(
    async () => {
      leader = await c.leader();
      if (!(replicas as readonly string[]).includes(leader)) return false;
      return saysLeading(c, leader) && c.procs.get(other(replicas, leader))!.alive;
    },
    'a replica that leads and a standby that runs',
    takeoverTimeoutMs,
    () => `the leader key names "${leader}"\n${c.history()}`,
  );
  return [leader, other(replicas, leader)];
}

/**
 * The leader, cut off from the etcd majority at `cutAtMs`, says it lost its leadership
 * within its lease (the engine stops, the process exits 3) and the standby takes over.
 */
async function leaderFenced(
  c: PartitionCluster,
  leader: string,
  standby: string,
  cutAtMs: number,
  outputAt: number,
  say: (line: string) => void,
  renewable: () => { untilMs: number; why: string } = () => ({
    untilMs: 0,
    why: 'it reaches no etcd member; two election timeouts allowed all the same',
  }),
): Promise<void> {
  const proc = c.procs.get(leader)!;
  await eventually(
    () => /leadership lost/.test(proc.output.slice(outputAt)),
    `${leader} to stop leading once cut off`,
    (leaseTtlS + 5) * 1000,
    () => c.history(),
  );
  // When it said so, by the stamp of its line (the test may have been busy meanwhile).
  const line = proc.history.find((l) => /leadership lost/.test(l) && stampMs(l) >= cutAtMs)!;
  const stoppedMs = stampMs(line) - cutAtMs;
  say(
    `${leader} stopped leading ${stoppedMs} ms after the cut: ${/leadership lost.*/.exec(line)![0]}`,
  );
  let now = '';
  const tookMs = await eventually(
    async () => (now = await c.leader()) === standby,
    `${standby} to lead`,
    takeoverTimeoutMs,
    () => `the leader key names "${now}"\n${c.history()}`,
  );
  const leading = c.procs
    .get(standby)!
    .history.find((l) => /leading \(term/.test(l) && stampMs(l) >= cutAtMs);
  const tookOverMs = leading === undefined ? Date.now() - cutAtMs : stampMs(leading) - cutAtMs;
  say(
    `${standby} leads ${tookOverMs} ms after the cut (${tookMs} ms after ${leader} said it stopped)`,
  );
  // Before anyone else can lead: the standby waits for the lease to expire in the majority.
  // The stamps are when this process read each line: two lines read in the same turn (this
  // process busy, as under a loaded CI) carry one stamp, so equal is no order.
  assert.ok(
    stoppedMs <= tookOverMs,
    `${leader} stopped (${stoppedMs} ms after the cut) before ${standby} led (${tookOverMs} ms)`,
  );
  // Within its lease: the TTL from the last keepalive etcd may have granted. An etcd leader
  // cut off with it renews the lease until it steps down: two election timeouts in etcd
  // 3.4's check of its quorum, later when that member is starved of the CPU, so the
  // schedule watches for it.
  const { untilMs, why } = renewable();
  const renewableMs = Math.max(2 * etcdElectionTimeoutMs, untilMs);
  say(`its lease renewable for ${renewableMs} ms after the cut: ${why}`);
  assert.ok(
    stoppedMs <= renewableMs + leaseTtlS * 1000,
    `${leader} stops within its lease (renewable for ${renewableMs} ms after the cut: ${why}; ` +
      `TTL ${leaseTtlS} s), took ${stoppedMs} ms; ${standby} led at ${tookOverMs} ms`,
  );
}

/**
 * Watches etcd member `i`, cut off from the majority at `cutAtMs`, for the moment it stops
 * leading, which is as long as it may renew a lease: polled every 50 ms until `stop()`.
 */
function watchStepDown(
  c: PartitionCluster,
  i: number,
  cutAtMs: number,
): { renewable: () => { untilMs: number; why: string }; stop: () => void } {
  let stepDownMs: number | undefined;
  let leadingMs: number | undefined; // the last answer that it leads
  let stopped = false;
  void (async () => {
    while (!stopped && stepDownMs === undefined) {
      const status = await c.etcd.status(i);
      if (status !== null && status.leader !== status.memberId) stepDownMs = Date.now() - cutAtMs;
      else if (status !== null) leadingMs = Date.now() - cutAtMs;
      await sleep(50);
    }
  })();
  const member = `etcd ${members[i]}`;
  return {
    renewable: () => {
      if (stepDownMs !== undefined)
        return { untilMs: stepDownMs, why: `${member} stepped down at ${stepDownMs} ms` };
      if (leadingMs !== undefined)
        return { untilMs: leadingMs, why: `${member} still led at ${leadingMs} ms` };
      return { untilMs: 0, why: `${member} did not answer` };
    },
    stop: () => void (stopped = true),
  };
}

const podNode = (c: PartitionCluster, disk: Disk): Node => c.pods.get(disk)!.node;

export const leaderCutFromEtcd: Schedule = {
  name: 'leader-cut-from-etcd',
  async run(c, say) {
    const [leader, standby] = await leaderAndStandby(c);
    const outputAt = c.procs.get(leader)!.output.length;
    const cutAtMs = Date.now();
    c.partition([leader], members);
    await c.movePod('a', other(nodes, podNode(c, 'a')));
    await leaderFenced(c, leader, standby, cutAtMs, outputAt, say);
    await c.waitConverged('pod-a moved under the new leader');
    say(`pod-a moved and mounted under ${standby} while ${leader} was cut off`);
  },
};

export const leaderInMinority: Schedule = {
  name: 'leader-with-etcd-leader-in-minority',
  async run(c, say) {
    const [leader, standby] = await leaderAndStandby(c);
    const m = await c.etcd.leader();
    assert.ok(m >= 0, 'an etcd leader');
    const minority = members[m]!;
    const majority = members.filter((x) => x !== minority);
    const outputAt = c.procs.get(leader)!.output.length;
    const cutAtMs = Date.now();
    // The leader still reaches one member, the etcd leader, which has lost its quorum.
    c.partition([leader, minority], [standby, ...majority]);
    const stepDown = watchStepDown(c, m, cutAtMs);
    try {
      await c.movePod('b', other(nodes, podNode(c, 'b')));
      await leaderFenced(c, leader, standby, cutAtMs, outputAt, say, stepDown.renewable);
    } finally {
      stepDown.stop();
    }
    await eventually(
      () => c.converged(),
      'pod-b to move under the majority',
      40_000,
      () => c.history(),
    );
    c.healAll();
    await c.waitConverged(`${minority} rejoined`);
    say(`${minority} (the etcd leader, in the minority) rejoined: ${await c.etcdAgreement()}`);
  },
};

export const agentCutFromEtcd: Schedule = {
  name: 'agent-cut-from-etcd',
  async run(c, say) {
    const node = podNode(c, 'a');
    if (podNode(c, 'b') === node) {
      await c.movePod('b', other(nodes, node)); // so that it can move to the cut-off node
      await c.waitConverged('pod-b on the other node');
    }
    const mount = await c.mountOf('a');
    assert.ok(mount !== undefined, 'pod-a mounted before the cut');
    const agent = c.procs.get(node)!;
    c.partition([node], members);
    await eventually(
      () => !c.heartbeat(node),
      `${node}'s heartbeat to expire`,
      (heartbeatTtlS + 8) * 1000,
      () => c.history(),
    );
    say(`${node} cut off: its heartbeat lease expired`);
    // pod-b moves to the cut-off node: the controller attaches; the agent cannot see it yet.
    await c.movePod('b', node);
    const probe = join(mount, 'during-cut.txt');
    for (let i = 0; i < 3; i++) {
      writeFileSync(probe, `written while cut off, round ${i}\n`);
      assert.equal(readFileSync(probe, 'utf8'), `written while cut off, round ${i}\n`);
      assert.equal(await c.mountOf('a'), mount, `pod-a still mounted on ${node}`);
      assert.ok(agent.alive, `${node}'s agent still runs`);
      await sleep(1500);
    }
    say(`${node} kept pod-a mounted and serving (written and read back 3 times over 4.5 s)`);
    c.healAll();
    await c.waitConverged(`${node} caught up`);
    assert.equal(readFileSync(probe, 'utf8'), 'written while cut off, round 2\n');
    say(`${node} caught up after the heal: pod-b mounted there, heartbeat back`);
  },
};

export const etcdMemberCutLossy: Schedule = {
  name: 'etcd-member-cut-with-lossy-and-slow-links',
  async run(c, say) {
    const m = await c.etcd.leader();
    assert.ok(m >= 0, 'an etcd leader');
    const cut = members[m]!;
    c.partition(
      [cut],
      members.filter((x) => x !== cut),
    );
    for (const r of replicas)
      for (const e of members) c.lab.link(r, e, { kind: 'loss', percent: 20 });
    for (const n of nodes)
      for (const e of members) c.lab.link(n, e, { kind: 'slow', rateKbit: 256 });
    c.note('controllers-etcd links lose 20%, agents-etcd links capped at 256 kbit/s');
    await c.movePod('a', other(nodes, podNode(c, 'a')));
    const tookMs = await eventually(
      () => c.converged(),
      'pod-a to move',
      40_000,
      () => c.history(),
    );
    say(
      `pod-a moved in ${tookMs} ms with ${cut} (etcd leader) cut from its peers, lossy and slow links`,
    );
    c.healAll();
    await c.waitConverged(`${cut} rejoined`);
    say(`${cut} rejoined: ${await c.etcdAgreement()}`);
  },
};

/** The fixed set CI runs, in order (about 3 minutes on a loaded 2-core machine). */
export const ciSchedules: readonly Schedule[] = [
  leaderCutFromEtcd,
  agentCutFromEtcd,
  etcdMemberCutLossy,
  leaderInMinority,
];

/** Every named schedule (scripts/partition.sh --only NAME): the CI set and any known gap. */
export const namedSchedules: readonly Schedule[] = [...ciSchedules];

/** 1-3 faults drawn from the seed, a pod moved while they last, held 3-8 s, healed. */
export function seededSchedule(seed: number): Schedule {
  const rnd = random(seed);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rnd() * list.length)]!;
  const faults = Array.from({ length: 1 + Math.floor(rnd() * 3) }, () =>
    pick([
      'leader-isolated',
      'replica-member',
      'member-isolated',
      'agent-isolated',
      'minority',
      'lossy',
      'slow',
    ] as const),
  );
  const draws = faults.map(() => [rnd(), rnd(), rnd()] as const);
  const disk = pick(disks);
  const holdMs = 3000 + Math.floor(rnd() * 5000);
  return {
    name: `seed ${seed}: ${faults.join(', ')}; pod-${disk} moves; held ${holdMs} ms`,
    async run(c, say) {
      const leader = await c.leader();
      const at = (list: readonly string[], x: number) => list[Math.floor(x * list.length)]!;
      faults.forEach((fault, i) => {
        const [x, y, z] = draws[i]!;
        if (fault === 'leader-isolated') c.partition([leader], members);
        if (fault === 'replica-member') c.partition([at(replicas, x)], [at(members, y)]);
        if (fault === 'member-isolated') {
          const m = at(members, x);
          c.partition(
            [m],
            members.filter((e) => e !== m),
          );
        }
        if (fault === 'agent-isolated') c.partition([at(nodes, x)], members);
        if (fault === 'minority') {
          const m = at(members, y);
          c.partition(
            [at(replicas, x), m],
            members.filter((e) => e !== m),
          );
        }
        const hosts = [...members, ...replicas, ...nodes];
        const a = at(hosts, x);
        const b = at(
          hosts.filter((h) => h !== a),
          y,
        );
        if (fault === 'lossy') c.impair(a, b, { kind: 'loss', percent: 10 + Math.floor(z * 40) });
        if (fault === 'slow') c.impair(a, b, { kind: 'slow', rateKbit: 128 + Math.floor(z * 384) });
      });
      await c.movePod(disk, other(nodes, podNode(c, disk)));
      await sleep(holdMs);
      say(`held ${holdMs} ms: ${c.lab.describe().length} one-way impairments`);
      c.healAll();
    },
  };
}

/** Runs one schedule, heals, waits for convergence and checks; answers the report lines. */
export async function runSchedule(c: PartitionCluster, schedule: Schedule): Promise<string[]> {
  const lines: string[] = [];
  const say = (line: string) => lines.push(`  ${line}`);
  const startedMs = Date.now();
  const seen = c.logEvents.length;
  c.note(`schedule ${schedule.name}`);
  await c.waitConverged(`before ${schedule.name}`, 60_000);
  try {
    await schedule.run(c, say);
  } finally {
    c.healAll();
  }
  const convergedMs = await c.waitConverged(`after ${schedule.name}`, 60_000);
  await eventually(
    () => replicas.every((r) => c.procs.get(r)!.alive),
    'both replicas running (one leads, one stands by)',
    20_000,
    () => c.history(),
  );
  assert.deepEqual(c.violations, [], c.history());
  say(
    `check: no ReadWriteOnce disk ever published attached to two nodes; no log seq written twice`,
  );
  const log = await c.readLog();
  const bySeq = new Map(log.map((e) => [e.seq, JSON.stringify(e)]));
  const lost = c.logEvents.filter((e) => bySeq.get(e.seq) !== JSON.stringify(e)).map((e) => e.seq);
  assert.deepEqual(lost, [], 'every log row the observer saw committed is in the log, unchanged');
  assert.deepEqual(checkControllerLog(log), []);
  const starts = log.filter((e) => e.type === 'EngineStarted').length;
  const forced = log.filter((e) => e.type === 'OperationStarted' && e.forced !== undefined).length;
  say(
    `check: the controller log (${log.length} events, ${c.logEvents.length - seen} new, ${starts} terms, ${forced} forced detaches) ` +
      'folds with the invariants, no gap, no row lost or changed, no detach of a volume in use unless forced',
  );
  say(
    `check: converged ${convergedMs} ms after the heal; leader ${await c.leader()}; ${await c.etcdAgreement()}`,
  );
  return [
    `schedule ${schedule.name}: passed in ${((Date.now() - startedMs) / 1000).toFixed(1)} s`,
    ...lines,
  ];
}
