/**
 * `vole run`: the node agent. Pods, PersistentVolumes and claims come from a manifest
 * directory (watched); real plugins act on the host under --root; every fact goes to the
 * SQLite log at --db, which a restarted agent resumes from.
 */
import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { PodProgress, settled } from '../agent/progress.js';
import { OperatorSocketError } from '../agent/operator.js';
import { VolumeManager } from '../agent/volume-manager.js';
import { defaultRoot, makeDataDirs, pluginsRegistryDirName } from '../host/paths.js';
import { CsiDriverRegistry } from '../csi/registry.js';
import { RegistrationWatcher } from '../csi/watcher.js';
import { builtinPlugins } from '../plugins/builtin/index.js';
import { PluginManager } from '../plugins/manager.js';
import { type MetricsServer, parseMetricsAddress, serveMetrics } from '../metrics/index.js';
import { ObjectContents } from '../sources/contents.js';
import type { ManifestChanges, ManifestNotice } from '../sources/manifests.js';
import { ManifestWatcher } from '../sources/watch.js';
import { type FeatureGates, parseFeatureGates } from '../sources/feature-gates.js';
import { podsWaitingOnOutside } from '../agent/outside.js';
import type { UniquePodName } from '../ids.js';
import { why, whyText } from '../postmortem/why.js';
import { podWaitStatus } from '../kubelet/queries.js';
import type { World } from '../kubelet/types.js';
import {
  damageWatch,
  logBlockedReporter,
  onceTimeoutSecondsDefault,
  progressPrinter,
  refuseBadManifests,
  runUntilStopped,
  stopIfDamaged,
} from './lifecycle.js';
import { UsageError } from './postmortem.js';
import { allocatableOf } from './allocatable.js';

export interface RunOptions {
  readonly manifests: string;
  readonly root?: string;
  readonly db?: string;
  readonly node?: string;
  readonly controllerAttachDetach?: boolean;
  /**
   * Watch as without it, and exit 0 once settled (every pod mounted, nothing else
   * attached), 3 when every pod left can only wait for outside change, 1 at the timeout.
   */
  readonly once?: boolean;
  /** Seconds; with once, default onceTimeoutSecondsDefault (120). */
  readonly timeout?: string;
  /** CSI drivers by name and endpoint (`disk.csi.vole.dev=unix:///run/disk.sock`). */
  readonly csi?: readonly string[];
  /** HOST:PORT to serve /metrics, /healthz and /readyz on. */
  readonly metricsAddress?: string;
  /** `cpu=4,memory=16Gi,ephemeral-storage=100Gi`; what is not given is the host's. */
  readonly allocatable?: string;
  /** `EmptyDirVolumeMode=true`: the alpha fields honoured (featureGateDefaults otherwise). */
  readonly featureGates?: string;
}

