/**
 * CSI: pod added → all volumes mounted through a CSI driver on a unix socket, beside
 * the built-in (in-process) plugin, in the same run on the same arrival schedule as e2e.ts.
 * The driver is a separate process that answers every RPC at once (null-driver.ts), so
 * the difference is what the gRPC boundary adds per pod: ControllerPublishVolume,
 * NodeStageVolume and NodePublishVolume, each a round trip with a deadline.
 *
 * The verdict is a ratio against the client's own floor measured in the same run (this
 * shared machine's speed moves up to 3× from day to day, an absolute target with it): a
 * CSI pod's latency ÷ (the built-in plugin's + the same three RPCs through grpc-js alone)
 * at most 1.2 at p50 and at p99, and the agent's CPU per CSI pod ÷ (built-in + the three
 * grpc-js RPCs alone) at most 1.1. Each ratio is taken within a run; the figure is their
 * median.
 *
 * To show where that time goes, the same run measures, on the same schedule:
 * - the CSI plugin with a driver inside the agent (csi-floor.ts `inProcessTransport`): the
 *   engine's and the plugin's own share, with no gRPC and no other process;
 * - the floors (csi-floor.ts): a pod's three RPCs through grpc-js with no engine, the same
 *   through a minimal node:http2 client, and three plain unix-socket round trips;
 * - the agent's CPU per pod and its GC pauses for each, and the time between each stage
 *   of a CSI pod (csi-stages.ts).
 * BENCH_CSI_ROWS=csi,grpcFloor measures only some rows (for a profile with --cpu-prof).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { csiRpcDeadlineMs } from '../../src/constants.js';
import { kubeletCore } from '../../src/engine/cores.js';
import { Engine } from '../../src/engine/engine.js';
import { MemorySink } from '../../src/engine/sink.js';
import { Executor } from '../../src/execute/executor.js';
import { noCsiHost } from '../../src/csi/host.js';
import { csiPlugin } from '../../src/csi/plugin.js';
import { type CsiTransport, GrpcTransport } from '../../src/csi/transport.js';
import { RealClock } from '../../src/clock.js';
import { FakePlugin, type FakeCallRecord } from '../../src/plugins/fake.js';
import { PluginManager } from '../../src/plugins/manager.js';
import { caps } from '../../src/plugins/types.js';
import { builtinPluginNames } from '../../src/desired/resolve.js';
import type { NewEvent } from '../../src/events/index.js';
import { podLatencies } from './e2e.js';
import { benchPlugins, diskPlugin, podEvents } from './generate.js';
import {
  EchoClient,
  grpcPod,
  Http2Unary,
  inProcessTransport,
  onSchedule,
  socketPod,
} from './csi-floor.js';
import { StageTrace, withGcPauses } from './csi-stages.js';
import {
  type Figure,
  gc,
  median,
  progress,
  quantile,
  scratchDir,
  type SectionResult,
  sleepMs,
} from './util.js';

type Variant = 'builtin' | 'csi' | 'csiInProcess';
const gapMs = 10;

function csiPlugins(
  clock: RealClock,
  journal: FakeCallRecord[],
  transport: CsiTransport,
): PluginManager {
  const manager = new PluginManager();
  const driverCaps = {
    publishUnpublish: true,
    stageUnstage: true,
    expand: false,
    singleNodeMultiWriter: false,
    maxVolumesPerNode: 0,
  };
  manager.register(
    csiPlugin(
      { name: diskPlugin, transport, caps: driverCaps, nodeId: 'node-1' },
      { root: '/var/lib/vole', host: noCsiHost, nowMs: () => performance.now() },
    ),
  );
  manager.register(new FakePlugin({ caps: caps(builtinPluginNames.emptyDir), clock, journal }));
  return manager;
}

/** The disk's volume handle, the key of a pod's stages (`…^disk-p-1` in the engine, `disk-p-1` on the wire). */
const handleOf = (name: string): string =>
  name.slice(Math.max(name.lastIndexOf('^'), name.lastIndexOf('/')) + 1);
