/**
 * `vole run --kubeconfig FILE --node NAME`: the node agent on a real API server. The
 * plugins act on the host under --root as with manifests; the inputs and outputs are the
 * kubelet's (src/kube/agent.ts).
 */
import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { PodProgress, settled } from '../agent/progress.js';
import { VolumeManager } from '../agent/volume-manager.js';
import { RealClock } from '../clock.js';
import { defaultRoot, makeDataDirs } from '../host/paths.js';
import { KubeHttp } from '../kube/http.js';
import { KubeAgent, type KubeAgentOptions } from '../kube/agent.js';
import { controllerAttachedNow } from '../kube/node-status.js';
import { TokenRequests } from '../kube/tokens.js';
import { builtinPlugins } from '../plugins/builtin/index.js';
import { PluginManager } from '../plugins/manager.js';
import { ObjectContents } from '../sources/contents.js';
import { allocatableOf } from './allocatable.js';
import {
  damageWatch,
  logBlockedReporter,
  progressPrinter,
  runUntilStopped,
  stopIfDamaged,
} from './lifecycle.js';
import type { LogDamagedError } from '../log/errors.js';
import { UsageError } from './postmortem.js';
import { featureGatesOf, metricsAddressOf, serveEndpoints, startCsi } from './run.js';

export interface KubeRunOptions {
  readonly kubeconfig: string;
  readonly node?: string;
  readonly root?: string;
  readonly db?: string;
  /** Default true, as the kubelet's --enable-controller-attach-detach. */
  readonly controllerAttachDetach?: boolean;
  readonly csi?: readonly string[];
  readonly once?: boolean;
  readonly timeout?: string;
  readonly metricsAddress?: string;
  /** `--allocatable`: what downwardAPI resourceFieldRef items read where a pod sets no limit. */
  readonly allocatable?: string;
  /** The kubelet's gates (the API server drops the fields of its own disabled gates). */
  readonly featureGates?: string;
}

function httpOf(file: string): KubeHttp {
  try {
    return KubeHttp.fromFile(file);
  } catch (error) {
    throw new UsageError(`--kubeconfig ${file}: ${(error as Error).message}`);
  }
}

/**
 * VOLE_TOKEN_AGE_MAX_MS: the age after which a token is asked for again whatever its
 * lifetime (the kubelet's 24 h). For tests that watch a refresh: the API's shortest
 * expirationSeconds (600) would make them wait 8 minutes.
 */
function tokenAgeMsMaxOf(value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  const ms = Number(value);
  if (!Number.isInteger(ms) || ms <= 0)
    throw new UsageError(`VOLE_TOKEN_AGE_MAX_MS must be a positive integer, not "${value}"`);
  return ms;
}

/**
 * The volume manager of a Kubernetes node: it binds no claim, it serves token projections,
 * and CSIDriver objects say which CSI volumes need attaching.
 */
function openVolumeManager(
  opts: Omit<
    Parameters<typeof VolumeManager.open>[0],
    'bindClaims' | 'tokenRequests' | 'csiDriverObjects'
  >,
): VolumeManager {
  // Kubernetes' PV controller binds claims; the node reads the bindings (as the kubelet).
  const kube = { bindClaims: false, tokenRequests: true, csiDriverObjects: true };
  return VolumeManager.open({ ...opts, ...kube });
}