/** The --feature-gates, checked before anything starts. */
export function featureGatesOf(text: string | undefined): FeatureGates {
  try {
    return parseFeatureGates(text);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/** `NAME=unix:///path.sock` → its parts; a usage error says the form otherwise. */
function parseCsiFlag(value: string): { name: string; endpoint: string } {
  const at = value.indexOf('=');
  const name = value.slice(0, at);
  const endpoint = value.slice(at + 1);
  if (at <= 0 || !endpoint.startsWith('unix:///'))
    throw new UsageError(
      `--csi ${value}: give NAME=unix:///absolute/path.sock (the driver's name and socket)`,
    );
  return { name, endpoint };
}

/**
 * The CSI drivers: the `--csi` ones (asked again every second until they answer) and
 * those registering through `<root>/plugins_registry/`.
 */
export async function startCsi(
  opts: Pick<RunOptions, 'csi'>,
  ctx: {
    root: string;
    plugins: PluginManager;
    logger: Logger;
    say: (line: string) => void;
    nodeIdOf?: (driver: string, node: string) => string | undefined;
  },
): Promise<{ registry: CsiDriverRegistry; stop: () => void; waiting: () => number }> {
  const registry = new CsiDriverRegistry(ctx);
  const flags = (opts.csi ?? []).map(parseCsiFlag);
  const timers = new Set<ReturnType<typeof setTimeout>>();
  const unregistered = new Set(flags.map((f) => f.name));
  const attempt = async (
    flag: { name: string; endpoint: string },
    first: boolean,
  ): Promise<void> => {
    try {
      await registry.add(flag.endpoint, 'flag', flag.name);
      unregistered.delete(flag.name);
      ctx.say(`CSI driver ${flag.name} at ${flag.endpoint} registered`);
    } catch (error) {
      if (first) ctx.say(`${(error as Error).message}; vole asks again every second`);
      const timer = setTimeout(() => {
        timers.delete(timer);
        void attempt(flag, false);
      }, 1000);
      timer.unref();
      timers.add(timer);
    }
  };
  await Promise.all(flags.map((flag) => attempt(flag, true)));
  const watcher = new RegistrationWatcher({
    dir: join(ctx.root, pluginsRegistryDirName),
    registry,
    ...ctx,
  });
  await watcher.start();
  return {
    registry,
    /** --csi drivers still being asked: vole itself is still making progress. */
    waiting: () => unregistered.size,
    stop: () => {
      for (const timer of timers) clearTimeout(timer);
      watcher.stop();
      registry.close();
    },
  };
}

/** The plugins (built-in, and the CSI drivers found) and the volume manager, started. */
async function startAgent(
  opts: RunOptions,
  ctx: {
    root: string;
    db: string;
    logger: Logger;
    say: (line: string) => void;
    logBlocked: ReturnType<typeof logBlockedReporter>;
    contents: ObjectContents;
    featureGates: FeatureGates;
    /** The manifest file of a pod, named in progress lines that report a problem. */
    originOf?: (uid: string) => string | undefined;
  },
): Promise<{ vm: VolumeManager; csi: Awaited<ReturnType<typeof startCsi>> }> {
  const { root, db, logger, say, contents, featureGates } = ctx;
  const plugins = new PluginManager(
    builtinPlugins({ root, contents, featureGates, forbiddenHostPaths: [dirname(db)] }),
  );
  const csi = await startCsi(opts, { root, plugins, logger, say });
  let vm: VolumeManager;
  try {
    vm = VolumeManager.open({
      logBlocked: ctx.logBlocked,
      db,
      node: opts.node ?? 'node-1',
      plugins,
      contents,
      controllerAttachDetach: opts.controllerAttachDetach ?? false,
      allocatable: allocatableOf(opts.allocatable, root),
      logger,
    });
  } catch (error) {
    csi.stop(); // its timers would keep a process that cannot open its log alive
    throw error;
  }
  const progress = new PodProgress(say, ctx.originOf);
  vm.subscribe((event, world) => progress.onEvent(event, world));
  vm.start({ hostObserved: await vm.checkHost() });
  csi.registry.setRecorder((event) => vm.inputs.recordCsiDriver(event));
  return { vm, csi };
}

/** The manifest directory's watcher, synced once, knowing what the log holds already. */
function syncedWatcher(
  dir: string,
  vm: VolumeManager,
  parts: {
    contents: ObjectContents;
    say: (line: string) => void;
    logger: Logger;
    featureGates: FeatureGates;
    stopRest: () => void;
  },
): ManifestWatcher {
  const { contents, say, logger, featureGates } = parts;
  const known = {
    pods: new Map([...vm.world.pods].map(([uid, r]) => [uid as string, r.pod])),
    objects: new Map(vm.world.objects),
    problems: [],
  };
  const watcher = new ManifestWatcher({
    dir,
    known,
    onChanges: (changes) => vm.inputs.apply(changes),
    onProblems: (problems) => {
      for (const p of problems) say(`manifest ${p.file}: ${p.message}`);
    },
    featureGates,
    onNotices: (notices) => warnDropped(notices, logger, say),
  });
  try {
    watcher.sync();
  } catch (error) {
    parts.stopRest();
    throw new UsageError(`cannot read the manifest directory ${dir}: ${(error as Error).message}`);
  }
  return watcher;
}

export async function runCommand(opts: RunOptions, logger: Logger): Promise<number> {
  const root = opts.root ?? defaultRoot;
  const db = opts.db ?? join(root, 'vole.db');
  const metricsAt = metricsAddressOf(opts.metricsAddress);
  const featureGates = featureGatesOf(opts.featureGates);
  // plugins_registry/ before any driver's registrar needs it, as the kubelet makes it.
  makeDataDirs(root);
  refuseBadManifests(opts.manifests, featureGates);
  const say = progressPrinter();
  const { logBlocked, found: damaged } = damageWatch(logBlockedReporter(say));
  const contents = new ObjectContents();
  const startedMs = Date.now(); // the origin of the times `vole why` lines show
  let watcher: ManifestWatcher | undefined;
  const originOf = (uid: string) => watcher?.originOf(uid);
  const agent = { root, db, logger, say, logBlocked, contents, featureGates, originOf };
  const { vm, csi } = await startAgent(opts, agent);
  say(
    `vole agent on ${vm.world.config.node}: manifests ${opts.manifests}, root ${root}, log ${db} (seq ${vm.world.seq})`,
  );
  watcher = syncedWatcher(opts.manifests, vm, {
    ...{ contents, say, logger, featureGates },
    stopRest: () => (csi.stop(), vm.stop()),
  });
  vm.inputs.markSourcesReady();
  await stopIfDamaged(cleanUpOrphans(vm, root, say), damaged, () => {
    watcher?.stop();
    vm.stop();
    csi.stop();
  });
  // --once watches too: advice such as "create it" (the missing ConfigMap) must work in it.
  watcher.start();
  const endpoints = await serveEndpoints({ root, metricsAt, vm, say, stop: () => watcher.stop() });
  return runUntilStopped({
    say,
    ...onceOptions(opts, vm.world, { startedMs, csiWaiting: csi.waiting }),
    settled: () => !logBlocked.blocked() && vm.logVerified && settled(vm.world),
    settledMessage: () =>
      `settled: ${vm.world.pods.size} pod(s) mounted, log at seq ${vm.world.seq}`,
    shutdown: async () => {
      await endpoints.close();
      watcher.stop();
      await vm.drainAndStop();
      vm.stop();
      csi.stop();
    },
    abandon: () => {
      void endpoints.close();
      watcher.stop();
      vm.stop();
      csi.stop();
    },
    logBlocked: logBlocked.blocked,
    fatal: damaged,
  });
}

/**
 * A field a disabled feature gate dropped from a pod: one warn line in the log (stderr,
 * --log-level) and one among the agent's progress lines, which are what a user reads.
 */
function warnDropped(notices: readonly ManifestNotice[], logger: Logger, say: (l: string) => void) {
  for (const n of notices) {
    logger.warn({ pod: n.pod, volume: n.volume, file: n.file }, n.message);
    say(`manifest ${n.file}: ${n.message}`);
  }
}

/**
 * --once: the timeout (onceTimeoutSecondsDefault unless given), and what is printed when
 * it stops unsettled: `vole why` of each pod left.
 */
function onceOptions(
  opts: RunOptions,
  world: World,
  at: { startedMs: number; csiWaiting: () => number },
) {
  const once = opts.once === true;
  const { startedMs } = at;
  return {
    once,
    timeout: opts.timeout ?? (once ? String(onceTimeoutSecondsDefault) : undefined),
    stuck: () => {
      // A --csi driver not answering yet is retried every second: not stuck while it is.
      const pods = at.csiWaiting() > 0 ? undefined : podsWaitingOnOutside(world);
      return pods === undefined ? undefined : whyPods(world, pods, startedMs);
    },
    leftAtTimeout: () => whyPods(world, notReady(world), startedMs),
  };
}

/** `vole why` for each pod, as the command prints it (times from the agent's start). */
function whyPods(world: World, pods: readonly UniquePodName[], originMs: number): string {
  return pods
    .map((uid) => why(world, uid))
    .filter((a) => a !== undefined)
    .map((answer) => whyText(answer, { originMs }))
    .join('\n');
}

function notReady(world: World): UniquePodName[] {
  return [...world.pods.keys()].filter((uid) => !podWaitStatus(world, uid).ready).sort();
}

/** What the log does not know under the root, recorded and cleaned up (behaviour K3.7). */
async function cleanUpOrphans(vm: VolumeManager, root: string, say: (line: string) => void) {
  const orphans = await vm.cleanUpOrphans(root);
  for (const orphan of orphans.left) say(`orphan left in place: ${orphan.path} (see the log)`);
  const { found, left } = orphans;
  if (found.length > 0)
    say(`orphans: ${found.length} found, ${found.length - left.length} removed`);
}

/** The operator socket, and the metrics endpoint when asked for; closed together. */
export async function serveEndpoints(opts: {
  root: string;
  metricsAt: { host: string; port: number } | undefined;
  vm: VolumeManager;
  say: (line: string) => void;
  /** Stops what feeds the agent (its sources) when an endpoint cannot be served. */
  stop: () => void;
}): Promise<{ close(): Promise<void> }> {
  const { vm, stop: watcher, say } = opts;
  const operator = await serveOperatorOrStop(join(opts.root, operatorSocketName), vm, watcher);
  say(`operator requests (vole detach / release / retry) on ${operator.path}`);
  let metrics: MetricsServer | undefined;
  if (opts.metricsAt !== undefined) {
    metrics = await serveMetricsOrStop(opts.metricsAt, vm, watcher).catch(async (error: Error) => {
      await operator.close();
      throw error;
    });
    say(`metrics on ${metrics.url}/metrics (and /healthz, /readyz)`);
  }
  return {
    close: async () => {
      await metrics?.close();
      await operator.close();
    },
  };
}

/** The agent's operator socket, under its root. */
export const operatorSocketName = 'vole.sock';

async function serveOperatorOrStop(
  path: string,
  vm: VolumeManager,
  stopSources: () => void,
): Promise<{ readonly path: string; close(): Promise<void> }> {
  try {
    return await vm.operator.serve(path);
  } catch (error) {
    stopSources();
    await vm.drainAndStop();
    if (error instanceof OperatorSocketError) throw new UsageError(error.message);
    throw new UsageError(`cannot listen on ${path}: ${(error as Error).message}`);
  }
}

/** The --metrics-address, checked before anything starts. */
export function metricsAddressOf(
  text: string | undefined,
): { host: string; port: number } | undefined {
  if (text === undefined) return undefined;
  const parsed = parseMetricsAddress(text);
  if (typeof parsed === 'string') throw new UsageError(parsed);
  return parsed;
}

async function serveMetricsOrStop(
  at: { host: string; port: number },
  vm: VolumeManager,
  stopSources: () => void,
): Promise<MetricsServer> {
  try {
    return await serveMetrics({
      registry: vm.metrics.registry,
      ...at,
      ready: () => vm.status.reconcilerStatesHasBeenSynced(),
    });
  } catch (error) {
    stopSources();
    await vm.drainAndStop();
    throw new UsageError(
      `cannot serve metrics on ${at.host}:${at.port}: ${(error as Error).message} (choose another --metrics-address)`,
    );
  }
}
