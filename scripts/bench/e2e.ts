/**
 * End to end: the real Engine on the real clock with the instant fake plugins (no
 * faults, no delays), node-attach mode. Pods arrive one every `gapMs` (their PVs and PVCs
 * exist beforehand); each has a PVC-backed attachable disk (attach, waitForAttach,
 * mountDevice, setUp) and an emptyDir (verify, setUp). The latency of a pod is from just
 * before its PodUpserted is appended to the fold of the event after which every volume of
 * it is mounted (podWaitStatus ready, what WaitForAttachAndMount waits for).
 *
 * Side by side in every run, on the same arrival schedule: the event-driven engine with a
 * MemorySink, the same with the SQLite log (durability full, group commit), and the same
 * engine driven by a 100 ms polling loop (polling.ts, the kubelet's design).
 */
import { kubeletCore } from '../../src/engine/cores.js';
import { getPriority } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { Engine } from '../../src/engine/engine.js';
import { Executor } from '../../src/execute/executor.js';
import {
  eventLoopNiceDefault,
  parseNice,
  setEventLoopNice,
} from '../../src/host/event-loop-priority.js';
import type { Operation } from '../../src/kubelet/planner.js';
import type { World } from '../../src/kubelet/types.js';
import { type EventSink, MemorySink } from '../../src/engine/sink.js';
import { openSqliteLog } from '../../src/agent/sqlite-log.js';
import { type Clock, RealClock } from '../../src/clock.js';
import { UniquePodName, UniqueVolumeName } from '../../src/ids.js';
import type { NewEvent, VoleEvent } from '../../src/events/index.js';
import type { FakeCallRecord } from '../../src/plugins/fake.js';
import { podWaitStatus } from '../../src/kubelet/index.js';
import { benchPlugins, diskVolumeName, podEvents } from './generate.js';
import { pollEvery } from './polling.js';
import {
  type CommitRecord,
  floorQuantile,
  recordCommits,
  replayCommitsMs,
} from './commit-floor.js';
import {
  type Figure,
  gc,
  median,
  progress,
  quantile,
  removeDb,
  scratchDir,
  type SectionResult,
  sleepMs,
} from './util.js';

export interface E2eOptions {
  readonly pods: number;
  readonly runs: number;
}

type Variant = 'memory' | 'sqlite' | 'polling';

const gapMs = 10;
/** The pods' arrival gap (ms): commit-floor.ts replays a run's commits as far apart. */
export const e2eGapMs = gapMs;

/** Where a SQLite run in `dir` keeps its log; it stays until the next SQLite run there. */
export function e2eLogPath(dir: string): string {
  return join(dir, 'e2e.db');
}
const pollPeriodMs = 100;

/**
 * Who attaches: 'node', the engine itself (attach, then mount: two operations that touch
 * the host); 'controller', the attach/detach controller, as the kubelet runs by default
 * (the disks are in node.status.volumesAttached before the pods come, and the node's
 * status report answers each pod's VolumesInUse at once; the engine verifies, which
 * touches nothing, then mounts).
 */
export type AttachMode = 'node' | 'controller';

/** A run's engine, started, with the PVs and PVCs of its pods already in its world. */
export interface E2eRun {
  readonly engine: Engine<World, Operation>;
  readonly clock: Clock;
  /** Each pod's PodUpserted, in order, for podLatencies to append one every gapMs. */
  readonly podAdds: NewEvent[];
  /** Waits for running operations, then stops the engine, the poller and the log. */
  finish(): Promise<void>;
}

/**
 * Starts a run of `variant` with `pods` pods' PVs and PVCs appended (and, when the
 * controller attaches, their disks listed attached). `onCommitted` hears each commit's
 * duration (s) of the SQLite log (e2e-durable.ts prints them beside the latencies).
 */
