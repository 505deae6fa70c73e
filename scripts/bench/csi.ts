/**
 * §6 CSI: pod added → all volumes mounted through a CSI driver on a unix socket, beside
 * the built-in (in-process) plugin, in the same run on the same arrival schedule as §4.
 * The driver is a separate process that answers every RPC at once (null-driver.ts), so
 * the difference is what the gRPC boundary adds per pod: ControllerPublishVolume,
 * NodeStageVolume and NodePublishVolume, each a round trip with a deadline.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { kubeletCore } from '../../src/engine/cores.js';
import { Engine } from '../../src/engine/engine.js';
import { MemorySink } from '../../src/engine/sink.js';
import { Executor } from '../../src/execute/executor.js';
import { noCsiHost } from '../../src/csi/host.js';
import { csiPlugin } from '../../src/csi/plugin.js';
import { GrpcTransport } from '../../src/csi/transport.js';
import { RealClock } from '../../src/clock.js';
import { UniquePodName } from '../../src/ids.js';
import { FakePlugin, type FakeCallRecord } from '../../src/plugins/fake.js';
import { PluginManager } from '../../src/plugins/manager.js';
import { caps } from '../../src/plugins/types.js';
import { builtinPluginNames } from '../../src/world/resolve.js';
import { podWaitStatus } from '../../src/world/index.js';
import { benchPlugins, diskPlugin, podEvents } from './generate.js';
import { type Figure, gc, median, progress, quantile, scratchDir, type SectionResult, sleepMs } from './util.js';

type Variant = 'builtin' | 'csi';
const gapMs = 10;

function csiPlugins(clock: RealClock, journal: FakeCallRecord[], transport: GrpcTransport): PluginManager {
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

async function runOnce(variant: Variant, pods: number, transport: GrpcTransport): Promise<number[]> {
  const clock = new RealClock();
  const journal: FakeCallRecord[] = [];
  const sink = new MemorySink();
  const plugins = variant === 'csi' ? csiPlugins(clock, journal, transport) : benchPlugins(clock, journal);
  const engine = new Engine({
    core: kubeletCore,
    runner: (host) => new Executor(host),
    node: 'node-1',
    controllerAttachDetach: false,
    plugins,
    clock,
    sink,
    logger: pino({ level: 'silent' }),
  });
  engine.start();
  engine.append({ type: 'SourcesReady', tsMs: clock.nowMs() });
  const prefix = `${variant}${Date.now() % 100_000}`;
  const podAdds = [];
  for (let i = 0; i < pods; i++) {
    const { events } = podEvents(i, clock.nowMs(), prefix);
    for (const event of events.slice(0, 2)) engine.append(event);
    podAdds.push(events[2]!);
  }
  await sleepMs(200);
  const addedAt = new Map<string, number>();
  const latencies: number[] = [];
  let resolveDone: () => void = () => {};
  const done = new Promise<void>((resolve) => (resolveDone = resolve));
  engine.subscribe((event, world) => {
    if (event.type !== 'CallSucceeded' || event.call !== 'setUp') return;
    const pod = world.running.get(event.opId as never)?.pod;
    const t0 = pod === undefined || pod === null ? undefined : addedAt.get(pod);
    if (t0 === undefined || !podWaitStatus(world, UniquePodName(pod!)).ready) return;
    latencies.push(performance.now() - t0);
    addedAt.delete(pod!);
    if (latencies.length === pods) resolveDone();
  });
  const start = performance.now();
  for (let i = 0; i < pods; i++) {
    const wait = start + i * gapMs - performance.now();
    if (wait > 0) await sleepMs(wait);
    const event = podAdds[i]!;
    addedAt.set((event as { pod: { metadata: { uid: string } } }).pod.metadata.uid, performance.now());
    engine.append({ ...event, tsMs: clock.nowMs() });
  }
  const timeout = sleepMs(60_000).then(() => {
    throw new Error(`${variant}: ${pods - latencies.length} pods not mounted after 60 s`);
  });
  await Promise.race([done, timeout]);
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

export async function runCsi(opts: { pods: number; runs: number }): Promise<SectionResult> {
  const socket = join(scratchDir('csi'), 'null-driver.sock');
  const driver = await startNullDriver(socket);
  const transport = new GrpcTransport(`unix://${socket}`);
  const p50: Record<Variant, number[]> = { builtin: [], csi: [] };
  const p99: Record<Variant, number[]> = { builtin: [], csi: [] };
  try {
    for (const variant of ['builtin', 'csi'] as const) await runOnce(variant, 50, transport); // warm-up
    for (let run = 0; run < opts.runs; run++) {
      for (const variant of ['builtin', 'csi'] as const) {
        gc();
        const latencies = await runOnce(variant, opts.pods, transport);
        p50[variant].push(quantile(latencies, 0.5));
        p99[variant].push(quantile(latencies, 0.99));
        progress(`  csi run ${run + 1}/${opts.runs}, ${variant}: p50 ${quantile(latencies, 0.5).toFixed(2)} ms, p99 ${quantile(latencies, 0.99).toFixed(2)} ms`);
      }
    }
  } finally {
    transport.close();
    process.kill(driver.pid!, 'SIGTERM');
  }
  return { section: 'csi', figures: figures(p50, p99, opts.pods), details: { arrivalGapMs: gapMs, rpcsPerPod: 3 } };
}

function figures(p50: Record<Variant, number[]>, p99: Record<Variant, number[]>, podCount: number): Figure[] {
  const pods = `${podCount.toLocaleString('en-US')} pods`;
  const added = p99.csi.map((v, i) => v - p99.builtin[i]!);
  const row = (name: string, runs: number[]): Figure => ({ section: 'csi', name, value: median(runs), unit: 'ms', runs });
  return [
    row(`pod added → mounted, p50, built-in plugin, ${pods}`, p50.builtin),
    row(`pod added → mounted, p99, built-in plugin, ${pods}`, p99.builtin),
    row(`pod added → mounted, p50, CSI over a unix socket, ${pods}`, p50.csi),
    row(`pod added → mounted, p99, CSI over a unix socket, ${pods}`, p99.csi),
    { ...row('CSI p99 − built-in p99 (what the gRPC boundary adds per pod)', added), target: '< 1 ms', met: median(added) < 1 },
  ];
}
