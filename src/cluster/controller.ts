/**
 * The attach/detach controller in cluster mode: one replica of several. It campaigns for
 * the leader key; the leader loads the controller log from etcd (snapshot + tail), starts
 * the engine on it (EngineStarted makes calls the old leader left running uncertain, as
 * after a restart), follows the cluster through informers, and publishes each node's
 * volumesAttached. It binds claims (ClaimBound in its log) and writes each binding to the
 * claim and its PV in etcd; node agents only read bindings. Every write — log commits, snapshots, volumesAttached — is fenced on
 * the leader's term, and no plugin call starts before the events that announce it are
 * durable in etcd. Losing leadership stops everything at once.
 */
import type { Logger } from 'pino';
import { ControllerManager } from '../agent/controller-manager.js';
import { maxWaitForUnmountMsDefault } from '../controller/index.js';
import type { ControllerWorld } from '../controller/types.js';
import { controllerCore } from '../engine/cores.js';
import type { SliceStats } from '../operations/snapshot-codec.js';
import { type Clock, RealClock } from '../clock.js';
import type { VolumePlugin } from '../plugins/types.js';
import { objectKey } from '../events/k8s.js';
import { ClaimBindingWriter } from './bindings.js';
import { csiNodeIdAnnotation, decodeVolumesInUse, parseCsiNodeIds } from './status.js';
import { ClusterError } from './client.js';
import { ControllerInputs } from './controller-inputs.js';
import { InputsCache } from './inputs-cache.js';
import { EtcdEventLog, type LogLimits } from './etcd-log.js';
import type { ClusterKeys } from './keys.js';
import { Leadership, type LeadershipLost } from './leadership.js';
import { FencedPluginManager } from './fenced-plugins.js';
import { SnapshotPacer } from './snapshot-pacer.js';
import { VolumesAttachedPublisher } from './publisher.js';
import type { KvStore } from './store.js';
import { loadControllerWorld, WarmWorld } from './warm-world.js';

export interface ClusterControllerOptions {
  readonly client: KvStore;
  readonly keys: ClusterKeys;
  readonly identity: string;
  readonly plugins: readonly VolumePlugin[];
  readonly logger: Logger;
  readonly leaseTtlS?: number;
  readonly maxWaitForUnmountMs?: number;
  /** A snapshot after this many events; the entries before it are then compacted away. */
  readonly snapshotEveryEvents?: number;
  readonly clock?: Clock;
  readonly say?: (line: string) => void;
  /** How the log cuts its rows (default: etcd's limits). */
  readonly logLimits?: LogLimits;
  /** Told of each term as it starts leading, before its engine starts (tests, the simulation). */
  readonly onLead?: (term: LeadingTerm) => void;
  /**
   * Keep the controller's world current while standing by (default true), so that a win
   * folds only the log's last segments (warm-world.ts) and takes over the inputs it kept
   * (inputs-cache.ts); false loads it all and lists the cluster on winning.
   */
  readonly warmStandby?: boolean;
}

/** One term of this replica: its leadership, its log writer, its engine. */
export interface LeadingTerm {
  readonly leadership: Leadership;
  readonly log: EtcdEventLog;
  readonly manager: ControllerManager;
}

export const leaseTtlSDefault = 5;
const controllerSnapshotEveryEventsDefault = 10_000;

export { loadControllerWorld } from './warm-world.js';

export class ClusterController {
  private cm: ControllerManager | null = null;
  private snapshotting = false;
  private pacer: SnapshotPacer | null = null;
  private leadership: Leadership | null = null;
  /** Whether this replica's current term (a run that won) has ended: lost or stopped. */
  private termState: { ended: boolean } | null = null;
  private stops: (() => void | Promise<void>)[] = [];
  private readonly clock: Clock;
  private log: EtcdEventLog | null = null;
  /** The current term's volumesAttached writer (a detach waits for its node's write). */
  private publisher: VolumesAttachedPublisher | null = null;
  private readonly knownCsiNodeIds = new Map<string, string>();
  /**
   * The plugins, each call gated on the durability of the current term's log. More may be
   * registered at any time (a CSI driver registry adds its drivers here).
   */
  readonly plugins: FencedPluginManager;

  constructor(private readonly opts: ClusterControllerOptions) {
    this.clock = opts.clock ?? new RealClock();
    this.plugins = new FencedPluginManager(() => {
      const log = this.log;
      if (log === null)
        return Promise.reject(new Error('this replica does not lead: no call may start'));
      return log.durable();
    }, opts.plugins);
  }

  private say(line: string): void {
    this.opts.say?.(line);
  }

  get world(): ControllerWorld | undefined {
    return this.cm?.world;
  }

