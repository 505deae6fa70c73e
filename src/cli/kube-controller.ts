/**
 * `vole controller --kubeconfig FILE`: the attach/detach controller on a real API server
 * (src/kube/controller.ts), one replica of several behind a Lease. Exits with
 * exitLostLeadership when the Lease is lost (a supervisor starts it again as a standby).
 */
import { mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { RealClock } from '../clock.js';
import { maxWaitForUnmountMsDefault } from '../controller/index.js';
import { defaultRoot } from '../host/paths.js';
import { KubeController, type KubeControllerName, kubeControllers } from '../kube/controller.js';
import { KubeHttp } from '../kube/http.js';
import { LogDamagedError } from '../log/errors.js';
import { parseDurationMs } from '../sim/duration.js';
import { exitLostLeadership } from './cluster-run.js';
import { damageWatch, logBlockedReporter, progressPrinter } from './lifecycle.js';
import { UsageError } from './postmortem.js';

export interface KubeControllerCommandOptions {
  readonly kubeconfig: string;
  readonly root?: string;
  readonly db?: string;
  readonly identity?: string;
  /** namespace/name of the Lease (default kube-system/vole-attach-detach). */
  readonly lease?: string;
  /** Seconds (default 15, as kube-controller-manager's --leader-elect-lease-duration). */
  readonly leaseDuration?: string;
  readonly maxWaitForUnmount?: string;
  /** Comma-separated: attachdetach, persistentvolume-binder (default attachdetach). */
  readonly controllers?: string;
}

/** The --controllers list, each a name kubeControllers knows. */
function controllersOf(text: string | undefined): KubeControllerName[] {
  const names = (text ?? 'attachdetach').split(',').map((n) => n.trim());
  for (const name of names)
    if (!(kubeControllers as readonly string[]).includes(name))
      throw new UsageError(`--controllers: "${name}" is not one of ${kubeControllers.join(', ')}`);
  return names as KubeControllerName[];
}

function durationMs(text: string | undefined, fallback: number, what: string): number {
  if (text === undefined) return fallback;
  const ms = parseDurationMs(text);
  if (ms === undefined || ms <= 0)
    throw new UsageError(`${what}: "${text}" is not a duration (e.g. 6m, 15s, 500ms)`);
  return ms;
}

function leaseOf(text: string | undefined): { namespace: string; name: string } {
  const [namespace, name, ...rest] = (text ?? 'kube-system/vole-attach-detach').split('/');
  if (namespace === undefined || name === undefined || rest.length > 0 || !namespace || !name)
    throw new UsageError(`--lease must be NAMESPACE/NAME, not "${text}"`);
  return { namespace, name };
}

export async function kubeControllerCommand(
  opts: KubeControllerCommandOptions,
  logger: Logger,
): Promise<number> {
  const root = opts.root ?? defaultRoot;
  mkdirSync(root, { recursive: true });
  const db = opts.db ?? join(root, 'controller.db');
  const lease = leaseOf(opts.lease);
  const leaseDurationMs = durationMs(opts.leaseDuration, 15_000, '--lease-duration');
  const maxWaitForUnmountMs = durationMs(
    opts.maxWaitForUnmount,
    maxWaitForUnmountMsDefault,
    '--max-wait-for-unmount',
  );
  let http: KubeHttp;
  try {
    http = KubeHttp.fromFile(opts.kubeconfig);
  } catch (error) {
    throw new UsageError(`--kubeconfig ${opts.kubeconfig}: ${(error as Error).message}`);
  }
  const say = progressPrinter();
  const { logBlocked, found: damaged } = damageWatch(logBlockedReporter(say));
  const identity = opts.identity ?? `${hostname()}-${process.pid}`;
  const controller = new KubeController({
    http,
    // Its timers hold the process, as setTimeout did: a standby may wait on nothing else.
    clock: new RealClock({ holdsProcess: true }),
    db,
    identity,
    leaseNamespace: lease.namespace,
    leaseName: lease.name,
    leaseDurationMs,
    maxWaitForUnmountMs,
    controllers: controllersOf(opts.controllers),
    logger,
    say,
    onManager: (cm) => showProgress(cm, say),
    logBlocked,
  });
  say(`vole controller ${identity}: ${http.server}, Lease ${lease.namespace}/${lease.name}`);
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  let result: { lost: boolean; message: string };
  try {
    result = await stopOnDamage(controller.run(stop.signal), damaged, stop);
  } catch (error) {
    if (stop.signal.aborted && !(error instanceof LogDamagedError)) return 0; // stopped while a standby
    throw error;
  }
  say(result.message);
  return result.lost ? exitLostLeadership : 0;
}

/** How long a controller stopped by a damaged log may take to give its Lease up. */
const resignMsMax = 5_000;

/**
 * The run, unless the log is found damaged first: then the controller stops acting at once
 * (nothing more is appended or called; running calls are cut off) and gives its Lease up
 * so a replica on a sound log may lead, and the damage is thrown (exit 2 with the advice).
 */
async function stopOnDamage<T>(
  run: Promise<T>,
  damaged: Promise<LogDamagedError>,
  stop: AbortController,
): Promise<T> {
  const outcome = await Promise.race([
    run.then((value) => ({ value })),
    damaged.then((error) => ({ error })),
  ]);
  if (!('error' in outcome)) return outcome.value;
  stop.abort();
  let timer: NodeJS.Timeout | undefined;
  const capped = new Promise<void>((resolve) => (timer = setTimeout(resolve, resignMsMax)));
  await Promise.race([run.catch(() => undefined), capped]);
  clearTimeout(timer);
  throw outcome.error;
}

/** Multi-Attach reports, attach and detach outcomes and each node's volumesAttached. */
function showProgress(
  cm: Parameters<NonNullable<ConstructorParameters<typeof KubeController>[0]['onManager']>>[0],
  say: (line: string) => void,
): void {
  const shown = new Map<string, string>();
  cm.subscribe((event, world) => {
    if (event.type === 'ReportRaised') say(`${event.reason} pod ${event.pod}: ${event.message}`);
    if (event.type === 'OperationStarted' && event.forced !== undefined)
      say(`forced detach of ${event.volume} from ${event.node ?? ''}: ${event.forced}`);
    if (event.type === 'CallFailed') say(`${event.call} failed: ${event.error.message}`);
    for (const [node, volumes] of world.reported) {
      const text = [...volumes].sort().join(' ');
      if (shown.get(node) === text) continue;
      shown.set(node, text);
      say(`node ${node}: volumesAttached [${text}]`);
    }
  });
}
