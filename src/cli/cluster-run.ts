/**
 * `vole run --etcd URLS --node N` (a node agent) and `vole controller --etcd URLS` (one
 * controller replica): the long-running cluster-mode commands.
 */
import { mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { settled } from '../agent/progress.js';
import { ClusterAgent, heartbeatTtlSDefault } from '../cluster/agent.js';
import { connect, describeEtcdError } from '../cluster/client.js';
import { ClusterController, leaseTtlSDefault } from '../cluster/controller.js';
import { ClusterKeys, defaultPrefix } from '../cluster/keys.js';
import { EtcdStore } from '../cluster/store-etcd.js';
import { RealClock } from '../clock.js';
import { maxWaitForUnmountMsDefault } from '../controller/index.js';
import { defaultRoot, makeDataDirs } from '../host/paths.js';
import { builtinPlugins } from '../plugins/builtin/index.js';
import { parseDurationMs } from '../sim/duration.js';
import { ObjectContents } from '../sources/contents.js';
import { progressPrinter, runUntilStopped } from './lifecycle.js';
import { allocatableOf } from './allocatable.js';
import { UsageError } from './postmortem.js';
import { featureGatesOf, startCsi } from './run.js';
import { PluginManager } from '../plugins/manager.js';
import { metricsAddressOf, serveEndpoints } from './run.js';

export interface ClusterAgentCommandOptions {
  readonly etcd: string;
  readonly prefix?: string;
  readonly node?: string;
  readonly root?: string;
  readonly db?: string;
  readonly disksRoot?: string;
  readonly heartbeatTtl?: string;
  readonly csi?: readonly string[];
  readonly once?: boolean;
  readonly timeout?: string;
  /** `cpu=4,memory=16Gi`; what is not given is the host's. */
  readonly allocatable?: string;
  readonly metricsAddress?: string;
  /** The node agent's gates (`vole apply`, the API server's part, keeps no disabled field). */
  readonly featureGates?: string;
}

function seconds(text: string | undefined, fallback: number, what: string): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1)
    throw new UsageError(`${what} must be a whole number of seconds ≥ 1, not "${text}"`);
  return value;
}

function durationMs(text: string | undefined, fallback: number, what: string): number {
  if (text === undefined) return fallback;
  const ms = parseDurationMs(text);
  if (ms === undefined || ms < 0)
    throw new UsageError(`${what}: "${text}" is not a duration (e.g. 6m, 30s, 500ms)`);
  return ms;
}

