/**
 * A node agent in cluster mode: the kubelet side of one node, its truth in its own SQLite
 * log (share-nothing), its inputs from etcd. It watches the pods keyed under its node, the
 * objects they need, and the volumesAttached the controller publishes for it; it publishes
 * its volumesInUse (then marks them reported, behaviour C5) and keeps a heartbeat key on a
 * lease, which is how the controller knows it is Ready.
 */
import type { Logger } from 'pino';
import { assert } from '../assert.js';
import { type Clock, sleep, type TimerHandle } from '../clock.js';
import { VolumeManager } from '../agent/volume-manager.js';
import type { ClusterObject, Node } from '../events/k8s.js';
import type { NodeAllocatable } from '../events/types.js';
import { OpId, UniqueVolumeName } from '../ids.js';
import { managedAnnotation } from '../controller/index.js';
import type { PluginManager } from '../plugins/manager.js';
import type { VolumePlugin } from '../plugins/types.js';
import type { ObjectContents } from '../sources/contents.js';
import { PrefixInformer } from './informer.js';
import { ClusterKeys, isNamespaced, none } from './keys.js';
import { recordClaimCapacity } from './claim-capacity.js';
import { decodeObject } from './objects.js';
import { PodsByKey } from './pods-by-key.js';
import { decodeVolumesAttached } from './status.js';
import { type KeyValue, type KvStore, put, type StoreLease } from './store.js';

export interface ClusterAgentOptions {
  readonly client: KvStore;
  readonly keys: ClusterKeys;
  readonly clock: Clock;
  readonly node: string;
  /** The node's SQLite log (unless `volumeManager` is given). */
  readonly db?: string;
  readonly plugins: readonly VolumePlugin[] | PluginManager;
  /** A VolumeManager opened by the caller (the simulation's, on the virtual clock). */
  readonly volumeManager?: VolumeManager;
  /** ConfigMap and Secret data for the content plugins (the same store they were built with). */
  readonly contents?: ObjectContents;
  readonly logger: Logger;
  /** The heartbeat lease's TTL: the controller sees the node not Ready this long after it stops. */
  readonly heartbeatTtlS?: number;
  readonly say?: (line: string) => void;
  /** The node's allocatable (downwardAPI resourceFieldRef of unset limits). */
  readonly allocatable?: NodeAllocatable;
}

export const heartbeatTtlSDefault = 10;
/** Retries of failed writes (the Node, the heartbeat, the status keys). */
const retryMs = 500;

/** The object reference of an objects/<Kind>/<ns|_>/<name> key. */
export function objectRefOfKey(
  keys: ClusterKeys,
  key: string,
): { kind: ClusterObject['kind']; name: string; namespace?: string } | undefined {
  const [kind, ns, name] = ClusterKeys.rest(key, keys.objects).split('/');
  if (kind === undefined || ns === undefined || name === undefined) return undefined;
  return {
    kind: kind as ClusterObject['kind'],
    name,
    ...(isNamespaced(kind) && ns !== none ? { namespace: ns } : {}),
  };
}

export class ClusterAgent {
  readonly vm: VolumeManager;
  private readonly informers: PrefixInformer[] = [];
  private readonly pods: PodsByKey;
  private lease: StoreLease | null = null;
  private publishedInUse: string | null = null;
  private csiNodeIds: Record<string, string> = {};
  /** The topology segments its CSI drivers answered NodeGetInfo with: the Node's labels. */
  private csiTopology: Record<string, string> = {};
  private csiPublishing: Promise<void> = Promise.resolve();
  private publishing = false;
  private stopped = false;
  private heartbeatTimer: TimerHandle | null = null;
  private readonly timers = new Set<TimerHandle>();

  constructor(private readonly opts: ClusterAgentOptions) {
    assert(
      opts.volumeManager !== undefined || opts.db !== undefined,
      'a node agent needs --db or a VolumeManager',
    );
    this.vm =
      opts.volumeManager ??
      VolumeManager.open({
        db: opts.db!,
        node: opts.node,
        plugins: opts.plugins,
        ...(opts.contents === undefined ? {} : { contents: opts.contents }),
        controllerAttachDetach: true,
        // The leading controller binds claims and writes the bindings to etcd; nodes read them.
        bindClaims: false,
        ...(opts.allocatable === undefined ? {} : { allocatable: opts.allocatable }),
        logger: opts.logger,
      });
    this.pods = new PodsByKey({
      add: (pod) => this.vm.inputs.addPod(pod),
      remove: (uid) => this.vm.inputs.removePod(uid),
      say: (line) => this.say(line),
    });
    for (const [uid, record] of this.vm.world.pods)
      this.pods.know(opts.keys.podOf(record.pod), uid, record.pod.metadata.name);
  }

