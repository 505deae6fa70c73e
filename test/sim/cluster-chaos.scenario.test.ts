/**
 * `vole chaos --cluster`: cluster mode on the virtual clock. Seeded runs keep the
 * invariants and converge; a seed is a run, byte for byte; and a deliberately broken
 * fencing rule (a deposed leader allowed to write) is caught by the same checks.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  type ClusterRunResult,
  clusterChaos,
  runClusterSeed,
} from '../../src/sim/cluster-chaos.js';
import { loggedEvents } from '../../src/sim/cluster-checks.js';
import { type ClusterPlan, drawClusterPlan, podOf } from '../../src/sim/cluster-draw.js';
import type { ClusterSim } from '../../src/sim/cluster-sim.js';

const runs = Number(process.env.VOLE_CLUSTER_CHAOS_RUNS ?? 40);
const seed = Number(process.env.VOLE_CLUSTER_CHAOS_SEED ?? 20_261_125);

test(`cluster chaos: ${runs} seeded runs from seed ${seed} keep the invariants and converge`, async () => {
  const report = await clusterChaos({ seed, runs });
  const failed = report.failures.map((f) => `seed ${f.seed}: ${f.failures.join('; ')}`);
  assert.deepEqual(failed, []);
  assert.ok(
    report.terms > runs,
    `leadership changed hands (${report.terms} terms in ${runs} runs)`,
  );
  assert.ok(
    report.invariantChecks > report.events,
    `invariants were checked (${report.invariantChecks})`,
  );
  process.stdout.write(
    `# cluster chaos: ${report.runs} runs, ${report.events} controller log events, ${report.calls} calls, ` +
      `${report.terms} terms, ${report.faultsInjected} faults, ${report.invariantChecks} invariant checks\n`,
  );
});

test('cluster chaos: the seeds cover every fault, and leaders are killed in the middle of an attach', async () => {
  const faults = new Set<string>();
  let midAttach = 0;
  let forced = 0;
  let recorded = 0;
  const fired = { midSnapshot: 0, atCommit: 0, readerReloaded: 0 };
  for (let i = 0; i < 12; i++) {
    let sim: ClusterSim | undefined;
    const result = await runClusterSeed(seed + i, { onSim: (s) => (sim = s) });
    for (const kind of Object.keys(result.faults)) faults.add(kind);
    midAttach += result.trace.filter((line) => line.includes('in the middle of an attach')).length;
    const said = (text: string) => result.trace.filter((line) => line.includes(text)).length;
    fired.midSnapshot += said('(SIGKILL) in the middle of writing a snapshot');
    fired.atCommit += said('(SIGKILL) as its log commit landed');
    fired.readerReloaded += said('compacted away (it starts at');
    forced += result.forcedDetaches;
    // Each forced detach's reason is in the controller log.
    recorded += loggedEvents(sim!).filter(
      (e) => e.type === 'OperationStarted' && e.op === 'detach' && e.forced === 'timeout',
    ).length;
  }
  const kinds = ['killLeader', 'storeLeaderLost', 'stopAgent', 'noSpace', 'partitionLeader'];
  kinds.push('killLeaderMidSnapshot', 'crashMidCommit', 'partitionReader', 'compactStore');
  for (const kind of kinds) assert.ok(faults.has(kind), `a seed injected ${kind}`);
  // The faults in what the real code now covers came at their moment, and were survived.
  assert.ok(fired.midSnapshot > 0, 'a leader was killed with a snapshot half written');
  assert.ok(fired.atCommit > 0, 'a leader was killed as a log commit landed');
  assert.ok(fired.readerReloaded > 0, 'the log was compacted past its reader, which reloaded');
  assert.ok(midAttach > 0, 'a leader was killed with an attach running');
  assert.ok(forced > 0, 'a node agent stopped past maxWaitForUnmount got its disk force-detached');
  assert.ok(
    recorded >= forced,
    `every forced detach has its reason in the log (${recorded} of ${forced})`,
  );
});

test('cluster chaos: the same seed is the same run, byte for byte', async () => {
  const first = JSON.stringify(await runClusterSeed(seed + 3));
  const again = JSON.stringify(await runClusterSeed(seed + 3));
  assert.equal(first, again);
  assert.notEqual(first, JSON.stringify(await runClusterSeed(seed + 4)));
  assert.deepEqual(drawClusterPlan(seed + 3), drawClusterPlan(seed + 3));
});

/**
 * The leader is cut off from the store past its lease while its pod moves to another node.
 * A correct leader stops on its own deadline and the standby takes over; a deposed leader
 * allowed to write (`unfenced`: it never notices, and its writes compare nothing) commits
 * the events it receives once the partition heals over the new leader's.
 */
const zombiePlan: ClusterPlan = {
  seed: 0,
  nodes: ['node-1', 'node-2'],
  replicas: ['controller-a', 'controller-b'],
  disks: 1,
  steps: [
    { addPod: podOf(0, 'node-1', 0, false) },
    { advance: 20_000 },
    { partitionLeader: 15_000 },
    { advance: 7_000 },
    { removePod: { uid: 'uid-0' } },
    { addPod: podOf(1, 'node-2', 0, false) },
    { advance: 60_000 },
  ],
};

