/**
 * ControllerManager: the attach/detach controller as a library, beside VolumeManager.
 * Feed it cluster objects (Nodes, PersistentVolumes, claims) and scheduled pods; it
 * attaches and detaches through the plugins and publishes node.status.volumesAttached.
 *
 *   const cm = ControllerManager.open({ db: 'controller.db', plugins });
 *   cm.start();
 *   cm.upsertObject(node); cm.upsertObject(pv); cm.upsertPod(pod);
 *   cm.volumesAttached('node-1');   // what node-1's status lists
 *
 * A SQLite log keeps snapshots of the controller's world, so a restart loads the latest
 * one and folds only the events after it.
 */
import pino, { type Logger } from 'pino';
import { snapshotEveryEvents } from '../constants.js';
import { maxWaitForUnmountMsDefault } from '../controller/index.js';
import { ControllerExecutor } from '../execute/controller-executor.js';
import { startAttachmentVerifier } from '../execute/verify-attachments.js';
import type { ControllerOperation } from '../controller/plan.js';
import {
  attachmentAt,
  allAttachments,
  type ControllerWorld,
  allDesired,
  pairKey,
} from '../controller/types.js';
import { controllerCore } from '../engine/cores.js';
import { Engine, type EventListener } from '../engine/engine.js';
import { type EventSink, MemorySink } from '../engine/sink.js';
import { VoleMetrics } from '../metrics/index.js';
import type { NewEvent, VoleEvent } from '../events/index.js';
import { NodeName, UniqueVolumeName } from '../ids.js';
import type { ClusterObject, ManifestObject, Pod } from '../events/k8s.js';
import { planBindings } from '../binding/decide.js';
import { toLoggedObject } from '../sources/contents.js';
import { type Clock, RealClock } from '../clock.js';
import { PluginManager } from '../plugins/manager.js';
import type { VolumePlugin } from '../plugins/types.js';
import { claimIdentitiesOf, withUid } from '../sources/identities.js';
import type { ManifestChanges } from '../sources/manifests.js';
import { lookupOf } from '../binding/claims.js';
import { type OperatorRequest, type OperatorRequestInput, OperatorRequests } from './operator.js';
import { openSqliteLog } from './sqlite-log.js';
import type { GroupCommitterOptions } from '../log/group-commit.js';

