/**
 * One attach/detach controller replica of `vole chaos --cluster`, as src/cluster/controller.ts
 * runs one on etcd: it campaigns; the leader loads the controller log from the store, starts
 * the real ControllerManager on it (EngineStarted makes calls the previous leader left
 * running uncertain), follows the cluster, and publishes each node's volumesAttached. Every
 * write is fenced on its term, and no attach or detach starts before the events announcing
 * it are durable (the real FencedPluginManager). Losing leadership stops it at once; it then
 * campaigns again, as a standby.
 */
import pino from 'pino';
import { ControllerManager } from '../agent/controller-manager.js';
import { FencedPluginManager } from '../cluster/fenced-plugins.js';
import type { ClusterKeys } from '../cluster/keys.js';
import { controllerCore } from '../engine/cores.js';
import { InvariantChecker } from '../engine/core.js';
import type { ControllerWorld } from '../controller/types.js';
import { type Clock, sleep, type TimerHandle } from '../clock.js';
import type { VolumePlugin } from '../plugins/types.js';
import { decodeLogValue, loadSimLog, SimControllerLog, SimLeadership } from './cluster-log.js';
import { SimControllerInputs } from './cluster-inputs.js';
import type { StoreClient } from './cluster-store.js';

export interface ReplicaOptions {
  readonly identity: string;
  readonly client: StoreClient;
  readonly keys: ClusterKeys;
  readonly clock: Clock;
  readonly leaseTtlMs: number;
  readonly maxWaitForUnmountMs: number;
  /** The cloud's attacher, as this replica calls it. */
  readonly plugin: (replica: SimReplica) => VolumePlugin;
  readonly unfenced?: boolean;
  /** Told of every event this replica appends (activity, for settling). */
  readonly onEvent: () => void;
  /** Leadership won and lost, for the run's trace. */
  readonly say: (line: string) => void;
}

/** One term of one replica: what it loaded, what it appended, what it believes durable. */
export interface Term {
  readonly replica: string;
  readonly term: number;
  readonly loaded: readonly string[];
  readonly log: SimControllerLog;
}

const publishRetryMs = 500;

export class SimReplica {
  readonly plugins: FencedPluginManager;
  readonly checker = new InvariantChecker<ControllerWorld>(controllerCore.invariants);
  readonly terms: Term[] = [];
  cm: ControllerManager | null = null;
  leadership: SimLeadership | null = null;
  private log: SimControllerLog | null = null;
  private inputs: SimControllerInputs | null = null;
  private publisher: { stop(): void } | null = null;

  constructor(readonly opts: ReplicaOptions) {
    this.plugins = new FencedPluginManager(() => {
      const log = this.log;
      if (log === null || this.leadership?.isLost !== false)
        return Promise.reject(new Error('this replica does not lead: no call may start'));
      return log.durable();
    }, [opts.plugin(this)]);
  }

  get name(): string {
    return this.opts.identity;
  }

  get alive(): boolean {
    return this.opts.client.isAlive;
  }

  /** Leading now (as far as this replica knows). */
  get leading(): boolean {
    return this.alive && this.leadership !== null && !this.leadership.isLost && this.cm?.isRunning === true;
  }

  /** Campaigns and leads, again and again, until the process is killed. */
  async run(): Promise<void> {
    const { client, keys, clock } = this.opts;
    while (client.isAlive) {
      const leadership = await SimLeadership.campaign(client, keys, {
        identity: this.name,
        ttlMs: this.opts.leaseTtlMs,
        clock,
        ...(this.opts.unfenced === true ? { unfenced: true } : {}),
      });
      this.leadership = leadership;
      const lost = new Promise<void>((resolve) => leadership.onLost(() => resolve()));
      leadership.onLost((error) => this.opts.say(error.message));
      leadership.onLost(() => this.halt());
      try {
        await this.lead(leadership);
      } catch (error) {
        leadership.lose(`could not start leading: ${(error as Error).message}`, { evenUnfenced: true });
      }
      await lost;
      if (client.isAlive) await sleep(clock, 100);
    }
  }

