/**
 * `vole chaos --kube`: the node agents and two controller replicas of `vole run
 * --kubeconfig` and `vole controller --kubeconfig` against the simulated API server
 * (kube-sim.ts), on the virtual clock, seeded — same seed, same run. Each seed draws a
 * cluster and its steps (pods created and deleted, moving between nodes; faults of the API
 * server, of agents and of replicas), runs them with the write-time and per-step checks
 * (kube-checks.ts), then ends every fault, restarts everything stopped, lets time pass
 * and demands convergence.
 */
import { prng } from './chaos.js';
import { checkConvergence, checkCores, installWriteChecks } from './kube-checks.js';
import { KubeSim, type KubeSimOptions, kubeTimings } from './kube-sim.js';

export type KubeStep =
  | { readonly createPod: { readonly pod: string; readonly node: string; readonly disk: number } }
  | { readonly deletePod: { readonly pod: string } }
  | { readonly advance: number }
  /** The API server answers in seconds for this long. */
  | { readonly apiSlow: number }
  /** A share of requests fail (5xx, lost, timed out) for this long. */
  | { readonly apiFailing: { readonly rate: number; readonly durationMs: number } }
  | { readonly apiDropWatches: Record<string, never> }
  | { readonly apiCompact: Record<string, never> }
  /** The API server restarts: every watch cut, nothing answered for this long. */
  | { readonly apiRestart: number }
  /** A node's agent is cut off from the API server for this long. */
  | { readonly cutAgent: { readonly node: string; readonly durationMs: number } }
  /** A node's agent is down (killed) for this long. */
  | { readonly stopAgent: { readonly node: string; readonly durationMs: number } }
  /** The leading replica is killed; started again after this long. */
  | { readonly killLeader: number }
  /** The leading replica is cut off from the API server for this long. */
  | { readonly cutLeader: number };

export interface KubePlan {
  readonly seed: number;
  readonly nodes: string[];
  readonly replicas: string[];
  readonly disks: number;
  readonly steps: KubeStep[];
}

type Random = () => number;
const int = (r: Random, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
const pick = <T>(r: Random, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;

/** A fault step, drawn. The order of the draws is the seed's meaning: keep it. */
function drawFault(r: Random, nodes: readonly string[]): KubeStep {
  const which = int(r, 0, 8);
  if (which === 0) return { apiSlow: int(r, 5, 30) * 1_000 };
  if (which === 1)
    return { apiFailing: { rate: 0.1 + r() * 0.5, durationMs: int(r, 5, 60) * 1_000 } };
  if (which === 2) return { apiDropWatches: {} };
  if (which === 3) return { apiCompact: {} };
  if (which === 4) return { apiRestart: int(r, 1, 20) * 1_000 };
  if (which === 5)
    return { cutAgent: { node: pick(r, nodes), durationMs: int(r, 5, 120) * 1_000 } };
  if (which === 6)
    return { stopAgent: { node: pick(r, nodes), durationMs: int(r, 5, 120) * 1_000 } };
  if (which === 7) return { killLeader: int(r, 1, 30) * 1_000 };
  return { cutLeader: int(r, 5, 40) * 1_000 };
}

/**
 * How many steps a run draws: `full` (8 to 16, what a seed means by itself) or `short` (3
 * to 6: the same draws of steps and faults, fewer of them, then every fault over and a
 * minute to converge, not three; about a third of a full run's cost, for many seeds in CI).
 */
export type KubeRunLength = 'full' | 'short';

export function drawKubePlan(seed: number, length: KubeRunLength = 'full'): KubePlan {
  const r = prng(seed);
  const nodes = Array.from({ length: int(r, 2, 3) }, (_, i) => `node-${i + 1}`);
  const disks = int(r, 2, 3);
  const steps: KubeStep[] = [];
  const present = new Map<string, { node: string; disk: number }>();
  let serial = 0;
  for (let i = length === 'full' ? int(r, 8, 16) : int(r, 3, 6); i > 0; i--) {
    const roll = r();
    if (roll < 0.45) {
      const disk = int(r, 0, disks - 1);
      const holder = [...present].find(([, p]) => p.disk === disk);
      // Mostly the pod moves (its old one deleted first); sometimes both want the disk.
      if (holder !== undefined && r() < 0.8) {
        steps.push({ deletePod: { pod: holder[0] } });
        present.delete(holder[0]);
      }
      const pod = { pod: `pod-${serial++}`, node: pick(r, nodes), disk };
      steps.push({ createPod: pod });
      present.set(pod.pod, pod);
    } else if (roll < 0.6 && present.size > 0) {
      const [pod] = pick(r, [...present]);
      steps.push({ deletePod: { pod } });
      present.delete(pod);
    } else if (roll < 0.85) steps.push(drawFault(r, nodes));
    steps.push({ advance: int(r, 1, 40) * 1_000 });
  }
  return { seed, nodes, replicas: ['ctrl-a', 'ctrl-b'], disks, steps };
}

/** Ends a fault after `ms` on the virtual clock. */
function after(sim: KubeSim, ms: number, fn: () => void): void {
  sim.clock.setTimer(sim.clock.nowMs() + ms, fn);
}

function leader(sim: KubeSim): string | undefined {
  const lease = sim.api.peek('/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/vole-ad');
  const holder = (lease?.spec as { holderIdentity?: string } | undefined)?.holderIdentity;
  return holder === undefined || holder === '' ? undefined : holder;
}

/** One step on the simulation: the user's writes go on in the background, retried. */
function runStep(sim: KubeSim, step: KubeStep): Promise<void> | void {
  if ('advance' in step) return sim.advance(step.advance);
  if ('createPod' in step) return createPod(sim, step.createPod);
  if ('deletePod' in step) {
    const { pod } = step.deletePod;
    const node = sim.nodes.get(sim.present.get(pod)?.node ?? '');
    if (node !== undefined && (node.process === null || node.process.client.cut))
      sim.deletedWhileAway++;
    sim.present.delete(pod);
    const path = `/api/v1/namespaces/default/pods/${pod}`;
    // After its create has landed, as a user's `kubectl delete` after `kubectl create` is:
    // a delete that ran ahead of a create still being retried found nothing (404), and the
    // pod created after it stayed, mounted, with nobody meaning to keep it (seed 100151).
    const created = sim.podCreates.get(pod) ?? Promise.resolve();
    void created.then(() =>
      sim.userWrite(`delete ${pod}`, () => sim.admin.delete(path, { gracePeriodSeconds: 30 })),
    );
    return;
  }
  const name = Object.keys(step)[0]!;
  sim.count(name);
  sim.say(`fault: ${JSON.stringify(step)}`);
  runFault(sim, step);
}

function createPod(sim: KubeSim, p: { pod: string; node: string; disk: number }): void {
  sim.present.set(p.pod, { node: p.node, disk: p.disk });
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: p.pod, namespace: 'default' },
    spec: {
      nodeName: p.node,
      containers: [
        { name: 'app', image: 'app', volumeMounts: [{ name: 'data', mountPath: '/data' }] },
      ],
      volumes: [{ name: 'data', persistentVolumeClaim: { claimName: `claim-${p.disk}` } }],
    },
  };
  const created = sim.userWrite(`create ${p.pod}`, () =>
    sim.admin.post('/api/v1/namespaces/default/pods', pod),
  );
  sim.podCreates.set(p.pod, created);
}