  /**
   * Campaigns, then leads until leadership is lost or `signal` aborts; resolves with why it
   * ended. While it stands by it keeps the world warm (WarmWorld) and the leader's inputs
   * listed and watched (InputsCache), so that winning waits neither on the whole log nor on
   * a list of the whole cluster.
   */
  async run(signal: AbortSignal): Promise<{ lost: boolean; message: string }> {
    const { client, keys } = this.opts;
    const warm = this.warmStandby();
    const inputsCache = this.standbyInputs();
    const leadership = await Leadership.campaign(client, keys, {
      identity: this.opts.identity,
      ttlS: this.opts.leaseTtlS ?? leaseTtlSDefault,
      clock: this.clock,
      signal,
      say: (line) => this.say(line),
    }).catch(async (error: unknown) => {
      await warm?.stop();
      await inputsCache?.stop();
      throw error;
    });
    this.leadership = leadership;
    // Ended as soon as it is lost or stopped, before the halt's awaits: a snapshot being
    // encoded stops at its next turn.
    const term = { ended: false };
    this.termState = term;
    const ended = new Promise<{ lost: boolean; message: string }>((resolve) => {
      leadership.onLost((error: LeadershipLost) => {
        term.ended = true;
        resolve({ lost: true, message: error.message });
      });
      signal.addEventListener(
        'abort',
        () => {
          term.ended = true;
          resolve({ lost: false, message: 'stopped' });
        },
        { once: true },
      );
    });
    leadership.onLost(() => void this.halt());
    if (!leadership.isLost && !signal.aborted) {
      try {
        await this.lead(leadership, warm, inputsCache);
      } catch (error) {
        leadership.lose(`could not start leading: ${(error as Error).message}`);
      }
    }
    const result = await ended;
    await warm?.stop();
    await this.halt();
    await inputsCache?.stop();
    if (!result.lost) await leadership.resign();
    return result;
  }

  /** A standby's warm world, loading and following while this replica campaigns. */
  private warmStandby(): WarmWorld | undefined {
    if (this.opts.warmStandby === false) return undefined;
    const { client: store, keys } = this.opts;
    const warm = new WarmWorld({ store, keys, clock: this.clock, say: (l) => this.say(l) });
    warm.start();
    return warm;
  }

  /**
   * A standby's copy of the leader's inputs, listed and watched while this replica
   * campaigns (inputs-cache.ts); none for a cold standby.
   */
  private standbyInputs(): InputsCache | undefined {
    if (this.opts.warmStandby === false) return undefined;
    const { client, keys } = this.opts;
    const inputs = new InputsCache(client, keys, this.clock, (line) => this.say(line));
    inputs.start();
    return inputs;
  }

  private async lead(
    leadership: Leadership,
    warm: WarmWorld | undefined,
    inputsCache: InputsCache | undefined,
  ): Promise<void> {
    const { client, keys } = this.opts;
    // The warm world brought to the head at a revision after the win, else a cold load.
    const { world, head, lastSnapshotSeq, lastSnapshotBytes } =
      (await warm?.takeOver()) ?? (await loadControllerWorld(client, keys));
    this.say(`leading (term ${leadership.term}): controller log at seq ${head}`);
    const log = new EtcdEventLog({
      store: client,
      keys,
      clock: this.clock,
      leadership,
      head,
      onFatal: (error) => leadership.lose(error.message),
      onTrouble: (message) => this.say(message),
      ...(this.opts.logLimits === undefined ? {} : { limits: this.opts.logLimits }),
    });
    this.log = log;
    const cm = this.newManager(log, world, { seq: lastSnapshotSeq, bytes: lastSnapshotBytes });
    this.cm = cm;
    if (leadership.isLost) return;
    this.opts.onLead?.({ leadership, log, manager: cm });
    const say = (line: string) => this.say(line);
    const { clock } = this;
    // Before the engine starts: its first detach writes the node's report through it.
    const publisher = new VolumesAttachedPublisher(client, keys, leadership, log, cm, say, clock);
    this.publisher = publisher;
    cm.start();
    const bindings = new ClaimBindingWriter(client, keys, leadership, log, cm, say, clock);
    const inputs = new ControllerInputs(client, keys, cm, say, clock);
    this.stops.push(
      () => inputs.stop(),
      () => publisher.stop(),
      () => bindings.stop(),
    );
    bindings.start(); // before the inputs: no ClaimBound they lead to is missed
    await inputs.start(inputsCache);
    await publisher.start();
  }

  private newManager(
    log: EtcdEventLog,
    world: ControllerWorld,
    last: { seq: number; bytes: number },
  ): ControllerManager {
    const everyEvents = this.opts.snapshotEveryEvents ?? controllerSnapshotEveryEventsDefault;
    const pacer = new SnapshotPacer(last.bytes);
    this.pacer = pacer;
    return ControllerManager.create({
      plugins: this.plugins,
      log: { sink: log, history: [], world },
      snapshot: {
        everyEvents,
        lastSeq: last.seq,
        save: (w) => {
          if (this.snapshotting) return; // the previous one is still being encoded or written
          if (!pacer.due(log.stats.bytes)) return; // the log has not grown by the last snapshot's size yet
          this.snapshotting = true;
          void this.snapshot(w, log, pacer).finally(() => (this.snapshotting = false));
        },
      },
      maxWaitForUnmountMs: this.opts.maxWaitForUnmountMs ?? maxWaitForUnmountMsDefault,
      // etcd has no kube-controller-manager: the leader removes the pvc-protection finalizer.
      pvcProtection: true,
      nodeInUseCheck: (node, volume) => this.nodeInUse(node, volume),
      clock: this.clock,
      logger: this.opts.logger,
    });
  }