  private say(line: string): void {
    this.opts.say?.(line);
  }

  async start(): Promise<void> {
    const { keys, node, client } = this.opts;
    this.vm.start({ hostObserved: await this.vm.checkHost() });
    await this.registerNode();
    await this.keepHeartbeat();
    this.vm.subscribe((event, world) => {
      if (event.type === 'CsiDriverRegistered')
        this.publishCsiNodeId(event.driver, event.nodeId, event.caps.csi?.accessibleTopology ?? {});
      // NodeExpandVolume done: the claim's status.capacity is the kubelet's to update.
      const spec = event.type === 'CallSucceeded' && world.running.get(OpId(event.opId))?.spec;
      if (event.type === 'CallSucceeded' && event.call === 'nodeExpand' && spec && spec.claim) {
        const claim = { namespace: spec.claimNamespace ?? 'default', name: spec.claim };
        const io = {
          clock: this.opts.clock,
          say: (l: string) => this.say(l),
          stopped: () => this.stopped,
        };
        void recordClaimCapacity(client, keys, { ...claim, sizeBytes: event.sizeBytes ?? 0 }, io);
      }
      this.schedulePublish();
    });
    const trouble = (message: string) => this.say(`etcd: ${message}`);
    this.informers.push(
      new PrefixInformer(
        client,
        keys.objects,
        {
          reset: (kvs) => this.resetObjects(kvs),
          put: (kv) => this.putObject(kv),
          delete: (key) => {
            const ref = objectRefOfKey(keys, key);
            if (ref !== undefined) this.vm.inputs.removeObject(ref);
          },
          trouble,
        },
        this.opts.clock,
      ),
      new PrefixInformer(
        client,
        keys.podsOn(node),
        {
          ...this.pods.handlers(),
          trouble,
        },
        this.opts.clock,
      ),
      new PrefixInformer(
        client,
        keys.volumesAttached(node),
        {
          reset: (kvs) => this.observeAttached(kvs[0]),
          put: (kv) => this.observeAttached(kv),
          delete: () => this.observeAttached(undefined),
          trouble,
        },
        this.opts.clock,
      ),
    );
    for (const informer of this.informers) await informer.start();
    this.vm.inputs.markSourcesReady();
    this.schedulePublish();
  }