const isDisk = (volume: string): boolean => handleOf(volume).startsWith('disk-');

async function runOnce(
  variant: Variant,
  pods: number,
  transport: CsiTransport,
  trace = new StageTrace(handleOf),
): Promise<number[]> {
  const clock = new RealClock();
  const journal: FakeCallRecord[] = [];
  const sink = new MemorySink();
  const plugins =
    variant === 'builtin'
      ? benchPlugins(clock, journal)
      : csiPlugins(clock, journal, trace.wrap(variant === 'csi' ? transport : inProcessTransport));
  const engine = new Engine({
    core: kubeletCore,
    runner: (host) => new Executor(host),
    config: { node: 'node-1', controllerAttachDetach: false },
    plugins,
    clock,
    sink,
    logger: pino({ level: 'silent' }),
  });
  engine.start();
  engine.append({ type: 'SourcesReady', tsMs: clock.nowMs() });
  const prefix = `${variant}${Date.now() % 100_000}`;
  const podAdds: NewEvent[] = [];
  for (let i = 0; i < pods; i++) {
    const { events } = podEvents(i, clock.nowMs(), prefix);
    for (const event of events.slice(0, 2)) engine.append(event);
    podAdds.push(events[2]!);
  }
  await sleepMs(200);
  const latencies = await podLatencies(engine, clock, podAdds, {
    gapMs,
    label: variant,
    onEvent: (event) => trace.event(event, isDisk),
    onAdded: (uid, atMs) => trace.podAdded(uid, atMs),
  });
  await engine.drainAndStop();
  sink.close();
  return latencies;
}

async function startNullDriver(socket: string): Promise<ChildProcess> {
  const script = fileURLToPath(new URL('./null-driver.js', import.meta.url));
  const child = spawn(process.execPath, [script, socket], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`the null CSI driver exited (${code})`)));
  });
  return child;
}

type Row = Variant | 'grpcFloor' | 'http2Floor' | 'socketFloor';
const allRows: readonly Row[] = [
  'builtin',
  'csi',
  'csiInProcess',
  'grpcFloor',
  'http2Floor',
  'socketFloor',
];
const rows = allRows.filter((row) => (process.env.BENCH_CSI_ROWS ?? row).split(',').includes(row));
type Runs = Record<Row, number[]>;
const noRuns = (): Runs => ({
  builtin: [],
  csi: [],
  csiInProcess: [],
  grpcFloor: [],
  http2Floor: [],
  socketFloor: [],
});
/** Per row, each run's p50 and p99 (ms), this process's CPU per pod (µs) and GC pauses over 1 ms. */
interface Measured {
  readonly p50: Runs;
  readonly p99: Runs;
  readonly cpuUs: Runs;
  readonly gcOver1Ms: Runs;
}

/** One measurement of a row: the pods' latencies, and the GC pauses meanwhile. */
async function measure(
  row: Row,
  pods: number,
  ctx: { transport: CsiTransport; http2: Http2Unary; echo: EchoClient; trace: StageTrace },
  into: Measured,
): Promise<number[]> {
  const cpuBefore = process.cpuUsage();
  const { value, gc: pauses } = await withGcPauses(() => {
    if (row === 'grpcFloor')
      return onSchedule(pods, gapMs, grpcPod(ctx.transport, csiRpcDeadlineMs));
    if (row === 'http2Floor') return onSchedule(pods, gapMs, grpcPod(ctx.http2, csiRpcDeadlineMs));
    if (row === 'socketFloor') return onSchedule(pods, gapMs, socketPod(ctx.echo));
    return runOnce(row, pods, ctx.transport, ctx.trace);
  });
  const cpu = process.cpuUsage(cpuBefore);
  const cpuUs = (cpu.user + cpu.system) / pods;
  const over = pauses.pausesMs.filter((ms) => ms > 1).length;
  into.p50[row].push(quantile(value, 0.5));
  into.p99[row].push(quantile(value, 0.99));
  into.cpuUs[row].push(cpuUs);
  into.gcOver1Ms[row].push(over);
  progress(
    `    ${row}: p50 ${quantile(value, 0.5).toFixed(2)} ms, p99 ${quantile(value, 0.99).toFixed(2)} ms; ` +
      `this process's CPU ${cpuUs.toFixed(0)} µs per pod; ` +
      `GC: ${pauses.pausesMs.length} pauses, ${over} over 1 ms, longest ${Math.max(0, ...pauses.pausesMs).toFixed(1)} ms`,
  );
  return value;
}

