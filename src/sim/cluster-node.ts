/**
 * A node agent of `vole chaos --cluster`: the real ClusterAgent (src/cluster/agent.ts — its
 * informers, its Node registration, its heartbeat lease, its volumesInUse and CSI node ID
 * publishing) on a client of the simulated store, around the real kubelet core with its
 * own log (share-nothing: the log survives the agent's stops). The kubelet core's
 * invariants are checked after every event.
 */
import pino from 'pino';
import { VolumeManager } from '../agent/volume-manager.js';
import type { Clock } from '../clock.js';
import { ClusterAgent } from '../cluster/agent.js';
import type { ClusterKeys } from '../cluster/keys.js';
import { InvariantChecker } from '../engine/core.js';
import { kubeletCore } from '../engine/cores.js';
import { MemorySink } from '../engine/sink.js';
import type { PluginManager } from '../plugins/manager.js';
import type { World } from '../kubelet/types.js';
import type { SimStore } from './store-sim.js';
import { SimStoreClient } from './store-sim-client.js';

/** One silent logger for every process of every run (each pino() opens a stream). */
const silentLogger = pino({ level: 'silent' });

export interface NodeAgentOptions {
  readonly node: string;
  readonly store: SimStore;
  readonly keys: ClusterKeys;
  readonly clock: Clock;
  readonly plugins: PluginManager;
  readonly heartbeatTtlS: number;
  readonly onEvent: () => void;
  readonly say: (line: string) => void;
}

/** One run of the agent process: from a start to a stop. */
interface AgentProcess {
  readonly client: SimStoreClient;
  readonly agent: ClusterAgent;
}

export class SimNodeAgent {
  /** The node's own log, kept across stops. */
  readonly sink = new MemorySink();
  readonly checker = new InvariantChecker<World>(kubeletCore.invariants);
  private process: AgentProcess | null = null;
  private runs = 0;

  constructor(readonly opts: NodeAgentOptions) {}

  get running(): boolean {
    return this.process?.client.isAlive === true;
  }

  get vm(): VolumeManager | undefined {
    return this.process?.agent.vm;
  }

  start(): Promise<void> {
    const { opts } = this;
    this.runs++;
    const client = new SimStoreClient(opts.store, opts.clock, `${opts.node}#${this.runs}`);
    const logger = silentLogger;
    const vm = VolumeManager.create({
      node: opts.node,
      plugins: opts.plugins,
      clock: opts.clock,
      controllerAttachDetach: true,
      bindClaims: false,
      logger,
      log: { sink: this.sink, history: this.sink.events },
    });
    vm.subscribe((_event, world) => {
      this.checker.after(world);
      opts.onEvent();
    });
    const agent = new ClusterAgent({
      client,
      clock: opts.clock,
      keys: opts.keys,
      node: opts.node,
      plugins: opts.plugins,
      volumeManager: vm,
      logger,
      heartbeatTtlS: opts.heartbeatTtlS,
      say: (line) => opts.say(line),
    });
    this.process = { client, agent };
    return agent.start();
  }

  /** The process is killed: its calls are cut off, its lease runs out by itself. */
  stop(): void {
    const process = this.process;
    if (process === null || !process.client.isAlive) return;
    process.client.kill();
    process.agent.halt();
  }
}
