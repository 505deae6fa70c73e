/**
 * VolumeManager: the facade agents import (behaviour K2.5), on top of the engine.
 *
 *   const vm = await VolumeManager.open({ node: 'node-1', plugins, db: 'vole.db' });
 *   vm.start();
 *   vm.inputs.addPod(pod);
 *   vm.inputs.markSourcesReady();    // every pod reported: unmounts and detaches may start
 *   await vm.waitForAttachAndMount(pod.metadata.uid);
 *
 * Its calls are grouped by the kubelet's seams (volume-manager-seams.ts): `vm.inputs`
 * (the desired-state populator's), `vm.status` (the reconciler's answers) and
 * `vm.operator` (an operator's requests); the facade keeps the lifecycle and the waits.
 */
import pino, { type Logger } from 'pino';
import { podAttachAndMountTimeoutMs } from '../constants.js';
import type { NewEvent, NodeAllocatable } from '../events/index.js';
import type { ObjectContents } from '../sources/contents.js';
import { type Clock, RealClock } from '../clock.js';
import { UniquePodName } from '../ids.js';
import { claimVolumes, measureVolumes, VoleMetrics } from '../metrics/index.js';
import { PluginManager } from '../plugins/manager.js';
import { why as whyAnswer, whyText } from '../postmortem/why.js';
import type { VolumePlugin } from '../plugins/types.js';
import {
  getPossiblyMountedVolumesForPod,
  podWaitStatus,
  type PodWaitStatus,
  waitErrorMessage,
} from '../kubelet/index.js';
import type { World } from '../kubelet/types.js';
import { kubeletCore } from '../engine/cores.js';
import { Engine, type EventListener } from '../engine/engine.js';
import { Executor } from '../execute/executor.js';
import type { ControllerAttachedCheck } from '../execute/ops/attach.js';
import type { Operation } from '../kubelet/planner.js';
import { checkHost, type HostObservation } from './host-check.js';
import { DesiredStateInputs, ReconcilerStatus } from './volume-manager-seams.js';
import { OperatorRequests, resolveOperatorRequest } from './operator.js';
import { cleanUpOrphans } from './orphans.js';
import type { EventSink } from '../engine/sink.js';
import {
  type LogOptions,
  openLogFor,
  type OpenOptions,
  restoreWorld,
  type SnapshotPolicy,
  holds,
  type WaitOptions,
  type WaitUntilOptions,
  waitOnEvents,
} from './lifecycle.js';

export interface VolumeManagerOptions {
  /** This node's name. */
  readonly node: string;
  /** The plugins, or a manager holding them. */
  readonly plugins: readonly VolumePlugin[] | PluginManager;
  /**
   * Kubernetes' enableControllerAttachDetach (default true): the attach/detach controller
   * attaches; this node verifies. false: this node attaches and detaches itself.
   */
  readonly controllerAttachDetach?: boolean;
  /**
   * Controller-attach mode: a fresh read of the node's status.volumesAttached, made right
   * before a volume is taken as attached (Kubernetes mode: a GET of the Node). Without it
   * the world's copy decides, enough where the controller's writes reach the world in
   * order with the node's own report (cluster mode's store, a manifest directory).
   */
  readonly controllerAttachedCheck?: ControllerAttachedCheck;
  /**
   * Whether this node's planner binds claims to PersistentVolumes (default true). false in
   * cluster mode: the leading controller binds and writes the claims' status; the node
   * reads it.
   */
  readonly bindClaims?: boolean;
  /**
   * The node's allocatable resources, recorded in EngineStarted: what a downwardAPI
   * `resourceFieldRef` writes where the container sets no limit. Absent: such a file
   * cannot be written (`vole run` reads the host's when not given).
   */
  readonly allocatable?: NodeAllocatable;
  /**
   * Whether serviceAccountToken projections are served (default false: refused, as no
   * token issuer is known). true needs builtinPlugins({ tokens }) to ask for the tokens.
   */
  readonly tokenRequests?: boolean;
  /**
   * Whether CSIDriver objects decide if a CSI driver's volumes need attaching, as the
   * kubelet's CSI plugin (Kubernetes mode; default false: the driver's capability decides).
   */
  readonly csiDriverObjects?: boolean;
  /** Where events go, and what the log held before (a restart). In memory by default. */
  readonly log?: LogOptions<World>;
  /** Snapshot policy (VolumeManager.open sets it for SQLite logs). */
  readonly snapshot?: SnapshotPolicy<World>;
  readonly clock?: Clock;
  readonly logger?: Logger;
  /**
   * Where ConfigMap and Secret data goes (the one the configMap, secret and projected
   * plugins read: builtinPlugins({ contents })). The log gets a content hash only.
   */
  readonly contents?: ObjectContents;
}

/** VolumeManager.open's options: the volume manager's, and the SQLite log's. */
export type VolumeManagerOpenOptions = Omit<VolumeManagerOptions, 'log' | 'snapshot'> & OpenOptions;

