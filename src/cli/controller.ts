/**
 * `vole controller`: the attach/detach controller (a ControllerManager) against a
 * manifest directory (Nodes, Pods with spec.nodeName, PersistentVolumes, claims), with the
 * real disk plugin's attach and detach (loop devices) — the cluster side, on one machine.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ControllerManager } from '../agent/controller-manager.js';
import { RealClock } from '../clock.js';
import { defaultRoot } from '../host/paths.js';
import { builtinPlugins } from '../plugins/builtin/index.js';
import { ManifestWatcher } from '../sources/watch.js';
import {
  logBlockedReporter,
  progressPrinter,
  refuseBadManifests,
  runUntilStopped,
} from './lifecycle.js';
import { UsageError } from './postmortem.js';
import { type MetricsServer, serveMetrics } from '../metrics/index.js';
import { metricsAddressOf } from './run.js';
import { OperatorSocketError } from '../agent/operator.js';

/** The controller's operator socket, under its root. */
export const controllerSocketName = 'controller.sock';

export interface ControllerCommandOptions {
  readonly manifests: string;
  readonly db?: string;
  readonly root?: string;
  readonly once?: boolean;
  readonly timeout?: string;
  readonly metricsAddress?: string;
}

/** Prints each Multi-Attach report and each change of a node's volumesAttached. */
function showProgress(cm: ControllerManager, say: (line: string) => void): void {
  const shown = new Map<string, string>();
  cm.subscribe((event, world) => {
    if (event.type === 'ReportRaised') say(`${event.reason} pod ${event.pod}: ${event.message}`);
    for (const [node, volumes] of world.reported) {
      const text = [...volumes].sort().join(' ');
      if (shown.get(node) === text) continue;
      shown.set(node, text);
      say(`node ${node}: volumesAttached [${text}]`);
    }
  });
}

/** The manifest directory, synced once (and watched unless `once`), applied to the controller. */
function watchManifests(
  cm: ControllerManager,
  opts: ControllerCommandOptions,
  say: (line: string) => void,
): ManifestWatcher {
  const known = {
    pods: new Map([...cm.world.pods].map(([uid, r]) => [uid as string, r.pod])),
    objects: new Map(cm.world.objects),
    problems: [],
  };
  const watcher = new ManifestWatcher({
    dir: opts.manifests,
    known,
    onChanges: (changes) => cm.inputs.apply(changes),
    onProblems: (problems) => {
      for (const p of problems) say(`manifest ${p.file}: ${p.message}`);
    },
  });
  try {
    watcher.sync();
  } catch (error) {
    cm.stop();
    const why = (error as Error).message;
    throw new UsageError(`cannot read the manifest directory ${opts.manifests}: ${why}`);
  }
  if (opts.once !== true) watcher.start();
  return watcher;
}

interface Endpoints {
  readonly operator: { close(): Promise<void> };
  readonly metrics: MetricsServer | undefined;
}

/** The operator socket under the root and, when asked for, the metrics endpoint. */
async function serveEndpoints(
  cm: ControllerManager,
  opts: { root: string; metricsAddress?: string; say: (line: string) => void },
  onFailure: () => Promise<void>,
): Promise<Endpoints> {
  const metricsAt = metricsAddressOf(opts.metricsAddress);
  const socketPath = join(opts.root, controllerSocketName);
  const operator = await cm.operator.serve(socketPath).catch(async (error: Error) => {
    await onFailure();
    throw new UsageError(
      error instanceof OperatorSocketError
        ? error.message
        : `cannot listen on ${socketPath}: ${error.message}`,
    );
  });
  opts.say(`operator requests (vole detach / retry --controller) on ${operator.path}`);
  if (metricsAt === undefined) return { operator, metrics: undefined };
  try {
    const metrics = await serveMetrics({
      registry: cm.metrics.registry,
      ...metricsAt,
      ready: () => cm.isRunning,
    });
    opts.say(`metrics on ${metrics.url}/metrics (and /healthz, /readyz)`);
    return { operator, metrics };
  } catch (error) {
    await operator.close();
    await onFailure();
    const why = (error as Error).message;
    throw new UsageError(
      `cannot serve metrics on ${metricsAt.host}:${metricsAt.port}: ${why} (choose another --metrics-address)`,
    );
  }
}

export async function controllerCommand(
  opts: ControllerCommandOptions,
  logger: Logger,
): Promise<number> {
  const root = opts.root ?? defaultRoot;
  mkdirSync(root, { recursive: true });
  const db = opts.db ?? join(root, 'controller.db');
  refuseBadManifests(opts.manifests);
  metricsAddressOf(opts.metricsAddress); // a bad address is refused before the log is opened
  const say = progressPrinter();
  const logBlocked = logBlockedReporter(say);
  const cm = ControllerManager.open({
    logBlocked,
    db,
    plugins: builtinPlugins({ root }),
    clock: new RealClock(),
    logger,
  });
  showProgress(cm, say);
  cm.start();
  say(`vole controller: manifests ${opts.manifests}, log ${db} (seq ${cm.world.seq})`);
  const watcher = watchManifests(cm, opts, say);
  const { operator, metrics } = await serveEndpoints(
    cm,
    { root, metricsAddress: opts.metricsAddress, say },
    async () => {
      watcher.stop();
      await cm.drainAndStop();
    },
  );
  return runUntilStopped({
    say,
    once: opts.once === true,
    timeout: opts.timeout,
    settled: () => !logBlocked.blocked() && cm.status.settled(),
    settledMessage: () =>
      `settled: ${cm.world.pairs.size} attachment(s), log at seq ${cm.world.seq}`,
    shutdown: async () => {
      await metrics?.close();
      await operator.close();
      watcher.stop();
      await cm.drainAndStop();
    },
    abandon: () => {
      void metrics?.close();
      void operator.close();
      watcher.stop();
      cm.stop();
    },
    logBlocked: logBlocked.blocked,
  });
}