export async function startE2eRun(
  variant: Variant,
  pods: number,
  dir: string,
  onCommitted?: (seconds: number, events: number) => void,
  attachMode: AttachMode = 'node',
): Promise<E2eRun> {
  const clock = new RealClock();
  const journal: FakeCallRecord[] = [];
  let sink: EventSink;
  if (variant === 'sqlite') {
    const path = e2eLogPath(dir);
    removeDb(path);
    sink = openSqliteLog(path, kubeletCore, { durability: 'full' }).sink;
    if (onCommitted !== undefined) sink.onCommitted?.(onCommitted);
  } else {
    sink = new MemorySink();
  }
  const engine = new Engine({
    core: kubeletCore,
    runner: (host) => new Executor(host),
    config: { node: 'node-1', controllerAttachDetach: attachMode === 'controller' },
    plugins: benchPlugins(clock, journal),
    clock,
    sink,
    logger: pino({ level: 'silent' }),
  });
  const poller = variant === 'polling' ? pollEvery(engine, pollPeriodMs) : undefined;
  engine.start();
  engine.append({ type: 'SourcesReady', tsMs: clock.nowMs() });
  // The PVs and PVCs exist before the pods arrive.
  const podAdds: NewEvent[] = [];
  for (let i = 0; i < pods; i++) {
    const { events } = podEvents(i, clock.nowMs());
    for (const event of events.slice(0, 2)) engine.append(event);
    podAdds.push(events[2]!);
  }
  if (attachMode === 'controller') controllerAttached(engine, clock, pods);
  await sleepMs(pollPeriodMs * 2);
  const finish = async () => {
    poller?.stop();
    await engine.drainAndStop();
    sink.close();
  };
  return { engine, clock, podAdds, finish };
}

/** One run of `variant` (startE2eRun): each pod's latency (ms). */
export async function runOnce(
  variant: Variant,
  pods: number,
  dir: string,
  onCommitted?: (seconds: number, events: number) => void,
  attachMode: AttachMode = 'node',
): Promise<number[]> {
  const run = await startE2eRun(variant, pods, dir, onCommitted, attachMode);
  const latencies = await podLatencies(run.engine, run.clock, run.podAdds, {
    gapMs,
    label: variant,
  });
  await run.finish();
  return latencies;
}

/**
 * The controller's side, for AttachMode 'controller': every pod's disk listed attached in
 * node.status.volumesAttached, and the node's status report made as soon as a pod is
 * added, where the kubelet's status loop would make it within its period. The report
 * names the disks not verified yet: a full list would put every disk's name in the log
 * again for each pod, and being reported in use matters only before the verify.
 */
function controllerAttached(engine: Engine<World, Operation>, clock: Clock, pods: number): void {
  const volumesAttached = Array.from({ length: pods }, (_, i) => ({
    name: diskVolumeName(i),
    devicePath: `/dev/fake-${i}`,
  }));
  engine.append({
    type: 'NodeStatusObserved',
    tsMs: clock.nowMs(),
    node: 'node-1',
    volumesAttached,
  });
  const unverified = new Set<string>();
  engine.subscribe((event, world) => {
    if (event.type !== 'PodUpserted') return;
    unverified.add(diskVolumeName(Number((event.pod.metadata.uid ?? '').slice('p-'.length))));
    for (const volume of unverified)
      if (world.attachments.get(UniqueVolumeName(volume))?.value.startsWith('attached'))
        unverified.delete(volume);
    const volumes = [...unverified];
    queueMicrotask(() => {
      engine.append({ type: 'VolumesReportedInUse', tsMs: clock.nowMs(), volumes });
    });
  });
}

/** What podLatencies watches: each event as folded, and each pod as it is added. */
export interface LatencyHooks {
  readonly gapMs: number;
  /** Names the run in the timeout's error. */
  readonly label: string;
  readonly onEvent?: (event: VoleEvent) => void;
  readonly onAdded?: (uid: string, atMs: number) => void;
}

/**
 * Appends `podAdds` one every `gapMs` on the real clock and answers each pod's latency
 * (ms) from just before its PodUpserted to the fold after which all its volumes are
 * mounted; rejects when some are not mounted 60 s after the last.
 */
