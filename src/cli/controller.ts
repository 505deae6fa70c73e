/**
 * `vole controller`: the attach/detach controller against a manifest directory (Nodes,
 * Pods with spec.nodeName, PersistentVolumes, claims), with the real disk plugin's attach
 * and detach (loop devices) — the cluster side, demonstrated on one machine.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { Engine } from '../agent/engine.js';
import { timedSink } from '../agent/sink.js';
import { openSqliteLog } from '../agent/sqlite-log.js';
import { type MetricsServer, serveMetrics, VoleMetrics } from '../metrics/index.js';
import {
  ControllerExecutor,
  controllerCore,
  maxWaitForUnmountMsDefault,
  startAttachmentVerifier,
} from '../controller/index.js';
import type { ControllerOperation } from '../controller/plan.js';
import type { ControllerWorld } from '../controller/types.js';
import { RealClock } from '../execute/clock.js';
import { defaultRoot } from '../host/paths.js';
import { builtinPlugins } from '../plugins/builtin/index.js';
import { PluginManager } from '../plugins/manager.js';
import type { ManifestChanges } from '../sources/manifests.js';
import { ManifestWatcher } from '../sources/watch.js';
import { progressPrinter, runUntilStopped } from './lifecycle.js';
import { UsageError } from './postmortem.js';
import { metricsAddressOf } from './run.js';

export interface ControllerCommandOptions {
  readonly manifests: string;
  readonly db?: string;
  readonly root?: string;
  readonly once?: boolean;
  readonly timeout?: string;
  readonly metricsAddress?: string;
}

/** Every desired attachment confirmed, nothing else attached, nothing running. */
function settled(world: ControllerWorld): boolean {
  if (world.running.size > 0) return false;
  for (const key of world.dsw.keys())
    if (world.attachments.get(key)?.state.value.startsWith('attached') !== true) return false;
  for (const key of world.attachments.keys()) if (!world.dsw.has(key)) return false;
  return true;
}

export async function controllerCommand(
  opts: ControllerCommandOptions,
  logger: Logger,
): Promise<number> {
  const root = opts.root ?? defaultRoot;
  mkdirSync(root, { recursive: true });
  const db = opts.db ?? join(root, 'controller.db');
  const metricsAt = metricsAddressOf(opts.metricsAddress);
  const log = openSqliteLog(db);
  const clock = new RealClock();
  const say = progressPrinter();
  let world: ControllerWorld = controllerCore.initialWorld();
  for (const event of log.readAll()) world = controllerCore.fold(world, event);
  let current = () => world;
  const metrics = new VoleMetrics({
    source: { mode: 'controller', world: () => current() },
    appendLatency: true,
  });
  const engine = new Engine<ControllerWorld, ControllerOperation>({
    node: 'controller',
    controllerAttachDetach: true,
    clock,
    logger,
    sink: timedSink(log.sink, metrics),
    world,
    plugins: new PluginManager(builtinPlugins({ root })),
    core: controllerCore,
    runner: (host) => new ControllerExecutor(host),
    startFields: {
      mode: 'controller',
      controller: {
        maxWaitForUnmountMs: maxWaitForUnmountMsDefault,
        disableForceDetachOnTimeout: false,
      },
    },
  });
  current = () => engine.world;
  engine.subscribe((event, w) => metrics.observe(event, w));
  const shown = new Map<string, string>();
  engine.subscribe((event, w) => {
    if (event.type === 'ReportRaised') say(`${event.reason} pod ${event.pod}: ${event.message}`);
    for (const [node, volumes] of w.reported) {
      const text = [...volumes].sort().join(' ');
      if (shown.get(node) !== text) {
        shown.set(node, text);
        say(`node ${node}: volumesAttached [${text}]`);
      }
    }
  });
  engine.start();
  const stopVerifier = startAttachmentVerifier(engine, {
    plugins: new PluginManager(builtinPlugins({ root })),
    clock,
  });
  say(`vole controller: manifests ${opts.manifests}, log ${db} (seq ${engine.world.seq})`);
  const apply = (c: ManifestChanges) => {
    const tsMs = clock.nowMs();
    for (const object of c.upsertObjects) engine.append({ type: 'ObjectUpserted', tsMs, object });
    for (const pod of c.upsertPods) engine.append({ type: 'PodUpserted', tsMs, pod });
    for (const uid of c.removePods) engine.append({ type: 'PodRemoved', tsMs, uid });
    for (const ref of c.removeObjects) engine.append({ type: 'ObjectRemoved', tsMs, ...ref });
  };
  const known = {
    pods: new Map([...engine.world.pods].map(([uid, r]) => [uid as string, r.pod])),
    objects: new Map(engine.world.objects),
    problems: [],
  };
  const watcher = new ManifestWatcher({
    dir: opts.manifests,
    known,
    onChanges: apply,
    onProblems: (problems) => {
      for (const p of problems) say(`manifest ${p.file}: ${p.message}`);
    },
  });
  try {
    watcher.sync();
  } catch (error) {
    engine.stop();
    log.sink.close();
    throw new UsageError(
      `cannot read the manifest directory ${opts.manifests}: ${(error as Error).message}`,
    );
  }
  if (opts.once !== true) watcher.start();
  let server: MetricsServer | undefined;
  if (metricsAt !== undefined) {
    try {
      server = await serveMetrics({ registry: metrics.registry, ...metricsAt, ready: () => engine.isRunning });
    } catch (error) {
      watcher.stop();
      stopVerifier();
      await engine.drainAndStop();
      log.sink.close();
      throw new UsageError(
        `cannot serve metrics on ${metricsAt.host}:${metricsAt.port}: ${(error as Error).message} (choose another --metrics-address)`,
      );
    }
    say(`metrics on ${server.url}/metrics (and /healthz, /readyz)`);
  }
  return runUntilStopped({
    say,
    once: opts.once === true,
    timeout: opts.timeout,
    settled: () => settled(engine.world),
    settledMessage: () =>
      `settled: ${engine.world.attachments.size} attachment(s), log at seq ${engine.world.seq}`,
    shutdown: async () => {
      await server?.close();
      watcher.stop();
      stopVerifier();
      await engine.drainAndStop();
      log.sink.close();
    },
  });
}