export async function runCsi(opts: { pods: number; runs: number }): Promise<SectionResult> {
  const socket = join(scratchDir('csi'), 'null-driver.sock');
  const driver = await startNullDriver(socket);
  const transport = new GrpcTransport(`unix://${socket}`);
  const echo = await EchoClient.connect(`${socket}.echo`);
  const http2 = await Http2Unary.connect(socket);
  const measured: Measured = { p50: noRuns(), p99: noRuns(), cpuUs: noRuns(), gcOver1Ms: noRuns() };
  const warmup: Measured = { p50: noRuns(), p99: noRuns(), cpuUs: noRuns(), gcOver1Ms: noRuns() };
  const stages: Record<string, ReturnType<StageTrace['gaps']>> = {};
  const loadAverages: number[] = [];
  try {
    for (const row of rows)
      await measure(row, 50, { transport, http2, echo, trace: new StageTrace(handleOf) }, warmup);
    for (let run = 0; run < opts.runs; run++) {
      loadAverages.push(loadavg()[0]!);
      progress(`  csi run ${run + 1}/${opts.runs} (load average ${loadavg()[0]!.toFixed(1)})`);
      for (const row of rows) {
        gc();
        const trace = new StageTrace(handleOf);
        await measure(row, opts.pods, { transport, http2, echo, trace }, measured);
        if (row === 'csi' || row === 'builtin') stages[row] = trace.gaps();
      }
    }
    printStages(stages);
    printVerdict(measured);
  } finally {
    echo.close();
    http2.close();
    transport.close();
    process.kill(driver.pid!, 'SIGTERM');
  }
  const details = {
    arrivalGapMs: gapMs,
    rpcsPerPod: 3,
    loadAverages,
    ...measured,
    stagesOfLastRun: stages,
  };
  return { section: 'csi', figures: figures(measured, opts.pods), details };
}

/** The gaps between a CSI pod's stages (last run), beside the built-in's where they match. */
function printStages(stages: Record<string, ReturnType<StageTrace['gaps']>>): void {
  const builtin = new Map((stages.builtin ?? []).map((g) => [`${g.from} → ${g.to}`, g]));
  progress(
    "  where a CSI pod's time goes (last run; p50 / p99 ms; built-in beside where it has the step):",
  );
  for (const gap of stages.csi ?? []) {
    if (gap.pods * 10 < (stages.csi?.[0]?.pods ?? 0)) continue; // a rare ordering, not a stage
    const same = builtin.get(`${gap.from} → ${gap.to}`);
    const beside =
      same === undefined ? '' : `   (built-in ${same.p50Ms.toFixed(3)} / ${same.p99Ms.toFixed(3)})`;
    progress(
      `    ${gap.from} → ${gap.to}: ${gap.p50Ms.toFixed(3)} / ${gap.p99Ms.toFixed(3)}${beside}`,
    );
  }
}

/** A verdict of the CSI row: CSI's runs ÷ (built-in's + grpc-js's alone), run by run. */
interface Verdict {
  readonly name: string;
  readonly ratios: number[];
  readonly max: number;
}