/** WaitForAttachAndMount failed: the kubelet's message, and the lists it names. */
export class WaitForAttachAndMountError extends Error {
  override name = 'WaitForAttachAndMountError';
  constructor(
    message: string,
    readonly status: PodWaitStatus,
  ) {
    super(message);
  }
}

export class VolumeManager {
  private readonly engine: Engine<World, Operation>;
  private readonly clock: Clock;

  /**
   * The metrics of this volume manager, in a prom-client Registry of its own
   * (`vm.metrics.registry`): derived from the events it appends, the world, and statfs
   * of mounted claim volumes.
   */
  readonly metrics: VoleMetrics;
  /** What the desired-state populator is told: pods, objects, CSI drivers, node status. */
  readonly inputs: DesiredStateInputs;
  /** What the reconciler's work answers: volumes in use, a pod's mounted volumes. */
  readonly status: ReconcilerStatus;
  /** An operator's requests: detach a volume, release a pod's volume, retry now. */
  readonly operator: OperatorRequests;

  private constructor(
    engine: Engine<World, Operation>,
    clock: Clock,
    private readonly sink: EventSink,
    private readonly plugins: PluginManager,
    contents: ObjectContents | undefined,
    metrics: VoleMetrics,
    /** The seq of the snapshot the world was loaded from (0: none, folded from the start). */
    readonly restoredFromSeq: number,
  ) {
    this.engine = engine;
    this.clock = clock;
    this.metrics = metrics;
    this.inputs = new DesiredStateInputs(engine, clock, contents);
    this.status = new ReconcilerStatus(engine);
    this.operator = new OperatorRequests(engine, clock, {
      who: 'the volume manager',
      resolve: (input) => resolveOperatorRequest(engine.world, input),
      doneTimeoutMsDefault: podAttachAndMountTimeoutMs,
      durable: () => {
        const durable = sink.whenDurable?.();
        if (durable === undefined) sink.flush();
        return durable;
      },
    });
    engine.subscribe((event, world) => metrics.observe(event, world));
  }

  /**
   * Opens (or creates) the SQLite log at `db` and builds a volume manager on it: the
   * latest snapshot is loaded and the events after it folded back first (a restart).
   */
  static open(opts: VolumeManagerOpenOptions): VolumeManager {
    const opened = openLogFor(kubeletCore, opts);
    return VolumeManager.build({ ...opts, ...opened }, opened.restoredFromSeq);
  }

  /** Builds a volume manager; a log with history is folded back first (restart). */
  static create(opts: VolumeManagerOptions): VolumeManager {
    return VolumeManager.build(opts, 0);
  }

  private static build(opts: VolumeManagerOptions, restoredFromSeq: number): VolumeManager {
    const clock = opts.clock ?? new RealClock();
    const plugins =
      opts.plugins instanceof PluginManager ? opts.plugins : new PluginManager(opts.plugins);
    const { log, world } = restoreWorld(kubeletCore, opts.log);
    let current: () => World = () => world;
    const metrics = new VoleMetrics({
      source: { reader: kubeletCore.reader, world: () => current() },
      volumeStats: () => measureVolumes(claimVolumes(current(), plugins)),
      appendLatency: true,
    });
    log.sink.onCommitted?.((seconds) => metrics.observeAppend(seconds));
    const engine = new Engine({
      core: kubeletCore,
      runner: (host) => new Executor(host, opts.controllerAttachedCheck),
      config: {
        node: opts.node,
        controllerAttachDetach: opts.controllerAttachDetach ?? true,
        ...(opts.bindClaims === false ? { bindClaims: false } : {}),
        ...(opts.allocatable === undefined ? {} : { allocatable: opts.allocatable }),
        ...(opts.tokenRequests === true ? { tokenRequests: true } : {}),
        ...(opts.csiDriverObjects === true ? { csiDriverObjects: true } : {}),
      },
      plugins,
      clock,
      sink: log.sink,
      logger: opts.logger ?? pino({ level: 'silent' }),
      world,
      ...(opts.snapshot === undefined ? {} : { snapshot: opts.snapshot }),
    });
    current = () => engine.world;
    return new VolumeManager(
      engine,
      clock,
      log.sink,
      plugins,
      opts.contents,
      metrics,
      restoredFromSeq,
    );
  }

  /**
   * False while the log is not known whole (the whole-file check a restart starts in the
   * background is still running) or was found damaged: nothing has been written to it or
   * done on the host since the start. True for a log in memory.
   */
  get logVerified(): boolean {
    return this.sink.verified !== false;
  }

  /** The current world (read-only by contract: change it only through events). */
  get world(): World {
    return this.engine.world;
  }

  get isRunning(): boolean {
    return this.engine.isRunning;
  }

  /** What waitOnEvents re-checks on: this engine's events, on its clock. */
  private get waitHost() {
    return { clock: this.clock, subscribe: (l: EventListener<World>) => this.subscribe(l) };
  }