function runFault(sim: KubeSim, step: KubeStep): void {
  const { api } = sim;
  if ('apiSlow' in step) api.slow(step.apiSlow);
  else if ('apiFailing' in step) {
    api.setFailRate(step.apiFailing.rate);
    after(sim, step.apiFailing.durationMs, () => api.setFailRate(0));
  } else if ('apiDropWatches' in step) api.dropWatches();
  else if ('apiCompact' in step) api.compact();
  else if ('apiRestart' in step) api.restart(step.apiRestart);
  else if ('cutAgent' in step) {
    const { node, durationMs } = step.cutAgent;
    sim.nodes.get(node)?.process?.client.setCut(true);
    after(sim, durationMs, () => sim.nodes.get(node)?.process?.client.setCut(false));
  } else if ('stopAgent' in step) {
    const { node, durationMs } = step.stopAgent;
    sim.stopAgent(node);
    after(sim, durationMs, () => sim.startAgent(node));
  } else if ('killLeader' in step) {
    const identity = leader(sim);
    if (identity === undefined) return;
    sim.killReplica(identity);
    after(sim, step.killLeader, () => sim.startReplica(identity));
  } else if ('cutLeader' in step) {
    const client = sim.replicas.get(leader(sim) ?? '')?.process?.client;
    client?.setCut(true);
    after(sim, step.cutLeader, () => client?.setCut(false));
  }
}

export interface KubeRunResult {
  readonly seed: number;
  /** How long a run (`vole chaos --kube --short` runs it again when short). */
  readonly length: KubeRunLength;
  readonly ok: boolean;
  readonly failures: string[];
  readonly plan: KubePlan;
  readonly trace: string[];
  readonly faults: Record<string, number>;
  readonly requests: number;
  readonly attaches: number;
  readonly detaches: number;
  /** Attaches the cloud refused: the disk was still attached to another node. */
  readonly refusals: number;
  readonly checks: number;
  readonly deletedWhileAway: number;
}

/** The end: every fault over, every process up, time to settle. */
async function liveness(sim: KubeSim, length: KubeRunLength): Promise<void> {
  sim.api.setFailRate(0);
  for (const node of sim.nodes.values()) {
    node.process?.client.setCut(false);
    sim.startAgent(node.name);
  }
  for (const replica of sim.replicas.values()) {
    replica.process?.client.setCut(false);
    sim.startReplica(replica.identity);
  }
  await sim.advance(length === 'full' ? kubeTimings.livenessMs : kubeTimings.shortLivenessMs);
}