function verdicts(m: Measured): Verdict[] {
  const ratios = (of: Runs) => of.csi.map((csi, i) => csi / (of.builtin[i]! + of.grpcFloor[i]!));
  const floor = '(built-in + the 3 RPCs through grpc-js alone)';
  return [
    { name: `pod latency p50: CSI ÷ ${floor}`, ratios: ratios(m.p50), max: 1.2 },
    { name: `pod latency p99: CSI ÷ ${floor}`, ratios: ratios(m.p99), max: 1.2 },
    { name: `agent CPU per pod: CSI ÷ ${floor}`, ratios: ratios(m.cpuUs), max: 1.1 },
  ].filter((v) => v.ratios.length > 0 && v.ratios.every(Number.isFinite));
}

/** PASS when the median of the runs' ratios is at most the target. */
function printVerdict(m: Measured): void {
  const all = verdicts(m);
  if (all.length === 0) return progress('  CSI verdict: needs the builtin, csi and grpcFloor rows');
  progress('  CSI verdict (median of the runs; each run in brackets):');
  for (const v of all) {
    const value = median(v.ratios);
    const runs = v.ratios.map((r) => r.toFixed(2)).join(', ');
    const mark = value <= v.max ? 'PASS' : 'MISS';
    progress(`    ${v.name}: ${value.toFixed(2)} (target ≤ ${v.max}) ${mark}   [${runs}]`);
  }
}

function figures(m: Measured, podCount: number): Figure[] {
  const { p50, p99 } = m;
  const pods = `${podCount.toLocaleString('en-US')} pods`;
  const row = (name: string, runs: number[], unit = 'ms'): Figure => ({
    section: 'csi',
    name,
    value: median(runs),
    unit,
    runs,
  });
  const alone = "a pod's 3 RPCs alone (no engine)";
  const verdictRows = verdicts(m).map((v): Figure => {
    const met = median(v.ratios) <= v.max;
    return { ...row(v.name, v.ratios, '×'), target: `≤ ${v.max}`, met };
  });
  return [
    ...verdictRows,
    row(`pod added → mounted, p50, built-in plugin, ${pods}`, p50.builtin),
    row(`pod added → mounted, p99, built-in plugin, ${pods}`, p99.builtin),
    row(`pod added → mounted, p50, CSI over a unix socket, ${pods}`, p50.csi),
    row(`pod added → mounted, p99, CSI over a unix socket, ${pods}`, p99.csi),
    row(
      'diagnostic: the CSI plugin with a driver inside the agent (no gRPC, no process), p50',
      p50.csiInProcess,
    ),
    row(
      'diagnostic: the CSI plugin with a driver inside the agent (no gRPC, no process), p99',
      p99.csiInProcess,
    ),
    row(`floor: ${alone}, grpc-js to the same driver, p50`, p50.grpcFloor),
    row(`floor: ${alone}, grpc-js to the same driver, p99`, p99.grpcFloor),
    row(`floor: ${alone}, a minimal node:http2 client instead of grpc-js, p50`, p50.http2Floor),
    row(`floor: ${alone}, a minimal node:http2 client instead of grpc-js, p99`, p99.http2Floor),
    row(
      'floor: 3 plain unix-socket round trips to the driver process (no gRPC), p50',
      p50.socketFloor,
    ),
    row(
      'floor: 3 plain unix-socket round trips to the driver process (no gRPC), p99',
      p99.socketFloor,
    ),
    row('agent CPU per pod — built-in', m.cpuUs.builtin, 'µs'),
    row('agent CPU per pod — CSI', m.cpuUs.csi, 'µs'),
    row(
      'agent CPU per pod — the CSI plugin with a driver inside the agent',
      m.cpuUs.csiInProcess,
      'µs',
    ),
    row("agent CPU per pod — a pod's 3 grpc-js RPCs alone", m.cpuUs.grpcFloor, 'µs'),
    row("agent CPU per pod — a pod's 3 http2 RPCs alone", m.cpuUs.http2Floor, 'µs'),
    row(`GC pauses over 1 ms in a run of ${pods}: built-in`, m.gcOver1Ms.builtin, 'pauses'),
    row(`GC pauses over 1 ms in a run of ${pods}: CSI`, m.gcOver1Ms.csi, 'pauses'),
  ];
}