export async function kubeRunCommand(opts: KubeRunOptions, logger: Logger): Promise<number> {
  if (opts.node === undefined)
    throw new UsageError('vole run --kubeconfig needs --node NAME (this Node)');
  const node = opts.node;
  const root = opts.root ?? defaultRoot;
  // plugins_registry/ before any driver's registrar needs it, as the kubelet makes it.
  makeDataDirs(root);
  const db = opts.db ?? join(root, 'vole.db');
  const metricsAt = metricsAddressOf(opts.metricsAddress);
  const featureGates = featureGatesOf(opts.featureGates);
  const http = httpOf(opts.kubeconfig);
  const say = progressPrinter();
  // A damaged log stops the agent at once, exit 2, as `vole run --manifests` does.
  const { logBlocked, found: damaged } = damageWatch(logBlockedReporter(say));
  const contents = new ObjectContents();
  let vm: VolumeManager | undefined;
  const tokens = new TokenRequests(http, {
    clock: new RealClock(),
    onRefreshDue: (uid) => vm?.inputs.tokensRefreshDue(uid),
    tokenAgeMsMax: tokenAgeMsMaxOf(process.env.VOLE_TOKEN_AGE_MAX_MS),
  });
  const plugins = new PluginManager(
    builtinPlugins({
      root,
      contents,
      tokens,
      featureGates,
      forbiddenHostPaths: [dirname(db)],
    }),
  );
  const csi = await startCsi(opts, { root, plugins, logger, say });
  const controllerAttachDetach = opts.controllerAttachDetach ?? true;
  const allocatable = allocatableOf(opts.allocatable, root);
  try {
    vm = openVolumeManager({
      logBlocked,
      db,
      node,
      plugins,
      contents,
      controllerAttachDetach,
      controllerAttachedCheck: controllerAttachedNow(http, node),
      logger,
      allocatable,
    });
  } catch (error) {
    csi.stop();
    throw error;
  }
  const progress = new PodProgress(say);
  vm.subscribe((event, world) => progress.onEvent(event, world));
  vm.start({ hostObserved: await vm.checkHost() });
  const manager = vm;
  const stopRest = () => (tokens.stop(), manager.stop(), csi.stop());
  const agent = await startKubeAgent(
    {
      ...{ http, node, vm: manager, controllerAttachDetach, logger, say, allocatable },
      clock: new RealClock({ holdsProcess: true }),
      forgetPod: (uid) => tokens.forgetPod(uid),
    },
    { stopRest, damaged, server: http.server },
  );
  csi.registry.setRecorder((event) => vm.inputs.recordCsiDriver(event));
  say(`vole agent on ${node}: API ${http.server}, root ${root}, log ${db} (seq ${vm.world.seq})`);
  await cleanUpOrphans(vm, root, { damaged, say, stop: () => void agent.stop().finally(stopRest) });
  const stop = () => void agent.stop();
  const endpoints = await serveEndpoints({ root, metricsAt, vm, say, stop });
  const parts = { say, logBlocked, vm, agent, endpoints, csi, tokens };
  // Damage found while it runs: the agent is stopped first, then the rest is abandoned.
  const stoppedOnDamage = damaged.then(async (error) => (await agent.stop(), error));
  return untilStopped(opts, parts, stoppedOnDamage);
}

/**
 * The orphan pass records each orphan, durable, before it touches one: on a damaged log it
 * waits for good, so the damage ends it (`stop`, then thrown), the orphans where they are.
 */
async function cleanUpOrphans(
  vm: VolumeManager,
  root: string,
  parts: { damaged: Promise<LogDamagedError>; say: (line: string) => void; stop: () => void },
): Promise<void> {
  const orphans = await stopIfDamaged(vm.cleanUpOrphans(root), parts.damaged, parts.stop);
  for (const orphan of orphans.left)
    parts.say(`orphan left in place: ${orphan.path} (see the log)`);
}

/**
 * The agent on the API, started; when it cannot start, it and `stopRest` are stopped. The
 * API may be slow or away: the log's damage, found meanwhile, ends the start (thrown), the
 * agent stopped before the rest, so nothing it hears reaches a stopped engine.
 */
async function startKubeAgent(
  options: KubeAgentOptions,
  parts: { stopRest: () => void; damaged: Promise<LogDamagedError>; server: string },
): Promise<KubeAgent> {
  const { stopRest, damaged, server } = parts;
  const agent = new KubeAgent(options);
  const starting = agent.start().catch(async (error: unknown) => {
    await agent.stop();
    stopRest();
    throw new UsageError(`cannot start on ${server}: ${(error as Error).message}`);
  });
  await stopIfDamaged(starting, damaged, () => {
    void starting
      .catch(() => undefined)
      .then(() => agent.stop())
      .finally(stopRest);
  });
  return agent;
}

/** Runs until a signal (or, with --once, until settled); then stops it all, in order. */
function untilStopped(
  opts: Pick<KubeRunOptions, 'once' | 'timeout'>,
  parts: {
    say: (line: string) => void;
    logBlocked: ReturnType<typeof logBlockedReporter>;
    vm: VolumeManager;
    agent: KubeAgent;
    endpoints: { close(): Promise<void> };
    csi: { stop(): void };
    tokens: { stop(): void };
  },
  damaged: Promise<Error>,
): Promise<number> {
  const { say, logBlocked, vm, agent, endpoints, csi, tokens } = parts;
  return runUntilStopped({
    say,
    once: opts.once === true,
    timeout: opts.timeout,
    settled: () => !logBlocked.blocked() && vm.logVerified && settled(vm.world),
    settledMessage: () =>
      `settled: ${vm.world.pods.size} pod(s) mounted, log at seq ${vm.world.seq}`,
    shutdown: async () => {
      tokens.stop();
      await endpoints.close();
      await agent.stop();
      await vm.drainAndStop();
      vm.stop();
      csi.stop();
    },
    abandon: () => {
      tokens.stop();
      void endpoints.close();
      void agent.stop();
      vm.stop();
      csi.stop();
    },
    logBlocked: logBlocked.blocked,
    fatal: damaged,
  });
}
