/**
 * ControllerManager: the attach/detach controller as a library, beside VolumeManager and
 * with its shape: `cm.inputs` (what it is told), `cm.status` (what its work answers),
 * `cm.operator` (an operator's requests), and the lifecycle and the wait on the facade.
 *
 *   const cm = ControllerManager.open({ db: 'controller.db', plugins });
 *   cm.start();
 *   cm.inputs.upsertObject(node); cm.inputs.upsertObject(pv); cm.inputs.addPod(pod);
 *   await cm.waitUntilSettled();
 *   cm.status.volumesAttached('node-1');   // what node-1's status lists
 *
 * A SQLite log keeps snapshots of the controller's world, so a restart loads the latest
 * one and folds only the events after it.
 */
import pino, { type Logger } from 'pino';
import { maxWaitForUnmountMsDefault } from '../controller/index.js';
import { ControllerExecutor, type NodeInUseCheck } from '../execute/controller-executor.js';
import { startAttachmentVerifier } from '../execute/verify-attachments.js';
import type { ControllerOperation } from '../controller/plan.js';
import { allAttachments, type ControllerWorld, allDesired } from '../controller/types.js';
import { controllerCore } from '../engine/cores.js';
import { Engine, type EventListener } from '../engine/engine.js';
import type { EventSink } from '../engine/sink.js';
import { VoleMetrics } from '../metrics/index.js';
import type { ClusterObject, ManifestObject, Pod } from '../events/k8s.js';
import { UniqueVolumeName } from '../ids.js';
import { type Clock, RealClock } from '../clock.js';
import { PluginManager } from '../plugins/manager.js';
import type { VolumePlugin } from '../plugins/types.js';
import type { ManifestChanges } from '../sources/manifests.js';
import { type OperatorRequest, type OperatorRequestInput, OperatorRequests } from './operator.js';
import { ControllerInputs, ControllerStatus } from './controller-manager-seams.js';
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

export interface ControllerManagerOptions {
  /** The plugins that attach and detach, or a manager holding them. */
  readonly plugins: readonly VolumePlugin[] | PluginManager;
  /** Where events go, and what the log held before (a restart). In memory by default. */
  readonly log?: LogOptions<ControllerWorld>;
  /** Snapshot policy (ControllerManager.open sets it for SQLite logs). */
  readonly snapshot?: SnapshotPolicy<ControllerWorld>;
  /** ReconcilerMaxWaitForUnmountDuration (default 6 min). */
  readonly maxWaitForUnmountMs?: number;
  readonly disableForceDetachOnTimeout?: boolean;
  /**
   * The PV controller's part for classes no plugin here provisions: claims annotated for
   * Kubernetes' external-provisioner, PVs of gone claims Released (default off).
   */
  readonly externalProvisioning?: boolean;
  /** This controller is the pvc-protection controller (cluster mode on etcd; default off). */
  readonly pvcProtection?: boolean;
  /** The periodic VerifyVolumesAreAttached (behaviour C3.7; default on, every 60 s). */
  readonly verifyAttachments?: boolean;
  /**
   * A fresh read of a node's volumesInUse right before a detach that must verify, from
   * where the node writes it (cluster mode: the store). Without it the detach re-checks
   * the world's copy only, enough where the node's report reaches the world in order with
   * the detach (an in-process agent, a manifest directory).
   */
  readonly nodeInUseCheck?: NodeInUseCheck;
  readonly clock?: Clock;
  readonly logger?: Logger;
}

/** ControllerManager.open's options: the controller's, and the SQLite log's. */
export type ControllerManagerOpenOptions = Omit<ControllerManagerOptions, 'log' | 'snapshot'> &
  OpenOptions;

/** An operator's request named against the controller's world (or why it does not resolve). */
function resolveControllerRequest(
  world: ControllerWorld,
  input: OperatorRequestInput,
): OperatorRequest | string {
  if (!world.nodesByVolume.has(UniqueVolumeName(input.volume)))
    return `the controller knows no volume ${input.volume}: give its UniqueVolumeName (vole status --db lists them)`;
  return {
    action: input.action,
    volume: input.volume,
    ...(input.node === undefined ? {} : { node: input.node }),
    reason: input.reason,
    force: input.force,
  };
}