export async function podLatencies(
  engine: Engine<World, Operation>,
  clock: Clock,
  podAdds: readonly NewEvent[],
  hooks: LatencyHooks,
): Promise<number[]> {
  const addedAt = new Map<string, number>();
  const latencies: number[] = [];
  let resolveDone: () => void = () => {};
  const done = new Promise<void>((resolve) => (resolveDone = resolve));
  engine.subscribe((event, world) => {
    hooks.onEvent?.(event);
    if (event.type !== 'CallSucceeded' || event.call !== 'setUp') return;
    const pod = world.running.get(event.opId as never)?.pod;
    if (pod === undefined || pod === null) return;
    const t0 = addedAt.get(pod);
    if (t0 === undefined || !podWaitStatus(world, UniquePodName(pod)).ready) return;
    latencies.push(performance.now() - t0);
    addedAt.delete(pod);
    if (latencies.length === podAdds.length) resolveDone();
  });
  const start = performance.now();
  for (let i = 0; i < podAdds.length; i++) {
    const wait = start + i * hooks.gapMs - performance.now();
    if (wait > 0) await sleepMs(wait);
    const event = podAdds[i]!;
    const uid = (event as { pod: { metadata: { uid: string } } }).pod.metadata.uid;
    const atMs = performance.now();
    addedAt.set(uid, atMs);
    hooks.onAdded?.(uid, atMs);
    engine.append({ ...event, tsMs: clock.nowMs() });
  }
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    const message = `${hooks.label}: ${podAdds.length - latencies.length} pods not mounted after 60 s`;
    timer = setTimeout(() => reject(new Error(message)), 60_000);
  });
  await Promise.race([done, timeout]).finally(() => clearTimeout(timer));
  return latencies;
}

/** One kind of run of the section: a sink variant and who attaches. */
interface Arm {
  readonly variant: Variant;
  readonly attachMode: AttachMode;
  /** How the figures name it. */
  readonly label: string;
}

const arms: readonly Arm[] = [
  { variant: 'memory', attachMode: 'node', label: 'event-driven, MemorySink' },
  { variant: 'sqlite', attachMode: 'node', label: 'event-driven, SQLite (FULL)' },
  { variant: 'polling', attachMode: 'node', label: '100 ms polling loop' },
  { variant: 'memory', attachMode: 'controller', label: 'controller attaches, MemorySink' },
  { variant: 'sqlite', attachMode: 'controller', label: 'controller attaches, SQLite (FULL)' },
];

/**
 * The event loop's priority as `vole run` sets it as root (src/host/event-loop-priority.ts):
 * both variants of a run share it. BENCH_EVENT_LOOP_NICE=keep leaves the process's, or
 * names another value. Answers how to put back the one before.
 */
export function agentEventLoopNice(): { nice: string; restore: () => void } {
  const before = getPriority(0);
  const asked = process.env.BENCH_EVENT_LOOP_NICE ?? String(eventLoopNiceDefault);
  if (asked === 'keep') return { nice: `${before} (kept)`, restore: () => {} };
  const outcome = setEventLoopNice(parseNice(asked));
  const nice = `${outcome.nice}${outcome.refused === undefined ? '' : ` (${outcome.refused})`}`;
  return { nice, restore: () => void setEventLoopNice(before) };
}

export async function runE2e(opts: E2eOptions): Promise<SectionResult> {
  const priority = agentEventLoopNice();
  try {
    return await e2eSection(opts, priority.nice);
  } finally {
    priority.restore();
  }
}