  /**
   * Starts the engine: records EngineStarted, which closes what a crash left in flight,
   * then what a host check found (see checkHost), before anything is planned.
   */
  start(opts: { hostObserved?: HostObservation } = {}): void {
    this.engine.start();
    const seen = opts.hostObserved;
    if (seen !== undefined && seen.attachments.length + seen.mounts.length > 0) {
      this.append({ type: 'HostObserved', tsMs: this.clock.nowMs(), ...seen });
    }
  }

  /**
   * Asks the plugins about every pair the log leaves uncertain or in flight. Call it
   * before start() on a restart: it must not race running operations.
   */
  checkHost(): Promise<HostObservation> {
    return checkHost(this.world, this.plugins);
  }

  /** Stops planning; calls still running are cut off as in a crash. Closes the log. */
  stop(): void {
    this.engine.stop();
    this.sink.close();
  }

  /** Lets running operations finish, then stops. */
  async drainAndStop(): Promise<void> {
    await this.engine.drainAndStop();
    this.sink.close();
  }

  private append(event: NewEvent): void {
    this.engine.append(event);
  }

  /**
   * Finds what lies under the builtin plugins' `root` that the log does not know (pod
   * volume directories, device mounts, loop devices: behaviour K3.7, src/agent/orphans.ts),
   * records each as a ReportRaised event, durable before it is touched, and cleans it up.
   * Call it once every pod is known (after markSourcesReady).
   */
  cleanUpOrphans(root: string): ReturnType<typeof cleanUpOrphans> {
    return cleanUpOrphans({
      root,
      world: () => this.world,
      record: async (report) => {
        this.append({
          type: 'ReportRaised',
          tsMs: this.clock.nowMs(),
          node: this.world.config.node,
          ...report,
        });
        const durable = this.sink.whenDurable?.();
        if (durable === undefined) this.sink.flush();
        else await durable;
      },
    });
  }

  /** Every event appended from now on, with the world after it. Returns unsubscribe. */
  subscribe(listener: EventListener<World>): () => void {
    return this.engine.subscribe(listener);
  }

  /**
   * Resolves once `done()` holds (a question to `vm.status` or `vm.world`), re-checking
   * after every event; rejects after `timeoutMs` (default 2 min 3 s) naming `what`.
   */
  waitUntil(done: () => boolean, opts: WaitUntilOptions = {}): Promise<void> {
    const timeoutMs = opts.timeoutMs ?? podAttachAndMountTimeoutMs;
    return waitOnEvents(this.waitHost, timeoutMs, holds(done, opts.what));
  }

  /**
   * The kubelet's WaitForUnmount: resolves when the pod has no Mounted volume left
   * (uncertain ones do not hold it up; use hasPossiblyMountedVolumes for the stronger check).
   */
  waitForUnmount(uid: string, opts: WaitOptions = {}): Promise<void> {
    const pod = UniquePodName(uid);
    return waitOnEvents(this.waitHost, opts.timeoutMs ?? podAttachAndMountTimeoutMs, (cause) => {
      const names = getPossiblyMountedVolumesForPod(this.world, pod)
        .filter((m) => m.value !== 'mountUncertain')
        .map((m) => m.volume); // in-flight calls count
      if (names.length === 0) return true;
      return cause === 'timeout'
        ? new Error(`mounted volumes=[${names.join(' ')}]: timed out waiting for the condition`)
        : false;
    });
  }

  /**
   * The kubelet's WaitForAttachAndMount: resolves when every volume the pod's containers
   * use is mounted; rejects at once when a volume cannot be processed, or after `timeoutMs`
   * (default 2 min 3 s) with the kubelet's message plus the last error of each volume.
   * Event-driven: it re-checks after each event, it does not poll.
   */
  waitForAttachAndMount(uid: string, opts: WaitOptions = {}): Promise<void> {
    const pod = UniquePodName(uid);
    // The kubelet's ReprocessPod first, so remount-requiring volumes are set up again.
    const known = this.world.pods.get(pod);
    if (known !== undefined && this.engine.isRunning)
      this.append({ type: 'PodUpserted', tsMs: this.clock.nowMs(), pod: known.pod });
    return waitOnEvents(
      this.waitHost,
      opts.timeoutMs ?? podAttachAndMountTimeoutMs,
      (cause, again) => {
        const status = podWaitStatus(this.world, pod);
        if (!status.known)
          return new WaitForAttachAndMountError(
            `pod ${uid} is not known to the volume manager; add it first`,
            status,
          );
        if (status.ready) return true;
        const early = cause === 'start' || cause === 'event';
        if (status.errors.length > 0 && (early || (cause === 'recheck' && !this.engine.idle))) {
          // The planner may not have looked yet (a claim about to bind): ask again once its
          // tick is over and nothing is left to plan.
          again();
          return false;
        }
        const why =
          status.errors.length > 0
            ? status.errors.join('; ')
            : cause === 'timeout'
              ? 'timed out waiting for the condition'
              : null;
        if (why === null) return false;
        const explained = whyAnswer(this.world, pod);
        const message = `${waitErrorMessage(status, why)}${explained === undefined ? '' : `\n${whyText(explained)}`}`;
        return new WaitForAttachAndMountError(message, status);
      },
    );
  }
}
