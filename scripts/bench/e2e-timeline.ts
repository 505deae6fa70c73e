/**
 * Where a slow pod's time went: `node --import tsx --expose-gc scripts/bench/e2e-timeline.ts
 * [runs] [pods]` runs the e2e section's MemorySink and SQLite (FULL) variants alternating
 * (node attaches, as e2e-durable.ts), each on one engine that first takes
 * BENCH_WARM_PODS pods unmeasured (300 by default: the JIT's first work done, as in an agent
 * that has run a while). For every measured pod it keeps a timeline on the real clock (each
 * event as folded, each commit of the log, each garbage collection) and puts each pod over
 * BENCH_SLOW_MS (2.5 by default) under what took most of its time:
 *
 * - commit: inside the log's commits (fsync included);
 * - gc: inside a collection V8 reports (PerformanceObserver 'gc');
 * - stall: a gap of over 1.5 ms between two steps of the pod with neither inside, where the
 *   event loop did no work of the engine's: blocked or not on a CPU (see docs/performance-notes.md,
 *   "A slow pod's time", for what `perf sched` showed in such gaps);
 * - path: none of these; its steps were slower all along.
 *
 * Then it prints the BENCH_SHOW (3) slowest pods' timelines, each with the CLOCK_MONOTONIC
 * time the pod was added and its steps' offsets from it, to find a stall in `perf sched
 * record -k CLOCK_MONOTONIC` of the same run.
 */
import { PerformanceObserver } from 'node:perf_hooks';
import type { VoleEvent } from '../../src/events/index.js';
import { agentEventLoopNice, podLatencies, startE2eRun } from './e2e.js';
import { gc, quantile, scratchDir, sleepMs } from './util.js';

const runs = Number(process.argv[2] ?? 2);
const pods = Number(process.argv[3] ?? 1_000);
const warmPods = Number(process.env.BENCH_WARM_PODS ?? 300);
const slowMs = Number(process.env.BENCH_SLOW_MS ?? 2.5);
const show = Number(process.env.BENCH_SHOW ?? 3);
const gapMs = 10;
const stallMs = 1.5;

/** One step on a run's timeline: [start, end] (ms, performance.now()) and what it was. */
interface Mark {
  readonly startMs: number;
  readonly endMs: number;
  readonly what: string;
  readonly kind: 'added' | 'event' | 'commit' | 'gc';
}

let marks: Mark[] = [];
const monoOffsetMs = Number(process.hrtime.bigint()) / 1e6 - performance.now();
const mono = (ms: number) => ((ms + monoOffsetMs) / 1e3).toFixed(6);
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const endMs = entry.startTime + entry.duration;
    marks.push({ startMs: entry.startTime, endMs, what: `gc ${entry.name}`, kind: 'gc' });
  }
}).observe({ entryTypes: ['gc'] });

const describe = (event: VoleEvent): string => {
  const call = 'call' in event ? ` ${String(event.call)}` : '';
  const op = 'op' in event && typeof event.op === 'string' ? ` ${event.op}` : '';
  return `${event.type}${call}${op}`;
};

async function run(variant: 'memory' | 'sqlite', dir: string): Promise<number[]> {
  const onCommitted = (seconds: number) => {
    const endMs = performance.now();
    marks.push({ startMs: endMs - seconds * 1e3, endMs, what: 'commit', kind: 'commit' });
  };
  const { engine, clock, podAdds, finish } = await startE2eRun(
    variant,
    warmPods + pods,
    dir,
    onCommitted,
  );
  const warm = podAdds.splice(0, warmPods);
  if (warm.length > 0) await podLatencies(engine, clock, warm, { gapMs, label: 'warm-up' });
  await sleepMs(50);
  marks = [];
  const latencies = await podLatencies(engine, clock, podAdds, {
    gapMs,
    label: variant,
    onEvent: (event) => {
      const at = performance.now();
      marks.push({ startMs: at, endMs: at, what: describe(event), kind: 'event' });
    },
    onAdded: (uid, atMs) =>
      marks.push({ startMs: atMs, endMs: atMs, what: `added ${uid}`, kind: 'added' }),
  });
  await finish();
  return latencies;
}

