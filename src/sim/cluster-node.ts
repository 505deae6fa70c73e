/**
 * A node agent of `vole chaos --cluster`, as src/cluster/agent.ts runs one on etcd: the
 * real kubelet core (VolumeManager) with its own log (share-nothing: it survives the
 * agent's stops), its inputs from the simulated store — its pods, the objects they need,
 * the volumesAttached the leader publishes for it — publishing its volumesInUse (then
 * marking them reported, spec §5) and keeping a heartbeat key on a lease.
 */
import pino from 'pino';
import { VolumeManager } from '../agent/volume-manager.js';
import { objectRefOfKey } from '../cluster/agent.js';
import type { ClusterKeys } from '../cluster/keys.js';
import { decodeObject } from '../cluster/objects.js';
import { PodsByKey } from '../cluster/pods-by-key.js';
import { decodeVolumesAttached } from '../cluster/status.js';
import { managedAnnotation } from '../controller/index.js';
import { kubeletCore } from '../engine/cores.js';
import { InvariantChecker } from '../engine/core.js';
import { MemorySink } from '../engine/sink.js';
import type { Node } from '../events/k8s.js';
import { type Clock, type TimerHandle } from '../clock.js';
import type { PluginManager } from '../plugins/manager.js';
import type { World } from '../world/types.js';
import { asKeyValue } from './cluster-inputs.js';
import { type SimStore, StoreClient, type WatchEvent } from './cluster-store.js';

export interface NodeAgentOptions {
  readonly node: string;
  readonly store: SimStore;
  readonly keys: ClusterKeys;
  readonly clock: Clock;
  readonly plugins: PluginManager;
  readonly heartbeatTtlMs: number;
  readonly onEvent: () => void;
}

const retryMs = 500;

/** One run of the agent process: from a start to a stop. */
class AgentProcess {
  readonly vm: VolumeManager;
  private readonly pods: PodsByKey;
  private leaseId = 0;
  private publishedInUse: string | null = null;
  private publishing = false;
  private readonly timers = new Set<TimerHandle>();

  constructor(
    private readonly opts: NodeAgentOptions,
    readonly client: StoreClient,
    sink: MemorySink,
    checker: InvariantChecker<World>,
  ) {
    this.vm = VolumeManager.create({
      node: opts.node,
      plugins: opts.plugins,
      clock: opts.clock,
      controllerAttachDetach: true,
      logger: pino({ level: 'silent' }),
      log: { sink, history: sink.events },
    });
    this.vm.subscribe((_event, world) => {
      checker.after(world);
      opts.onEvent();
      this.schedulePublish();
    });
    this.pods = new PodsByKey({
      add: (pod) => this.alive && this.vm.addPod(pod),
      remove: (uid) => this.alive && this.vm.removePod(uid),
      say: () => undefined,
    });
    for (const [uid, record] of this.vm.world.pods) this.pods.know(opts.keys.podOf(record.pod), uid);
  }

  get alive(): boolean {
    return this.client.isAlive;
  }

  private later(delayMs: number, fn: () => void): void {
    const handle = this.opts.clock.setTimer(this.opts.clock.nowMs() + delayMs, () => {
      this.timers.delete(handle);
      if (this.alive) fn();
    });
    this.timers.add(handle);
  }

  async start(): Promise<void> {
    this.vm.start({ hostObserved: await this.vm.checkHost() });
    void this.heartbeat();
    await this.follow();
    this.vm.markSourcesReady();
    this.schedulePublish();
  }