async function e2eSection(opts: E2eOptions, nice: string): Promise<SectionResult> {
  const dir = scratchDir('e2e');
  progress(`  e2e: the event loop thread at nice ${nice}, as the agent runs it`);
  const p50 = arms.map((): number[] => []);
  const p99 = arms.map((): number[] => []);
  const floorsMs: number[] = [];
  // A short warm-up of each arm (JIT), not recorded.
  for (const arm of arms) await runOnce(arm.variant, 50, dir, undefined, arm.attachMode);
  for (let run = 0; run < opts.runs; run++) {
    let memoryMs: number[] = [];
    for (const [i, arm] of arms.entries()) {
      gc();
      const commits: CommitRecord[] = [];
      const latencies = await runOnce(
        arm.variant,
        opts.pods,
        dir,
        recordCommits(commits),
        arm.attachMode,
      );
      p50[i]!.push(quantile(latencies, 0.5));
      p99[i]!.push(quantile(latencies, 0.99));
      progress(
        `  e2e run ${run + 1}/${opts.runs}, ${arm.label}: p50 ${quantile(latencies, 0.5).toFixed(2)} ms, ` +
          `p99 ${quantile(latencies, 0.99).toFixed(2)} ms, max ${Math.max(...latencies).toFixed(2)} ms`,
      );
      if (i === 0) memoryMs = latencies;
      if (i === 1) floorsMs.push(await floorP99Ms(dir, commits, memoryMs));
    }
  }
  const pods = `${opts.pods.toLocaleString('en-US')} pods`;
  const figures: Figure[] = arms.flatMap((arm, i) => [
    latencyFigure(`p50, ${arm.label}, ${pods}`, p50[i]!),
    latencyFigure(`p99, ${arm.label}, ${pods}`, p99[i]!, i === 0 ? 5 : undefined),
  ]);
  const ratio = (of: number, to: number) => p99[of]!.map((v, run) => v / p99[to]![run]!);
  // What durability adds in ms: the ratio also moves with the in-memory p99's own tail.
  const added = (of: number, to: number, what: string): Figure => {
    const runs = p99[of]!.map((v, run) => v - p99[to]![run]!);
    const note = 'the durable commit a pod waits on, and its wake-up; no target';
    return { section: 'e2e', name: what, value: median(runs), unit: 'ms', runs, note };
  };
  figures.push(
    ratioFigure('SQLite (FULL) p99 ÷ MemorySink p99, same run', ratio(1, 0), '≤', 1.5),
    added(1, 0, 'SQLite (FULL) p99 − MemorySink p99, same run'),
    {
      section: 'e2e',
      name: "the same ratio's floor on this disk: in-memory pods of the run + its commits replayed alone",
      value: median(floorsMs.map((floorMs, run) => floorMs / p99[0]![run]!)),
      unit: '×',
      runs: floorsMs.map((floorMs, run) => floorMs / p99[0]![run]!),
      note: 'commit-floor.ts: what an engine adding only its one commit a pod would measure; no target',
    },
    {
      section: 'e2e',
      name: 'SQLite (FULL) p99 ÷ that floor, same run',
      value: median(floorsMs.map((floorMs, run) => p99[1]![run]! / floorMs)),
      unit: '×',
      runs: floorsMs.map((floorMs, run) => p99[1]![run]! / floorMs),
      note: 'what the engine adds to a pod beyond its one commit on this disk; no target',
    },
    ratioFigure('polling p99 ÷ event-driven p99 (MemorySink)', ratio(2, 0), '≥', 20),
    ratioFigure(
      'SQLite (FULL) p99 ÷ MemorySink p99, same run, controller attaches',
      ratio(4, 3),
      '≤',
      1.5,
    ),
    added(4, 3, 'SQLite (FULL) p99 − MemorySink p99, same run, controller attaches'),
  );
  return {
    section: 'e2e',
    figures,
    details: { arrivalGapMs: gapMs, pollPeriodMs, volumesPerPod: 2 },
  };
}

/**
 * The disk's floor for the run's SQLite arm (commit-floor.ts): the p99 (ms) of an in-memory
 * pod of the same run plus one of the run's commits replayed alone.
 */
async function floorP99Ms(
  dir: string,
  commits: readonly CommitRecord[],
  memoryMs: readonly number[],
): Promise<number> {
  // The first two commits are EngineStarted's and the PVs' and PVCs' before the pods.
  const replayedMs = await replayCommitsMs(e2eLogPath(dir), commits, {
    skip: 2,
    gapMs,
    dir,
    max: 500,
  });
  const floorMs = floorQuantile(memoryMs, replayedMs, 0.99);
  progress(
    `  e2e: the run's commits alone p50 ${quantile(replayedMs, 0.5).toFixed(2)} / p99 ` +
      `${quantile(replayedMs, 0.99).toFixed(2)} ms; floor p99 ${floorMs.toFixed(2)} ms, ` +
      `${(floorMs / quantile(memoryMs, 0.99)).toFixed(2)}×`,
  );
  return floorMs;
}

function latencyFigure(what: string, runs: number[], targetMs?: number): Figure {
  return {
    section: 'e2e',
    name: `pod added → all volumes mounted, ${what}`,
    value: median(runs),
    unit: 'ms',
    runs,
    ...(targetMs === undefined ? {} : { target: `< ${targetMs} ms`, met: median(runs) < targetMs }),
  };
}

function ratioFigure(name: string, runs: number[], sense: '≤' | '≥', bound: number): Figure {
  const value = median(runs);
  return {
    section: 'e2e',
    name,
    value,
    unit: '×',
    runs,
    target: `${sense} ${bound}×`,
    met: sense === '≤' ? value <= bound : value >= bound,
  };
}
