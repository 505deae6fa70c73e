/**
 * One attach/detach controller replica of `vole chaos --cluster`: the real ClusterController
 * (src/cluster/controller.ts — its campaign, its etcd log with segments, snapshots and
 * compaction, its inputs, its bindings writer and publisher) on a client of the simulated
 * store, with the cloud's attacher as its plugin. The harness watches each term it leads
 * (what it loaded, what it appended, what it believes durable) and checks the controller
 * core's invariants after every event. A replica campaigns again after losing its lead,
 * until its process is killed.
 */
import pino from 'pino';
import { type Clock, sleep } from '../clock.js';
import { ClusterController, type LeadingTerm } from '../cluster/controller.js';
import type { LogLimits } from '../cluster/etcd-log.js';
import type { ClusterKeys } from '../cluster/keys.js';
import { allAttachments, type ControllerWorld } from '../controller/types.js';
import { InvariantChecker } from '../engine/core.js';
import { controllerCore } from '../engine/cores.js';
import type { VoleEvent } from '../events/index.js';
import type { VolumePlugin } from '../plugins/types.js';
import type { BrokenRules, SimStore } from './store-sim.js';
import { SimStoreClient } from './store-sim-client.js';

/** One silent logger for every process of every run (each pino() opens a stream). */
const silentLogger = pino({ level: 'silent' });

export interface ReplicaOptions {
  readonly identity: string;
  readonly store: SimStore;
  readonly keys: ClusterKeys;
  readonly clock: Clock;
  readonly leaseTtlS: number;
  readonly maxWaitForUnmountMs: number;
  readonly snapshotEveryEvents: number;
  readonly logLimits: LogLimits;
  /** The cloud's attacher, as this replica calls it. */
  readonly plugin: VolumePlugin;
  /** A deliberately broken cluster (the checks must bite). */
  readonly broken?: BrokenRules;
  /** Told of every event this replica appends (activity, for settling). */
  readonly onEvent: () => void;
  /** Leadership won and lost, for the run's trace. */
  readonly say: (line: string) => void;
}

/** One term of one replica: where its log began, what it appended, what is durable. */
export interface Term {
  readonly replica: string;
  readonly term: number;
  /** The log's head when this term loaded it. */
  readonly loadedHead: number;
  readonly leading: LeadingTerm;
  /** What this term appended, by seq. */
  readonly appended: Map<number, VoleEvent>;
}

/** Between two campaigns of a replica that lost its lead or could not reach the store. */
const campaignAgainMs = 500;

export class SimReplica {
  readonly client: SimStoreClient;
  readonly checker = new InvariantChecker<ControllerWorld>(controllerCore.invariants);
  readonly terms: Term[] = [];
  private readonly controller: ClusterController;
  private readonly stop = new AbortController();

  constructor(readonly opts: ReplicaOptions) {
    this.client = new SimStoreClient(opts.store, opts.clock, opts.identity, opts.broken);
    this.controller = new ClusterController({
      client: this.client,
      keys: opts.keys,
      identity: opts.identity,
      plugins: [opts.plugin],
      logger: silentLogger,
      leaseTtlS: opts.leaseTtlS,
      maxWaitForUnmountMs: opts.maxWaitForUnmountMs,
      snapshotEveryEvents: opts.snapshotEveryEvents,
      logLimits: opts.logLimits,
      clock: opts.clock,
      say: (line) => opts.say(line),
      onLead: (leading) => this.began(leading),
    });
  }

  get name(): string {
    return this.opts.identity;
  }

  get alive(): boolean {
    return this.client.isAlive;
  }

  private get current(): Term | undefined {
    return this.terms.at(-1);
  }

  /** Leading now (as far as this replica knows). */
  get leading(): boolean {
    const leading = this.current?.leading;
    return (
      this.alive && leading !== undefined && !leading.leadership.isLost && leading.manager.isRunning
    );
  }

  /** The last seq the current term appended (committed or not). */
  get lastAppended(): number | undefined {
    const term = this.current;
    return term === undefined ? undefined : term.loadedHead + term.appended.size;
  }

  get world(): ControllerWorld | undefined {
    return this.current?.leading.manager.world;
  }

  private began(leading: LeadingTerm): void {
    const appended = new Map<number, VoleEvent>();
    const term = leading.leadership.term;
    this.terms.push({ replica: this.name, term, loadedHead: leading.log.head, leading, appended });
    leading.manager.subscribe((event, world) => {
      appended.set(event.seq, event);
      this.checker.after(world);
      this.opts.onEvent();
    });
  }

  /** Campaigns and leads, again and again, until the process is killed. */
  async run(): Promise<void> {
    let failed = '';
    while (this.alive) {
      try {
        const ended = await this.controller.run(this.stop.signal);
        if (ended.lost) this.opts.say(ended.message);
        failed = '';
      } catch (error) {
        const message = (error as Error).message;
        if (message !== failed) this.opts.say(`campaign failed, retrying: ${message}`);
        failed = message;
      }
      if (this.alive) await sleep(this.opts.clock, campaignAgainMs);
    }
  }

  /** SIGKILL: the process is gone at once; its lease stays until its TTL runs out. */
  kill(): void {
    this.client.kill();
    this.stop.abort();
  }

  /** The nodes this replica's world has `volume` confirmed attached to. */
  confirmedOn(volume: string): string[] {
    const world = this.world;
    if (world === undefined) return [];
    return [...allAttachments(world)]
      .filter((a) => a.volume === volume && a.value.startsWith('attached'))
      .map((a) => a.node);
  }

  /** The forced-detach reason the running detach of `volume` from `node` was started with. */
  detachDecision(volume: string, node: string): { found: boolean; forced?: string } {
    const world = this.world;
    if (world === undefined) return { found: false };
    for (const op of world.running.values()) {
      if (op.op !== 'detach' || op.volume !== volume || op.node !== node) continue;
      const started = this.current?.appended.get(op.startedSeq);
      const forced = started?.type === 'OperationStarted' ? started.forced : undefined;
      return { found: true, ...(forced === undefined ? {} : { forced }) };
    }
    return { found: false };
  }
}