function clientFor(urls: string) {
  try {
    return connect(urls);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

export async function clusterAgentCommand(
  opts: ClusterAgentCommandOptions,
  logger: Logger,
): Promise<number> {
  if (opts.node === undefined)
    throw new UsageError('vole run --etcd needs --node NAME (this node)');
  const root = opts.root ?? defaultRoot;
  // plugins_registry/ before any driver's registrar needs it, as the kubelet makes it.
  makeDataDirs(root);
  const db = opts.db ?? join(root, 'vole.db');
  const metricsAt = metricsAddressOf(opts.metricsAddress);
  const featureGates = featureGatesOf(opts.featureGates);
  const say = progressPrinter();
  const client = clientFor(opts.etcd);
  const contents = new ObjectContents();
  const plugins = new PluginManager(
    builtinPlugins({
      root,
      contents,
      featureGates,
      forbiddenHostPaths: [dirname(db)],
      ...(opts.disksRoot === undefined ? {} : { disksRoot: opts.disksRoot }),
    }),
  );
  const csi = await startCsi(opts, { root, plugins, logger, say });
  const agent = new ClusterAgent({
    client: new EtcdStore(client),
    clock: new RealClock(),
    keys: new ClusterKeys(opts.prefix ?? defaultPrefix),
    node: opts.node,
    db,
    plugins,
    contents,
    logger,
    heartbeatTtlS: seconds(opts.heartbeatTtl, heartbeatTtlSDefault, '--heartbeat-ttl'),
    say,
    allocatable: allocatableOf(opts.allocatable, root),
  });
  try {
    await agent.start();
  } catch (error) {
    await agent.stop().catch(() => undefined);
    csi.stop();
    client.close();
    throw new UsageError(describeEtcdError(error, opts.etcd));
  }
  csi.registry.setRecorder((event) => agent.vm.inputs.recordCsiDriver(event));
  say(
    `vole agent on ${opts.node}: etcd ${opts.etcd}, root ${root}, log ${db} (seq ${agent.vm.world.seq})`,
  );
  const stopAgent = () => void agent.stop().finally(() => client.close());
  const endpoints = await serveEndpoints({ root, metricsAt, vm: agent.vm, say, stop: stopAgent });
  return runUntilStopped({
    say,
    once: opts.once === true,
    timeout: opts.timeout,
    settled: () => settled(agent.vm.world),
    settledMessage: () =>
      `settled: ${agent.vm.world.pods.size} pod(s) mounted, log at seq ${agent.vm.world.seq}`,
    shutdown: async () => {
      await endpoints.close();
      await agent.stop();
      client.close();
    },
  });
}

export interface ClusterControllerCommandOptions {
  readonly etcd: string;
  readonly prefix?: string;
  readonly root?: string;
  readonly disksRoot?: string;
  readonly identity?: string;
  readonly leaseTtl?: string;
  readonly maxWaitForUnmount?: string;
  readonly snapshotEvery?: string;
  readonly csi?: readonly string[];
  /** Stand by holding nothing: no warm world, no inputs kept (ClusterControllerOptions.warmStandby). */
  readonly coldStandby?: boolean;
}

/** Exit status of a replica that lost its leadership (a supervisor restarts it as a standby). */
export const exitLostLeadership = 3;

export async function clusterControllerCommand(
  opts: ClusterControllerCommandOptions & { metricsAddress?: string },
  logger: Logger,
): Promise<number> {
  if (opts.metricsAddress !== undefined)
    throw new UsageError(
      "--metrics-address is not served with --etcd yet (a replica's controller changes with " +
        'its leadership): scrape the node agents, or run vole controller --manifests',
    );
  const root = opts.root ?? defaultRoot;
  mkdirSync(root, { recursive: true });
  const say = progressPrinter();
  const identity = opts.identity ?? `${hostname()}-${process.pid}`;
  const client = clientFor(opts.etcd);
  const controller = new ClusterController({
    client: new EtcdStore(client),
    keys: new ClusterKeys(opts.prefix ?? defaultPrefix),
    identity,
    plugins: builtinPlugins({
      root,
      ...(opts.disksRoot === undefined ? {} : { disksRoot: opts.disksRoot }),
    }),
    logger,
    leaseTtlS: seconds(opts.leaseTtl, leaseTtlSDefault, '--lease-ttl'),
    maxWaitForUnmountMs: durationMs(
      opts.maxWaitForUnmount,
      maxWaitForUnmountMsDefault,
      '--max-wait-for-unmount',
    ),
    ...(opts.snapshotEvery === undefined
      ? {}
      : { snapshotEveryEvents: seconds(opts.snapshotEvery, 1, '--snapshot-every') }),
    warmStandby: opts.coldStandby !== true,
    say,
  });
  // CSI drivers before the campaign: their capabilities are in the leader's EngineStarted.
  const nodeIdOf = (driver: string, node: string) => controller.csiNodeId(driver, node);
  const csi = await startCsi(opts, { root, plugins: controller.plugins, logger, say, nodeIdOf });
  say(`vole controller ${identity}: etcd ${opts.etcd}, campaigning`);
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  try {
    const result = await controller.run(stop.signal);
    say(result.message);
    return result.lost ? exitLostLeadership : 0;
  } catch (error) {
    if (stop.signal.aborted) return 0;
    throw new UsageError(describeEtcdError(error, opts.etcd));
  } finally {
    csi.stop();
    client.close();
  }
}