  /** Creates this node's Node object when nobody applied one (as the kubelet registers). */
  private async registerNode(): Promise<void> {
    const { client, keys, node } = this.opts;
    const object: Node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: node, annotations: { [managedAnnotation]: 'true' } },
    };
    const key = keys.object('Node', node);
    while (!this.stopped) {
      try {
        return void (await client.txn(
          [{ key, createRevision: 0 }],
          [{ put: key, value: JSON.stringify(object) }],
        ));
      } catch (error) {
        this.say(`registering Node ${node} failed, retrying: ${(error as Error).message}`);
        await sleep(this.opts.clock, retryMs);
      }
    }
  }

  /** The heartbeat key on a lease; a lost lease (etcd unreachable too long) is granted again. */
  private async keepHeartbeat(): Promise<void> {
    const { client, keys, node } = this.opts;
    try {
      const lease = await client.grantLease(this.opts.heartbeatTtlS ?? heartbeatTtlSDefault);
      if (this.stopped) return void lease.revoke().catch(() => undefined);
      this.lease = lease;
      lease.onLost(() => {
        if (this.stopped || this.lease !== lease) return;
        this.say('heartbeat lease lost; granting a new one');
        this.retryHeartbeat();
      });
      const value = JSON.stringify({ node, pid: process.pid });
      await client.txn([], [{ put: keys.heartbeat(node), value, lease: lease.id }]);
    } catch (error) {
      this.say(`heartbeat: ${(error as Error).message}; retrying`);
      this.retryHeartbeat();
    }
  }

  private retryHeartbeat(): void {
    if (this.heartbeatTimer !== null || this.stopped) return;
    const { clock } = this.opts;
    this.heartbeatTimer = clock.setTimer(clock.nowMs() + retryMs, () => {
      this.heartbeatTimer = null;
      void this.keepHeartbeat();
    });
  }

  private resetObjects(kvs: readonly KeyValue[]): void {
    const listed = new Set<string>();
    for (const kv of kvs) {
      const decoded = decodeObject(kv);
      if (!decoded.ok) {
        this.say(`skipped ${decoded.message}`);
        continue;
      }
      listed.add(kv.key.toString());
      this.vm.inputs.upsertObject(decoded.value);
    }
    for (const [, object] of this.vm.world.objects) {
      const key = this.opts.keys.objectOf(object);
      if (!listed.has(key)) this.vm.inputs.removeObject(objectRefOfKey(this.opts.keys, key)!);
    }
  }

  private putObject(kv: KeyValue): void {
    const decoded = decodeObject(kv);
    if (decoded.ok) this.vm.inputs.upsertObject(decoded.value);
    else this.say(`skipped ${decoded.message}`);
  }

  private observeAttached(kv: KeyValue | undefined): void {
    const list = kv === undefined ? [] : (decodeVolumesAttached(kv) ?? []);
    this.vm.inputs.observeVolumesAttached(
      list.map((v) => ({ name: v.name, devicePath: v.devicePath ?? '' })),
    );
  }

  /**
   * Publishes the node_id each CSI driver registered here answered NodeGetInfo with (the
   * controller names this node by it in ControllerPublishVolume), kept while a driver is
   * away so a detach can still name the node, and its accessible topology (the controller
   * labels the Node with it, as the kubelet does: WaitForFirstConsumer provisions there);
   * retried until etcd has it.
   */
  private publishCsiNodeId(driver: string, nodeId: string, topology: Record<string, string>): void {
    const csiTopology = { ...this.csiTopology, ...topology };
    const sameTopology = JSON.stringify(csiTopology) === JSON.stringify(this.csiTopology);
    if (this.csiNodeIds[driver] === nodeId && sameTopology) return;
    this.csiNodeIds = { ...this.csiNodeIds, [driver]: nodeId };
    this.csiTopology = csiTopology;
    const { client, keys, node } = this.opts;
    // One put at a time, each of the latest map: a late answer never puts an older one back.
    this.csiPublishing = this.csiPublishing.then(async () => {
      while (!this.stopped) {
        try {
          const topology =
            Object.keys(this.csiTopology).length === 0 ? {} : { topology: this.csiTopology };
          const value = { csiNodeIds: this.csiNodeIds, ...topology };
          await put(client, keys.csiNodeIds(node), JSON.stringify(value));
          return;
        } catch (error) {
          this.say(`publishing CSI node IDs failed, retrying: ${(error as Error).message}`);
          await sleep(this.opts.clock, retryMs);
        }
      }
    });
  }

  /** Publishes volumesInUse when it changed; marks them reported once etcd has them. */
  private schedulePublish(): void {
    if (this.publishing || this.stopped) return;
    const inUse = this.vm.status.getVolumesInUse();
    const text = JSON.stringify({ volumesInUse: inUse });
    if (text === this.publishedInUse) {
      // Published already, yet a volume may have left and re-entered the desired state
      // (its pod replaced) since: mark it again, as the kubelet does after every status update.
      const dsw = this.vm.world.dsw;
      if (inUse.some((v) => dsw.get(UniqueVolumeName(v))?.reportedInUse === false))
        this.vm.inputs.markVolumesAsReportedInUse(inUse);
      return;
    }
    this.publishing = true;
    const { client, keys, node } = this.opts;
    void put(client, keys.volumesInUse(node), text)
      .then(
        () => {
          this.publishedInUse = text;
          if (!this.stopped) this.vm.inputs.markVolumesAsReportedInUse(inUse);
        },
        (error: Error) => {
          // A put that failed may still be applied later (etcd timed out): what is stored is
          // unknown, so the next pass publishes even a value believed published before.
          this.publishedInUse = null;
          this.say(`publishing volumesInUse failed, retrying: ${error.message}`);
        },
      )
      .finally(() => {
        this.publishing = false;
        const delayMs = this.publishedInUse === text ? 0 : retryMs;
        if (!this.stopped) this.later(delayMs, () => this.schedulePublish());
      });
  }

  /** Runs `fn` after `delayMs` on the clock unless the agent stopped. */
  private later(delayMs: number, fn: () => void): void {
    const { clock } = this.opts;
    const timer = clock.setTimer(clock.nowMs() + delayMs, () => {
      this.timers.delete(timer);
      if (!this.stopped) fn();
    });
    this.timers.add(timer);
  }

  async stop(): Promise<void> {
    this.stopTimers();
    for (const informer of this.informers) await informer.stop();
    await this.vm.drainAndStop();
    this.vm.stop();
    await this.lease?.revoke().catch(() => undefined);
  }

  /**
   * Stops at once, as a killed process does: nothing drained, nothing revoked (the
   * heartbeat's lease runs out by itself), running calls cut off.
   */
  halt(): void {
    this.stopTimers();
    for (const informer of this.informers) void informer.stop();
    this.vm.stop();
  }

  private stopTimers(): void {
    this.stopped = true;
    if (this.heartbeatTimer !== null) this.opts.clock.clearTimer(this.heartbeatTimer);
    for (const timer of this.timers) this.opts.clock.clearTimer(timer);
    this.timers.clear();
  }
}