function lostEvents(result: ClusterRunResult): string[] {
  return result.failures.filter((f) => f.includes('an event was lost'));
}

test('cluster chaos: a deposed leader cut off from the store steps down, and the pod moves', async () => {
  const result = await runClusterSeed(zombiePlan);
  assert.deepEqual(result.failures, []);
  assert.ok(
    result.trace.some((line) => /controller-a: leadership lost .*no lease keepalive/.test(line)),
    result.trace.join('\n'),
  );
  assert.ok(
    result.trace.some((line) => line.includes('controller-b: leading')),
    result.trace.join('\n'),
  );
});

test('cluster chaos: a deposed leader allowed to write is caught: events of the log are lost', async () => {
  const result = await runClusterSeed(zombiePlan, { unfenced: true });
  assert.equal(result.ok, false);
  assert.ok(lostEvents(result).length > 0, result.failures.join('\n'));
});

/**
 * A pod removed and scheduled back onto its node while the store is out of space: the
 * detach decided on the node's report waits for its log commit, and by then the node
 * reports the disk in use again. Refused without a call, the disk stays attached, and the
 * controller's report, that its start had left it out of, names it again.
 */
const backWhileFullPlan: ClusterPlan = {
  seed: 0,
  nodes: ['node-1'],
  replicas: ['controller-a'],
  disks: 1,
  steps: [
    { addPod: podOf(0, 'node-1', 0, false) },
    { advance: 500 },
    { removePod: { uid: 'uid-0' } },
    { noSpace: 8_000 },
    { addPod: podOf(1, 'node-1', 0, false) },
    { advance: 60_000 },
  ],
};

test('cluster chaos: a pod back on its node while a detach of its disk waits: the disk is reported attached again', async () => {
  let sim: ClusterSim | undefined;
  const result = await runClusterSeed(backWhileFullPlan, { onSim: (s) => (sim = s) });
  assert.deepEqual(result.failures, []);
  const refused = loggedEvents(sim!).filter(
    (e) => e.type === 'OperationFinished' && e.error?.message.includes('reports it in use again'),
  );
  assert.equal(refused.length, 1, 'the detach was refused as in use');
  const published = sim!.store.get(sim!.keys.volumesAttached('node-1'))?.value.toString();
  assert.equal(
    published,
    JSON.stringify({
      volumesAttached: [{ name: 'fake.disk/disk-0', devicePath: '/dev/cloud/fake.disk/disk-0' }],
    }),
  );
});

/**
 * Seeds that once failed, kept as regression runs. In each, a detach decided while the log
 * waited (the store out of space) found the node reporting the disk in use again and
 * ended without a call; the disk stayed attached but out of the node's volumesAttached, so
 * the pod scheduled back onto the node waited for it to the end (1 of 2 volumes mounted).
 * - 3237: two agents stopped for 84 s and 133 s, the store out of space for 8 s, the log's
 *   reader cut off; 2 forced detaches.
 * - 3328: a crash mid-commit, the leader killed, a replica started, the store out of space.
 */
for (const kept of [3237, 3328]) {
  test(`cluster chaos: seed ${kept}, a detach refused as in use, converges`, async () => {
    let sim: ClusterSim | undefined;
    const result = await runClusterSeed(kept, { onSim: (s) => (sim = s) });
    assert.deepEqual(result.failures, []);
    const refused = loggedEvents(sim!).filter(
      (e) => e.type === 'OperationFinished' && e.error?.message.includes('reports it in use again'),
    );
    assert.ok(refused.length > 0, 'the seed still draws a detach refused as in use');
  });
}

/**
 * Kept: seed 8000589 once detached a disk its node had just reported in use. The store's
 * leader member was lost; a detach of disk-1 from node-1 was decided on a report without
 * it, and its OperationStarted's commit landed in the same instant as the node's put of
 * volumesInUse naming it (pod-5 scheduled back), before the controller's watch brought the
 * put: a re-check of the world's copy let the call go. The detach now writes the node's
 * volumesAttached without the disk and reads volumesInUse from the store itself.
 */
test('cluster chaos: seed 8000589, a node in-use report not yet watched, refuses the detach', async () => {
  let sim: ClusterSim | undefined;
  const result = await runClusterSeed(8_000_589, { onSim: (s) => (sim = s) });
  assert.deepEqual(result.failures, []);
  const refused = loggedEvents(sim!).filter(
    (e) =>
      e.type === 'OperationFinished' &&
      e.error?.message.includes('node node-1 reports it in use again') === true,
  );
  assert.ok(refused.length > 0, 'the seed still draws the detach refused as in use');
  const forcedInUse = sim!.cloud.calls.filter((c) => c.call === 'detach' && c.forced !== undefined);
  assert.deepEqual(forcedInUse, [], 'no detach of a disk in use, forced or not');
});