/** Runs one seed (or a given plan) and returns what happened and what failed. */
export async function runKubeSeed(
  seedOrPlan: number | KubePlan,
  opts: KubeSimOptions & { length?: KubeRunLength } = {},
): Promise<KubeRunResult> {
  const plan = typeof seedOrPlan === 'number' ? drawKubePlan(seedOrPlan, opts.length) : seedOrPlan;
  const sim = new KubeSim(plan.seed, plan.nodes, plan.replicas, plan.disks, opts);
  installWriteChecks(sim);
  opts.onSim?.(sim);
  try {
    let made = false;
    void sim.setUp().then(() => (made = true));
    while (!made) await sim.advance(100);
    for (const node of plan.nodes) sim.startAgent(node);
    for (const identity of plan.replicas) sim.startReplica(identity);
    await sim.advance(5_000);
    for (const step of plan.steps) {
      await runStep(sim, step);
      checkCores(sim);
    }
    await liveness(sim, opts.length ?? 'full');
    checkCores(sim);
    checkConvergence(sim);
  } catch (error) {
    sim.fail(`the simulation failed: ${(error as Error).stack ?? String(error)}`);
  } finally {
    for (const node of sim.nodes.values()) sim.stopAgent(node.name);
    for (const replica of sim.replicas.values()) sim.killReplica(replica.identity);
  }
  const calls = sim.attacher.calls;
  return {
    seed: plan.seed,
    length: opts.length ?? 'full',
    ok: sim.failures.length === 0,
    failures: sim.failures,
    plan,
    trace: sim.trace,
    faults: sim.faults,
    requests: sim.api.requests,
    attaches: calls.filter((c) => c.op === 'attach').length,
    detaches: calls.filter((c) => c.op === 'detach').length,
    refusals: calls.filter((c) => c.op === 'refused').length,
    checks: sim.checks,
    deletedWhileAway: sim.deletedWhileAway,
  };
}

export interface KubeChaosReport {
  readonly seed: number;
  readonly runs: number;
  readonly requests: number;
  readonly attaches: number;
  readonly detaches: number;
  readonly faultsInjected: number;
  readonly invariantChecks: number;
  readonly deletedWhileAway: number;
  readonly failures: KubeRunResult[];
}

/** What a run adds to the report: its counts, and the whole run only when it failed. */
export interface KubeRunSummary {
  readonly seed: number;
  readonly requests: number;
  readonly attaches: number;
  readonly detaches: number;
  readonly faults: number;
  readonly checks: number;
  readonly deletedWhileAway: number;
  readonly failed?: KubeRunResult;
}

export function summarize(result: KubeRunResult): KubeRunSummary {
  return {
    seed: result.seed,
    requests: result.requests,
    attaches: result.attaches,
    detaches: result.detaches,
    faults: Object.values(result.faults).reduce((a, b) => a + b, 0),
    checks: result.checks,
    deletedWhileAway: result.deletedWhileAway,
    ...(result.ok ? {} : { failed: result }),
  };
}

export interface KubeChaosOptions {
  seed: number;
  runs: number;
  onProgress?: (done: number) => void;
  sim?: KubeSimOptions;
  length?: KubeRunLength;
  /**
   * Worker threads to run the seeds on (default 1: this thread). Each run is a seed on its
   * own, so the report is the same whatever the count; the seeds go to whichever worker is
   * free. A planted bug (`sim`) needs this thread: it holds functions.
   */
  workers?: number;
}

/** Runs `runs` seeds from `seed` on. */
export async function kubeChaos(opts: KubeChaosOptions): Promise<KubeChaosReport> {
  const seeds = Array.from({ length: opts.runs }, (_, i) => (opts.seed + i) >>> 0);
  const summaries: KubeRunSummary[] = [];
  const add = (summary: KubeRunSummary) => {
    summaries.push(summary);
    opts.onProgress?.(summaries.length);
  };
  const workers = Math.min(opts.workers ?? 1, seeds.length);
  if (workers > 1 && opts.sim === undefined) {
    const { runOnWorkers } = await import('./kube-chaos-workers.js');
    await runOnWorkers(seeds, workers, { length: opts.length ?? 'full' }, add);
  } else
    for (const seed of seeds)
      add(summarize(await runKubeSeed(seed, { ...opts.sim, length: opts.length ?? 'full' })));
  return report(opts, summaries);
}

function report(opts: KubeChaosOptions, summaries: readonly KubeRunSummary[]): KubeChaosReport {
  const sum = (f: (s: KubeRunSummary) => number) => summaries.reduce((a, s) => a + f(s), 0);
  const failures = summaries
    .flatMap((s) => (s.failed === undefined ? [] : [s.failed]))
    .sort((a, b) => a.seed - b.seed);
  return {
    seed: opts.seed,
    runs: opts.runs,
    requests: sum((s) => s.requests),
    attaches: sum((s) => s.attaches),
    detaches: sum((s) => s.detaches),
    faultsInjected: sum((s) => s.faults),
    invariantChecks: sum((s) => s.checks),
    deletedWhileAway: sum((s) => s.deletedWhileAway),
    failures,
  };
}