export class ControllerManager {
  private stopVerifier: () => void = () => {};
  /** What the controller is told: pods, Nodes, PersistentVolumes, claims. */
  readonly inputs: ControllerInputs;
  /** What its work answers: a node's volumesAttached, whether it has settled. */
  readonly status: ControllerStatus;
  /**
   * An operator's requests (`vole detach VOLUME --node N --controller`, `vole retry`): the
   * same seam as VolumeManager's (`request`, `done`, `serve`), decided by the controller's
   * planner.
   */
  readonly operator: OperatorRequests;

  private constructor(
    private readonly engine: Engine<ControllerWorld, ControllerOperation>,
    private readonly opts: ControllerManagerOptions & { clock: Clock; plugins: PluginManager },
    private readonly sink: EventSink,
    /**
     * The controller's metrics (attachdetach_controller_*, forced detaches, vole's own) in
     * a prom-client Registry of its own: `cm.metrics.registry`.
     */
    readonly metrics: VoleMetrics,
    /** The seq of the snapshot the world was loaded from (0: none, folded from the start). */
    readonly restoredFromSeq: number,
  ) {
    engine.subscribe((event, world) => metrics.observe(event, world));
    this.inputs = new ControllerInputs(engine, opts.clock);
    this.status = new ControllerStatus(engine);
    this.operator = new OperatorRequests(engine, opts.clock, {
      who: 'the controller',
      resolve: (input) => resolveControllerRequest(engine.world, input),
      doneTimeoutMsDefault: 120_000,
    });
  }

  /**
   * Opens (or creates) the SQLite log at `db`: a restart loads its latest snapshot and
   * folds only the events after it. A snapshot is written every `snapshotEveryEvents`.
   */
  static open(opts: ControllerManagerOpenOptions): ControllerManager {
    const opened = openLogFor(controllerCore, opts);
    return ControllerManager.build({ ...opts, ...opened }, opened.restoredFromSeq);
  }

  /** Builds a controller; a log with history is folded back first (restart). */
  static create(opts: ControllerManagerOptions): ControllerManager {
    return ControllerManager.build(opts, 0);
  }

  private static build(opts: ControllerManagerOptions, restoredFromSeq: number): ControllerManager {
    const clock = opts.clock ?? new RealClock();
    const plugins =
      opts.plugins instanceof PluginManager ? opts.plugins : new PluginManager(opts.plugins);
    const { log, world } = restoreWorld(controllerCore, opts.log);
    let current = () => world;
    const metrics = new VoleMetrics({
      source: { reader: controllerCore.reader, world: () => current() },
      appendLatency: true,
    });
    log.sink.onCommitted?.((seconds) => metrics.observeAppend(seconds));
    const engine = new Engine({
      core: controllerCore,
      runner: (host) => new ControllerExecutor(host, opts.nodeInUseCheck),
      config: {
        controller: {
          maxWaitForUnmountMs: opts.maxWaitForUnmountMs ?? maxWaitForUnmountMsDefault,
          disableForceDetachOnTimeout: opts.disableForceDetachOnTimeout ?? false,
          ...(opts.externalProvisioning === true ? { externalProvisioning: true } : {}),
          ...(opts.pvcProtection === true ? { pvcProtection: true } : {}),
        },
      },
      plugins,
      clock,
      sink: log.sink,
      logger: opts.logger ?? pino({ level: 'silent' }),
      world,
      ...(opts.snapshot === undefined ? {} : { snapshot: opts.snapshot }),
    });
    current = () => engine.world;
    const resolved = { ...opts, clock, plugins };
    return new ControllerManager(engine, resolved, log.sink, metrics, restoredFromSeq);
  }

  /** The controller's world (read-only by contract: change it only through events). */
  get world(): ControllerWorld {
    return this.engine.world;
  }