export interface ControllerManagerOptions {
  /** The plugins that attach and detach, or a manager holding them. */
  readonly plugins: readonly VolumePlugin[] | PluginManager;
  /**
   * Where events go, with what the log held before (a restart): its events, or the world
   * already loaded from it (a snapshot plus the tail). In memory by default.
   */
  readonly log?: { sink: EventSink; history: Iterable<VoleEvent>; world?: ControllerWorld };
  readonly snapshot?: {
    everyEvents: number;
    save: (world: ControllerWorld) => void;
    lastSeq: number;
  };
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
  /** The periodic VerifyVolumesAreAttached (§3.7; default on, every 60 s). */
  readonly verifyAttachments?: boolean;
  readonly clock?: Clock;
  readonly logger?: Logger;
}

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
  ) {
    engine.subscribe((event, world) => metrics.observe(event, world));
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
  static open(
    opts: Omit<ControllerManagerOptions, 'log' | 'snapshot'> & {
      db: string;
      durability?: 'full' | 'normal';
      snapshotEveryEvents?: number;
      /** Told when the log cannot be written (disk full) and when it can again. */
      logBlocked?: GroupCommitterOptions;
    },
  ): ControllerManager {
    const log = openSqliteLog(opts.db, controllerCore, {
      ...(opts.durability === undefined ? {} : { durability: opts.durability }),
      ...(opts.logBlocked === undefined ? {} : { blocked: opts.logBlocked }),
    });
    const manager = ControllerManager.create({
      ...opts,
      log: { sink: log.sink, history: [], world: log.loadWorld() },
      snapshot: {
        everyEvents: opts.snapshotEveryEvents ?? snapshotEveryEvents,
        save: (world) => log.saveSnapshot(world),
        lastSeq: log.lastSnapshotSeq,
      },
    });
    manager.restoredFromSeq = log.restoredFromSeq;
    return manager;
  }

  /** The seq of the snapshot the world was loaded from (0: none, folded from the start). */
  restoredFromSeq = 0;

  static create(opts: ControllerManagerOptions): ControllerManager {
    const clock = opts.clock ?? new RealClock();
    const plugins =
      opts.plugins instanceof PluginManager ? opts.plugins : new PluginManager(opts.plugins);
    const log: NonNullable<ControllerManagerOptions['log']> = opts.log ?? {
      sink: new MemorySink(),
      history: [],
    };
    const world = log.world ?? controllerCore.initialWorld();
    for (const event of log.history) if (event.seq > world.seq) controllerCore.fold(world, event);
    let current = () => world;
    const metrics = new VoleMetrics({
      source: { reader: controllerCore.reader, world: () => current() },
      appendLatency: true,
    });
    log.sink.onCommitted?.((seconds) => metrics.observeAppend(seconds));
    const engine = new Engine({
      core: controllerCore,
      runner: (host) => new ControllerExecutor(host),
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
    return new ControllerManager(engine, { ...opts, clock, plugins }, log.sink, metrics);
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

  private append(event: NewEvent): void {
    this.engine.append(event);
  }

  /**
   * An object as the log holds it: a claim without a UID with the one the world knows it
   * by (else a new one), a ConfigMap or Secret as its content hash.
   */
  loggedObject(object: ManifestObject): ClusterObject {
    return toLoggedObject(withUid(object, claimIdentitiesOf(lookupOf(this.engine.world.objects))));
  }

  /** A Node, PersistentVolume or claim was added or changed (a ConfigMap or Secret: its hash). */
  upsertObject(object: ManifestObject): void {
    const logged = this.loggedObject(object);
    this.append({ type: 'ObjectUpserted', tsMs: this.opts.clock.nowMs(), object: logged });
  }

  removeObject(ref: { kind: ManifestObject['kind']; name: string; namespace?: string }): void {
    this.append({ type: 'ObjectRemoved', tsMs: this.opts.clock.nowMs(), ...ref });
  }

  /** A pod was added or changed (its spec.nodeName schedules it). */
  upsertPod(pod: Pod): void {
    this.append({ type: 'PodUpserted', tsMs: this.opts.clock.nowMs(), pod });
  }

  removePod(uid: string): void {
    this.append({ type: 'PodRemoved', tsMs: this.opts.clock.nowMs(), uid });
  }

  /**
   * What the API server shows attached as this controller begins to lead (another
   * leader's work): the world adopts what it lacks before it plans anything.
   */
  attachmentsFound(
    attachments: readonly { volume: string; node: string; pv: string; attached: boolean }[],
  ): void {
    this.append({
      type: 'AttachmentsFound',
      tsMs: this.opts.clock.nowMs(),
      attachments: [...attachments],
    });
  }

  /** A manifest directory's changes, in the order that keeps references resolvable. */
  apply(changes: ManifestChanges): void {
    for (const object of changes.upsertObjects) this.upsertObject(object);
    for (const pod of changes.upsertPods) this.upsertPod(pod);
    for (const uid of changes.removePods) this.removePod(uid);
    for (const ref of changes.removeObjects) this.removeObject(ref);
  }

  /** node.status.volumesAttached of `node`, sorted by volume name. */
  volumesAttached(node: string): { name: string; devicePath: string }[] {
    const reported = this.world.reported.get(NodeName(node));
    return [...(reported ?? [])].sort().map((name) => ({
      name,
      devicePath: attachmentAt(this.world, pairKey(name, node))?.devicePath ?? '',
    }));
  }

  /** Every desired attachment confirmed, nothing else attached, nothing running. */
  settled(): boolean {
    const world = this.world;
    if (world.running.size > 0) return false;
    // A claim the planner is about to bind: its pods' attachments are not desired yet.
    if (world.unboundClaims.size > 0 && planBindings(world, 0).length > 0) return false;
    for (const pair of world.pairs.values())
      if (pair.pods === null || !pair.value.startsWith('attached')) return false;
    return true;
  }

  /**
   * Resolves once the controller is settled (every desired attachment confirmed, nothing
   * else attached, nothing running), re-checking after each event; rejects after
   * `timeoutMs` (default 60 s) naming what is still pending.
   */
  waitUntilSettled(opts: { timeoutMs?: number } = {}): Promise<void> {
    const { clock } = this.opts;
    return new Promise((resolve, reject) => {
      const check = (timedOut: boolean) => {
        if (this.settled()) finish(resolve);
        else if (timedOut)
          finish(() =>
            reject(
              new Error(
                `controller not settled: ${this.world.running.size} operation(s) running, ` +
                  `${[...allDesired(this.world)].length} desired and ${[...allAttachments(this.world)].length} known attachment(s): timed out`,
              ),
            ),
          );
      };
      const timer = clock.setTimer(clock.nowMs() + (opts.timeoutMs ?? 60_000), () => check(true));
      const unsubscribe = this.subscribe(() => check(false));
      let done = false;
      const finish = (fn: () => void) => {
        if (done) return;
        done = true;
        unsubscribe();
        clock.clearTimer(timer);
        fn();
      };
      check(false);
    });
  }

  /** Every event appended from now on, with the world after it. Returns unsubscribe. */
  subscribe(listener: EventListener<ControllerWorld>): () => void {
    return this.engine.subscribe(listener);
  }
}
