/**
 * `vole chaos --cluster`: cluster mode (docs/cluster.md) on the virtual clock,
 * seeded — same seed, same run, byte for byte. Each seed draws a cluster and its steps
 * (cluster-draw.ts), runs them on the simulated cluster (cluster-sim.ts) with the
 * invariants checked after every step, then ends every fault, restarts everything that was
 * stopped, lets time pass and demands convergence (cluster-checks.ts).
 */
import { createHash } from 'node:crypto';
import { checkConvergence, checkInvariants, invariantChecks, storeLog } from './cluster-checks.js';
import {
  type ClusterPlan,
  type ClusterStep,
  clusterTimings,
  drawClusterPlan,
} from './cluster-draw.js';
import { runStep } from './cluster-faults.js';
import { type ClusterChaosOptions, ClusterSim } from './cluster-sim.js';

export interface ClusterRunResult {
  readonly seed: number;
  readonly ok: boolean;
  readonly failures: string[];
  readonly nodes: string[];
  readonly replicas: string[];
  readonly steps: readonly ClusterStep[];
  /** What happened, with virtual times: leaders, faults, kills, restarts. */
  readonly trace: string[];
  readonly faults: Record<string, number>;
  readonly cloudCalls: number;
  /** Detaches of a disk its node reported in use, forced with a recorded reason. */
  readonly forcedDetaches: number;
  readonly nodeCalls: number;
  readonly terms: number;
  readonly invariantChecks: number;
  /** The controller log in the store at the end: its head and a SHA-256 of its entries. */
  readonly log: { readonly head: number; readonly sha256: string };
}

/** The liveness phase: every killed replica started again; faults end on their own timers. */
async function liveness(sim: ClusterSim): Promise<void> {
  for (const replica of [...sim.replicas.values()])
    if (!replica.alive) sim.startReplica(replica.name);
  await sim.advance(clusterTimings.livenessMs);
}

/** Runs one seed (or a given plan) and returns what happened and what failed. */
export async function runClusterSeed(
  seedOrPlan: number | ClusterPlan,
  opts: ClusterChaosOptions = {},
): Promise<ClusterRunResult> {
  const plan = typeof seedOrPlan === 'number' ? drawClusterPlan(seedOrPlan) : seedOrPlan;
  const sim = new ClusterSim(plan, opts);
  opts.onSim?.(sim);
  try {
    await sim.start();
    for (const step of plan.steps) {
      await runStep(sim, step);
      checkInvariants(sim);
    }
    await liveness(sim);
    checkInvariants(sim);
    checkConvergence(sim);
  } catch (error) {
    sim.fail(`the simulation failed: ${(error as Error).stack ?? String(error)}`);
  } finally {
    for (const replica of sim.replicas.values()) replica.kill();
    for (const agent of sim.agents.values()) agent.stop();
    sim.reader?.client.kill();
    void sim.reader?.mirror.close();
  }
  const log = storeLog(sim);
  return {
    seed: plan.seed,
    ok: sim.failures.length === 0,
    failures: sim.failures,
    nodes: plan.nodes,
    replicas: plan.replicas,
    steps: plan.steps,
    trace: sim.trace,
    faults: sim.faults,
    cloudCalls: sim.cloud.calls.length,
    forcedDetaches: sim.cloud.calls.filter((c) => c.forced !== undefined).length,
    nodeCalls: sim.journal.length,
    terms: [...sim.retired, ...sim.replicas.values()].reduce((n, r) => n + r.terms.length, 0),
    invariantChecks: invariantChecks(sim),
    log: { head: log.length, sha256: createHash('sha256').update(log.join('\n')).digest('hex') },
  };
}

export interface ClusterChaosReport {
  readonly seed: number;
  readonly runs: number;
  readonly events: number;
  readonly calls: number;
  readonly terms: number;
  readonly faultsInjected: number;
  readonly invariantChecks: number;
  readonly failures: ClusterRunResult[];
}

/** Runs `runs` seeds from `seed` on. */
export async function clusterChaos(opts: {
  seed: number;
  runs: number;
  onProgress?: (done: number) => void;
  unfenced?: boolean;
}): Promise<ClusterChaosReport> {
  const failures: ClusterRunResult[] = [];
  let events = 0;
  let calls = 0;
  let terms = 0;
  let faultsInjected = 0;
  let checks = 0;
  for (let i = 0; i < opts.runs; i++) {
    const result = await runClusterSeed(
      (opts.seed + i) >>> 0,
      opts.unfenced === true ? { unfenced: true } : {},
    );
    events += result.log.head;
    calls += result.cloudCalls + result.nodeCalls;
    terms += result.terms;
    faultsInjected += Object.values(result.faults).reduce((a, b) => a + b, 0);
    checks += result.invariantChecks;
    if (!result.ok) failures.push(result);
    opts.onProgress?.(i + 1);
  }
  const { seed, runs } = opts;
  return { seed, runs, events, calls, terms, faultsInjected, invariantChecks: checks, failures };
}
