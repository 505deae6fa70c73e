/**
 * The durable pod-ready row alone, for measuring its noise: `node --import tsx --expose-gc
 * scripts/bench/e2e-durable.ts [runs] [pods] [node|controller]` (who attaches, e2e.ts
 * AttachMode; node by default) runs the e2e section's MemorySink and SQLite
 * (FULL) variants side by side, alternating, and prints each run's p50 / p99, the ratio of
 * the p99s and their difference (ms) with the 1-minute load average (the polling variant,
 * 10 s a run, is left out), and the SQLite log's commits: how many, and their p50 / p99
 * (ms), fsync included; then the disk's floor (commit-floor.ts): the run's own commits
 * written again alone (at most 500), their p50 / p99, and the p99 of an in-memory pod of the
 * run plus one of them, with its ratio over the in-memory p99, and the SQLite p99 over it
 * (what the engine adds beyond its one commit a pod). The event loop runs at the
 * agent's priority (BENCH_EVENT_LOOP_NICE: e2e.ts agentEventLoopNice).
 */
import { loadavg } from 'node:os';
import {
  type CommitRecord,
  floorQuantile,
  recordCommits,
  replayCommitsMs,
} from './commit-floor.js';
import { type AttachMode, agentEventLoopNice, e2eGapMs, e2eLogPath, runOnce } from './e2e.js';
import { gc, quantile, scratchDir } from './util.js';

const runs = Number(process.argv[2] ?? 3);
const pods = Number(process.argv[3] ?? 1_000);
const attachMode = (process.argv[4] ?? 'node') as AttachMode;
if (attachMode !== 'node' && attachMode !== 'controller')
  throw new Error(`attach mode ${attachMode}: say node or controller`);
const dir = scratchDir('e2e-durable');
process.stdout.write(`event loop thread at nice ${agentEventLoopNice().nice}\n`);
// A short warm-up of each variant (JIT), not recorded.
await runOnce('memory', 50, dir, undefined, attachMode);
await runOnce('sqlite', 50, dir, undefined, attachMode);
for (let run = 1; run <= runs; run++) {
  const p99: number[] = [];
  const parts: string[] = [];
  const commitRecords: CommitRecord[] = [];
  let memoryMs: number[] = [];
  for (const variant of ['memory', 'sqlite'] as const) {
    gc();
    const latencies = await runOnce(variant, pods, dir, recordCommits(commitRecords), attachMode);
    if (variant === 'memory') memoryMs = latencies;
    p99.push(quantile(latencies, 0.99));
    parts.push(
      `${variant} p50 ${quantile(latencies, 0.5).toFixed(2)} / p99 ${quantile(latencies, 0.99).toFixed(2)} ms`,
    );
  }
  const ratio = (p99[1]! / p99[0]!).toFixed(2);
  const addedMs = (p99[1]! - p99[0]!).toFixed(2);
  // The first two are EngineStarted's and the one of the PVs and PVCs before the pods.
  const commits = commitRecords.slice(2).map((commit) => commit.ms);
  const commitFigures =
    `${commits.length} commits p50 ${quantile(commits, 0.5).toFixed(2)} / ` +
    `p99 ${quantile(commits, 0.99).toFixed(2)} ms`;
  const replayedMs = await replayCommitsMs(e2eLogPath(dir), commitRecords, {
    skip: 2,
    gapMs: e2eGapMs,
    dir,
    max: 500,
  });
  const floorMs = floorQuantile(memoryMs, replayedMs, 0.99);
  const floorFigures =
    `alone p50 ${quantile(replayedMs, 0.5).toFixed(2)} / p99 ${quantile(replayedMs, 0.99).toFixed(2)} ms; ` +
    `floor p99 ${floorMs.toFixed(2)} ms, ${(floorMs / p99[0]!).toFixed(2)}×; ` +
    `sqlite p99 ÷ floor ${(p99[1]! / floorMs).toFixed(2)}×`;
  process.stdout.write(
    `run ${run}: ${parts.join(', ')}; ratio ${ratio}×, +${addedMs} ms (load ${loadavg()[0]!.toFixed(1)}); ` +
      `${commitFigures}; ${floorFigures}\n`,
  );
}