  get isRunning(): boolean {
    return this.engine.isRunning;
  }

  /** Records EngineStarted (which cuts off what a crash left in flight) and starts planning. */
  start(): void {
    this.engine.start();
    if (this.opts.verifyAttachments !== false) {
      this.stopVerifier = startAttachmentVerifier(this.engine, {
        plugins: this.opts.plugins,
        clock: this.opts.clock,
      });
    }
  }

  /** Stops planning; calls still running are cut off as in a crash. Closes the log. */
  stop(): void {
    this.stopVerifier();
    this.engine.stop();
    this.sink.close();
  }

  /** Lets running operations finish, then stops and closes the log. */
  async drainAndStop(): Promise<void> {
    this.stopVerifier();
    await this.engine.drainAndStop();
    this.sink.close();
  }

  /**
   * Resolves once `done()` holds (a question to `cm.status` or `cm.world`), re-checking
   * after every event; rejects after `timeoutMs` (default 60 s) naming `what`.
   */
  waitUntil(done: () => boolean, opts: WaitUntilOptions = {}): Promise<void> {
    return waitOnEvents(this.waitHost, opts.timeoutMs ?? 60_000, holds(done, opts.what));
  }

  /** What waitOnEvents re-checks on: this engine's events, on its clock. */
  private get waitHost() {
    return {
      clock: this.opts.clock,
      subscribe: (l: EventListener<ControllerWorld>) => this.subscribe(l),
    };
  }

  /**
   * Resolves once the controller is settled (every desired attachment confirmed, nothing
   * else attached, nothing running), re-checking after each event; rejects after
   * `timeoutMs` (default 60 s) naming what is still pending.
   */
  waitUntilSettled(opts: WaitOptions = {}): Promise<void> {
    return waitOnEvents(this.waitHost, opts.timeoutMs ?? 60_000, (cause) => {
      if (this.status.settled()) return true;
      if (cause !== 'timeout') return false;
      const world = this.world;
      return new Error(
        `controller not settled: ${world.running.size} operation(s) running, ` +
          `${[...allDesired(world)].length} desired and ${[...allAttachments(world)].length} known attachment(s): timed out`,
      );
    });
  }

  /** Every event appended from now on, with the world after it. Returns unsubscribe. */
  subscribe(listener: EventListener<ControllerWorld>): () => void {
    return this.engine.subscribe(listener);
  }

  // The names of before cm.inputs and cm.status, kept while callers move over.

  /** @deprecated Use `cm.inputs.loggedObject`. */
  loggedObject(object: ManifestObject): ClusterObject {
    return this.inputs.loggedObject(object);
  }

  /** @deprecated Use `cm.inputs.upsertObject`. */
  upsertObject(object: ManifestObject): void {
    this.inputs.upsertObject(object);
  }

  /** @deprecated Use `cm.inputs.removeObject`. */
  removeObject(ref: { kind: ManifestObject['kind']; name: string; namespace?: string }): void {
    this.inputs.removeObject(ref);
  }

  /** @deprecated Use `cm.inputs.addPod` (or `updatePod`), the volume manager's verbs. */
  upsertPod(pod: Pod): void {
    this.inputs.addPod(pod);
  }

  /** @deprecated Use `cm.inputs.removePod`. */
  removePod(uid: string): void {
    this.inputs.removePod(uid);
  }

  /** @deprecated Use `cm.inputs.attachmentsFound`. */
  attachmentsFound(
    attachments: readonly { volume: string; node: string; pv: string; attached: boolean }[],
  ): void {
    this.inputs.attachmentsFound(attachments);
  }

  /** @deprecated Use `cm.inputs.apply`. */
  apply(changes: Omit<ManifestChanges, 'contents'>): void {
    this.inputs.apply(changes);
  }

  /** @deprecated Use `cm.status.volumesAttached`. */
  volumesAttached(node: string): { name: string; devicePath: string }[] {
    return this.status.volumesAttached(node);
  }

  /** @deprecated Use `cm.status.settled`. */
  settled(): boolean {
    return this.status.settled();
  }
}