  /** Registers the Node, lists what this node needs, then watches it (retried while the store fails). */
  private async follow(): Promise<void> {
    const { keys, node } = this.opts;
    const store = this.client.store;
    const object: Node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: node, annotations: { [managedAnnotation]: 'true' } },
    };
    const nodeKey = keys.object('Node', node);
    while (this.alive) {
      try {
        await this.client.call(() =>
          store.txn([{ key: nodeKey, create: 0 }], [{ put: nodeKey, value: JSON.stringify(object) }]),
        );
        const { kvs, revision } = await this.client.call(() => store.range(keys.prefix), { writes: false });
        for (const kv of kvs) this.change({ type: 'put', key: kv.key, kv, revision }, true);
        this.pods.handlers().reset(
          kvs.filter((kv) => kv.key.startsWith(keys.podsOn(node))).map(asKeyValue),
          revision,
        );
        this.client.watch(keys.prefix, revision + 1, (event) => this.change(event, false));
        return;
      } catch {
        await new Promise<void>((resolve) => this.later(retryMs, resolve));
      }
    }
  }

  private change(event: WatchEvent, listing: boolean): void {
    const { keys, node } = this.opts;
    const key = event.key;
    if (key.startsWith(keys.podsOn(node)) && !listing) {
      if (event.kv !== undefined) this.pods.handlers().put(asKeyValue(event.kv));
      else this.pods.handlers().delete(key);
    } else if (key === keys.volumesAttached(node)) {
      const list = event.kv === undefined ? [] : (decodeVolumesAttached(asKeyValue(event.kv)) ?? []);
      this.vm.observeVolumesAttached(list.map((v) => ({ name: v.name, devicePath: v.devicePath ?? '' })));
    } else if (key.startsWith(keys.objects)) {
      if (event.kv === undefined) {
        const ref = objectRefOfKey(keys, key);
        if (ref !== undefined && ref.kind !== 'Node') this.vm.removeObject(ref);
        return;
      }
      const decoded = decodeObject(asKeyValue(event.kv));
      if (decoded.ok && decoded.value.kind !== 'Node') this.vm.upsertObject(decoded.value);
    }
  }

  /** The heartbeat key on a lease, kept alive every third of its TTL; a lost lease is granted again. */
  private async heartbeat(): Promise<void> {
    const { keys, node, heartbeatTtlMs } = this.opts;
    const store = this.client.store;
    try {
      const leaseId = await this.client.call(() => store.grant(heartbeatTtlMs));
      this.leaseId = leaseId;
      await this.client.call(() => store.txn([], [{ put: keys.heartbeat(node), value: node, lease: leaseId }]));
      this.keepAlive(leaseId);
    } catch {
      this.later(retryMs, () => void this.heartbeat());
    }
  }

  private keepAlive(leaseId: number): void {
    this.later(Math.floor(this.opts.heartbeatTtlMs / 3), () => {
      this.client.call(() => this.client.store.keepAlive(leaseId), { writes: false }).then(
        () => this.keepAlive(leaseId),
        (error: Error) => {
          if (this.leaseId !== leaseId) return;
          if ((error as { kind?: string }).kind === 'leaseNotFound') void this.heartbeat();
          else this.keepAlive(leaseId);
        },
      );
    });
  }

  /** Publishes volumesInUse when it changed; marks them reported once the store has them. */
  private schedulePublish(): void {
    if (this.publishing || !this.alive) return;
    const inUse = this.vm.getVolumesInUse();
    const text = JSON.stringify({ volumesInUse: inUse });
    if (text === this.publishedInUse) return this.markAgain(inUse);
    this.publishing = true;
    const key = this.opts.keys.volumesInUse(this.opts.node);
    void this.client
      .call(() => this.client.store.txn([], [{ put: key, value: text }]))
      .then(
        () => {
          this.publishedInUse = text;
          if (this.alive) this.vm.markVolumesAsReportedInUse(inUse);
        },
        () => {
          // The outcome is unknown (a timed-out put may still be applied): publish again,
          // even a value believed published before.
          this.publishedInUse = null;
        },
      )
      .finally(() => {
        this.publishing = false;
        this.later(this.publishedInUse === text ? 0 : retryMs, () => this.schedulePublish());
      });
  }

  /**
   * What is published is reported in use, even when publishing changed nothing: a volume
   * can leave and re-enter the desired state (its pod replaced) between two publishes, as
   * the kubelet marks them after every node status update (src/cluster/agent.ts does too).
   */
  private markAgain(inUse: readonly string[]): void {
    const dsw = this.vm.world.dsw;
    if (inUse.some((v) => dsw.get(v as never)?.reportedInUse === false)) this.vm.markVolumesAsReportedInUse(inUse);
  }

  /** The process stops (killed): its calls are cut off, its lease runs out by itself. */
  stop(): void {
    this.client.kill();
    for (const handle of this.timers) this.opts.clock.clearTimer(handle);
    this.timers.clear();
    this.vm.stop();
  }
}

export class SimNodeAgent {
  /** The node's own log, kept across stops. */
  readonly sink = new MemorySink();
  readonly checker = new InvariantChecker<World>(kubeletCore.invariants);
  private process: AgentProcess | null = null;
  private runs = 0;

  constructor(readonly opts: NodeAgentOptions) {}

  get running(): boolean {
    return this.process?.alive === true;
  }

  get vm(): VolumeManager | undefined {
    return this.process?.vm;
  }

  get client(): StoreClient | undefined {
    return this.process?.client;
  }

  start(): Promise<void> {
    this.runs++;
    const client = new StoreClient(this.opts.store, this.opts.clock, `${this.opts.node}#${this.runs}`);
    this.process = new AgentProcess(this.opts, client, this.sink, this.checker);
    return this.process.start();
  }

  stop(): void {
    this.process?.stop();
  }
}
