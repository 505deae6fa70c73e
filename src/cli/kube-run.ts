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
import { TokenRequests } from '../kube/tokens.js';
import { builtinPlugins } from '../plugins/builtin/index.js';
import { PluginManager } from '../plugins/manager.js';
import { ObjectContents } from '../sources/contents.js';
import { allocatableOf } from './allocatable.js';
import { logBlockedReporter, progressPrinter, runUntilStopped } from './lifecycle.js';
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
  const logBlocked = logBlockedReporter(say);
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
  const agent = await startKubeAgent(
    {
      ...{ http, node, vm: manager, controllerAttachDetach, logger, say, allocatable },
      clock: new RealClock({ holdsProcess: true }),
      forgetPod: (uid) => tokens.forgetPod(uid),
    },
    () => (manager.stop(), csi.stop()),
    http.server,
  );
  csi.registry.setRecorder((event) => vm.inputs.recordCsiDriver(event));
  say(`vole agent on ${node}: API ${http.server}, root ${root}, log ${db} (seq ${vm.world.seq})`);
  const orphans = await vm.cleanUpOrphans(root);
  for (const orphan of orphans.left) say(`orphan left in place: ${orphan.path} (see the log)`);
  const stop = () => void agent.stop();
  const endpoints = await serveEndpoints({ root, metricsAt, vm, say, stop });
  return untilStopped(opts, { say, logBlocked, vm, agent, endpoints, csi, tokens });
}

/** The agent on the API, started; when it cannot start, it and `stopRest` are stopped. */
async function startKubeAgent(options: KubeAgentOptions, stopRest: () => void, server: string) {
  const agent = new KubeAgent(options);
  try {
    await agent.start();
  } catch (error) {
    await agent.stop();
    stopRest();
    throw new UsageError(`cannot start on ${server}: ${(error as Error).message}`);
  }
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
  });
}