  private async lead(leadership: SimLeadership): Promise<void> {
    const { client, keys, clock } = this.opts;
    const { head, values } = await loadSimLog(client, keys);
    if (leadership.isLost) return;
    const world = controllerCore.initialWorld();
    for (const value of values) controllerCore.fold(world, decodeLogValue(value));
    const log = new SimControllerLog({
      client,
      keys,
      leadership,
      clock,
      head,
      onFatal: (error) => leadership.lose(error.message, { evenUnfenced: true }),
      ...(this.opts.unfenced === true ? { unfenced: true } : {}),
    });
    this.log = log;
    this.opts.say(`leads (term ${leadership.term}): controller log at seq ${head}`);
    this.terms.push({ replica: this.name, term: leadership.term, loaded: values, log });
    const cm = ControllerManager.create({
      plugins: this.plugins,
      log: { sink: log, history: [], world },
      clock,
      logger: pino({ level: 'silent' }),
      maxWaitForUnmountMs: this.opts.maxWaitForUnmountMs,
    });
    this.cm = cm;
    cm.subscribe((_event, w) => {
      this.checker.after(w);
      this.opts.onEvent();
    });
    cm.start();
    const inputs = new SimControllerInputs(client, keys, cm);
    this.inputs = inputs;
    await inputs.start();
    if (!leadership.isLost) this.publisher = this.publish(leadership, log, cm);
  }

  /** node.status.volumesAttached of every node, written once the log holding it is durable, fenced. */
  private publish(leadership: SimLeadership, log: SimControllerLog, cm: ControllerManager): { stop(): void } {
    const { client, keys, clock } = this.opts;
    const published = new Map<string, string>();
    let scheduled = false;
    let stopped = false;
    let retry: TimerHandle | null = null;
    const pass = async () => {
      const changes: { put: string; value: string }[] = [];
      for (const node of [...cm.world.nodes.keys()].sort()) {
        const key = keys.volumesAttached(node);
        const value = JSON.stringify({ volumesAttached: cm.volumesAttached(node) });
        if (published.get(key) !== value) changes.push({ put: key, value });
      }
      if (changes.length === 0) return;
      await log.durable();
      const result = await client.call(() => client.store.txn(leadership.fence(), changes));
      if (!result.succeeded) return leadership.lose('a volumesAttached write was refused (fenced)', { evenUnfenced: true });
      for (const c of changes) published.set(c.put, c.value);
    };
    const schedule = () => {
      if (scheduled || stopped) return;
      scheduled = true;
      setImmediate(() => {
        scheduled = false;
        if (stopped || leadership.isLost) return;
        pass().catch(() => {
          if (stopped || leadership.isLost || retry !== null) return;
          retry = clock.setTimer(clock.nowMs() + publishRetryMs, () => {
            retry = null;
            schedule();
          });
        });
      });
    };
    const unsubscribe = cm.subscribe(() => schedule());
    schedule();
    return {
      stop: () => {
        stopped = true;
        unsubscribe();
        if (retry !== null) clock.clearTimer(retry);
      },
    };
  }

  /** Stops acting at once: running calls are cut off, nothing more is appended or published. */
  private halt(): void {
    this.publisher?.stop();
    this.publisher = null;
    this.inputs?.stop();
    this.inputs = null;
    if (this.cm?.isRunning === true) {
      try {
        this.cm.stop();
      } catch {
        // the final flush of a fenced log fails: nothing more may be written anyway
      }
    }
  }

  /** SIGKILL: the process is gone; its lease stays until its TTL runs out. */
  kill(): void {
    this.opts.client.kill();
    this.halt();
  }

  /** The nodes this replica's world has `volume` confirmed attached to. */
  confirmedOn(volume: string): string[] {
    const world = this.cm?.world;
    if (world === undefined) return [];
    return [...world.attachments.values()]
      .filter((a) => a.volume === volume && a.state.value.startsWith('attached'))
      .map((a) => a.node);
  }

  /** The forced-detach reason the running detach of `volume` from `node` was started with. */
  detachDecision(volume: string, node: string): { found: boolean; forced?: string } {
    const world = this.cm?.world;
    if (world === undefined) return { found: false };
    for (const op of world.running.values()) {
      if (op.op === 'detach' && op.volume === volume && op.node === node) {
        const started = this.log?.pushed.get(op.startedSeq);
        const forced = started === undefined ? undefined : (decodeLogValue(started) as { forced?: string }).forced;
        return { found: true, ...(forced === undefined ? {} : { forced }) };
      }
    }
    return { found: false };
  }
}