  /**
   * Encodes the world in slices (the event loop turns between them: keepalives, commits and
   * the engine go on; the snapshot is the world at the seq it started at), then writes it.
   * A term that ends (lost or stopped) abandons it at its next turn: it could not be
   * written, and the encode holds the world's entries as they were when it began (at
   * 150,000 pods a stopped replica kept most of its world alive through a 15 s encode).
   */
  private async snapshot(world: ControllerWorld, log: EtcdEventLog, pacer: SnapshotPacer) {
    const { seq, tsMs } = world;
    const codec = controllerCore.snapshot;
    const { cm, termState: term } = this;
    const turn = () =>
      cm?.isRunning === true && term?.ended === false
        ? new Promise<void>((resolve) => setImmediate(resolve))
        : Promise.reject(new ClusterError('abandoned: this replica no longer leads'));
    try {
      const { data, stats } = await codec.encodeSliced(world, turn);
      pacer.saved(data.length, log.stats.bytes);
      const writeStarted = this.clock.nowMs();
      await log.saveSnapshot({ seq, tsMs, format: codec.format, data }, { compact: true });
      const writeMs = this.clock.nowMs() - writeStarted;
      this.lastSnapshot = { seq, bytes: data.length, encode: stats, writeMs };
    } catch (error) {
      this.say(`snapshot at seq ${seq} not saved: ${(error as Error).message}`);
    }
  }

  /**
   * verifyVolumeIsSafeToDetach on the store: the node's volumesAttached without the volume
   * written first (the detach's OperationStarted took it out of the report), then the
   * node's volumesInUse read from etcd (a linearizable range), not from the watch. Either
   * the node's put of volumesInUse landed before this read and the detach is refused, or
   * it lands after the volumesAttached write and the node's agent does not mount.
   */
  private async nodeInUse(node: string, volume: string): Promise<boolean> {
    const publisher = this.publisher;
    if (publisher === null) throw new Error('this replica does not lead: no detach may start');
    await publisher.publishNode(node);
    const kv = await this.opts.client.get(this.opts.keys.volumesInUse(node));
    if (kv === undefined) return false; // the node never reported, or is gone: NotFound
    const reported = decodeVolumesInUse(kv);
    if (reported === undefined)
      throw new Error(`${kv.key.toString()} is not {volumesInUse: [...]}: fix what wrote it`);
    return reported.includes(volume);
  }

  /** Stops acting at once: running calls are cut off, nothing more is appended or published. */
  private async halt(): Promise<void> {
    const cm = this.cm;
    if (cm?.isRunning === true) {
      try {
        cm.stop();
      } catch {
        // the final flush of a fenced log fails: nothing more may be written anyway
      }
    }
    const stops = this.stops;
    this.stops = [];
    for (const stop of stops) await stop();
  }

  /**
   * The node_id `node`'s copy of CSI driver `driver` answered NodeGetInfo with, as its agent
   * published it (the Node's csi.volume.kubernetes.io/nodeid annotation); the last one known
   * once the Node is gone, so a detach from a deleted node can still name it.
   */
  csiNodeId(driver: string, node: string): string | undefined {
    const object = this.cm?.world.objects.get(objectKey('Node', node));
    const text = object?.metadata.annotations?.[csiNodeIdAnnotation];
    const ids = text === undefined ? undefined : parseCsiNodeIds(text);
    const key = `${driver}\n${node}`;
    const nodeId = ids?.[driver];
    if (nodeId !== undefined) this.knownCsiNodeIds.set(key, nodeId);
    return nodeId ?? this.knownCsiNodeIds.get(key);
  }

  /**
   * Snapshots the world now, whatever the pacer says (the bench's failover rows; an
   * operator's tool could too): resolves once it is written, or refused if one is under way.
   */
  async snapshotNow(): Promise<ClusterController['lastSnapshot']> {
    const { cm, log, pacer } = this;
    if (cm === null || log === null || pacer === null) throw new ClusterError('not leading');
    if (this.snapshotting) throw new ClusterError('a snapshot is already being taken');
    this.snapshotting = true;
    try {
      await this.snapshot(cm.world, log, pacer);
    } finally {
      this.snapshotting = false;
    }
    return this.lastSnapshot;
  }

  /** The last snapshot this replica saved: its size, its encode's slices, its write to etcd. */
  lastSnapshot: { seq: number; bytes: number; encode: SliceStats; writeMs: number } | undefined;

  get logStats(): EtcdEventLog['stats'] | undefined {
    return this.log?.stats;
  }

  get term(): number | undefined {
    return this.leadership?.term;
  }
}