type Cause = 'commit' | 'gc' | 'stall' | 'path';

/** A pod's timeline from its PodUpserted to its last setUp, and what took most of it. */
interface PodTimeline {
  readonly addedMs: number;
  readonly tookMs: number;
  readonly cause: Cause;
  readonly steps: readonly Mark[];
}

function timelines(all: readonly Mark[]): PodTimeline[] {
  const sorted = [...all].sort((a, b) => a.startMs - b.startMs);
  const adds = sorted.filter((m) => m.kind === 'added');
  return adds.map((added, i) => {
    const nextMs = adds[i + 1]?.startMs ?? added.startMs + gapMs;
    const window = sorted.filter((m) => m.startMs >= added.startMs && m.startMs < nextMs);
    const last = window.filter((m) => m.what === 'CallSucceeded setUp').at(-1);
    const endMs = last?.endMs ?? nextMs;
    const steps = window.filter((m) => m.startMs <= endMs);
    const inside = (kind: Mark['kind']) =>
      steps.filter((m) => m.kind === kind).reduce((sum, m) => sum + (m.endMs - m.startMs), 0);
    let stall = 0;
    let reachedMs = added.startMs;
    for (const step of steps) {
      if (step.kind === 'event' || step.kind === 'added')
        stall = Math.max(stall, step.startMs - reachedMs);
      reachedMs = Math.max(reachedMs, step.endMs);
    }
    const parts: [Cause, number][] = [
      ['commit', inside('commit')],
      ['gc', inside('gc')],
      ['stall', stall >= stallMs ? stall : 0],
    ];
    const [cause, ms] = parts.reduce((a, b) => (b[1] > a[1] ? b : a));
    return {
      addedMs: added.startMs,
      tookMs: endMs - added.startMs,
      cause: ms > 0 ? cause : 'path',
      steps,
    };
  });
}

function print(variant: string, latencies: readonly number[], pods: readonly PodTimeline[]): void {
  const slow = pods.filter((p) => p.tookMs > slowMs);
  const counts = new Map<Cause, number>();
  for (const p of slow) counts.set(p.cause, (counts.get(p.cause) ?? 0) + 1);
  const causes = (['commit', 'gc', 'stall', 'path'] as const)
    .map((c) => `${c} ${counts.get(c) ?? 0}`)
    .join(', ');
  process.stdout.write(
    `${variant}: p50 ${quantile(latencies, 0.5).toFixed(2)} / p99 ${quantile(latencies, 0.99).toFixed(2)} ms; ` +
      `${slow.length} pods over ${slowMs} ms: ${causes}\n`,
  );
  const slowest = [...pods].sort((a, b) => b.tookMs - a.tookMs).slice(0, show);
  for (const p of slowest) {
    process.stdout.write(
      `  ${p.tookMs.toFixed(2)} ms (${p.cause}), added at mono ${mono(p.addedMs)}\n`,
    );
    for (const step of p.steps) {
      const took =
        step.endMs > step.startMs ? ` (${(step.endMs - step.startMs).toFixed(2)} ms)` : '';
      process.stdout.write(`    +${(step.startMs - p.addedMs).toFixed(3)} ${step.what}${took}\n`);
    }
  }
}

const dir = scratchDir('e2e-timeline');
process.stdout.write(
  `event loop thread at nice ${agentEventLoopNice().nice}; ${warmPods} pods unmeasured a run\n`,
);
for (let i = 1; i <= runs; i++) {
  for (const variant of ['memory', 'sqlite'] as const) {
    gc();
    const latencies = await run(variant, dir);
    print(`run ${i}, ${variant}`, latencies, timelines(marks));
  }
}
