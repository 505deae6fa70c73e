/**
 * What the leading controller reads from etcd, turned into its events: pods, objects, and
 * each Node composed from three writers — the Node object (`vole apply` or the agent's
 * registration), the agent's volumesInUse and CSI node IDs (the csi.volume.kubernetes.io/nodeid
 * annotation), and its heartbeat key (present = Ready). An
 * event is appended only when the composed value differs from what the world already
 * holds, so a new leader's first list appends only what changed while nobody led.
 */
import type { ControllerManager } from '../agent/controller-manager.js';
import type { Clock } from '../clock.js';
import { type ClusterObject, type Node, objectKey } from '../events/k8s.js';
import { NodeName, OpId, UniquePodName } from '../ids.js';
import { objectRefOfKey } from './agent.js';
import { LogRowTooLarge } from './etcd-log.js';
import { eachInTurns, type PrefixHandlers, PrefixInformer } from './informer.js';
import type { InputsCache } from './inputs-cache.js';
import { ClusterKeys } from './keys.js';
import { compacted, decodeObject } from './objects.js';
import { sameJson } from './same-json.js';
import { PodsByKey } from './pods-by-key.js';
import type { KeyValue, KvStore } from './store.js';
import { provisionedByAnnotation } from '../binding/storage-class.js';
import { controllerPodOf } from '../controller/pod-record.js';
import {
  csiNodeIdAnnotation,
  decodeCsiNode,
  decodeVolumesInUse,
  parseStatusKey,
} from './status.js';

/** The part of the ControllerManager the inputs drive. */
type Controller = Pick<
  ControllerManager,
  | 'world'
  | 'isRunning'
  | 'loggedObject'
  | 'upsertObject'
  | 'removeObject'
  | 'upsertPod'
  | 'removePod'
  | 'subscribe'
>;

/** Equal as JSON; nothing equals a value the world does not hold. */
const same = (held: unknown, next: unknown) => held !== undefined && sameJson(held, next);

/** Listed values are compared first and compacted only when kept (objects.ts `compacted`). */
const loose = { compact: false } as const;

/**
 * An object as the controller takes it in from etcd: a Node is kept in `nodes`, to be
 * composed with its agent's status and heartbeat (the caller syncs it); any other kind is
 * handed to `upsert` when the world holds something else under its name.
 */
function takeObject(
  cm: Pick<ControllerManager, 'world' | 'isRunning'>,
  nodes: Map<string, Node>,
  object: ClusterObject,
  upsert: (object: ClusterObject) => void,
): void {
  if (object.kind === 'Node') {
    nodes.set(object.metadata.name, compacted(object));
    return;
  }
  const key = objectKey(object.kind, object.metadata.name, object.metadata.namespace);
  if (!same(cm.world.objects.get(key), object) && cm.isRunning) upsert(compacted(object));
}

/**
 * An object's key deleted in etcd: a Node leaves `nodes` and its name is answered (the
 * caller composes it again); any other object leaves the world.
 */
function dropObjectKey(
  cm: Pick<ControllerManager, 'world' | 'isRunning' | 'removeObject'>,
  keys: ClusterKeys,
  nodes: Map<string, Node>,
  key: string,
): string | undefined {
  const ref = objectRefOfKey(keys, key);
  if (ref === undefined) return undefined;
  if (ref.kind === 'Node') {
    nodes.delete(ref.name);
    return ref.name;
  }
  if (cm.world.objects.has(objectKey(ref.kind, ref.name, ref.namespace)) && cm.isRunning)
    cm.removeObject(ref);
  return undefined;
}

/**
 * A PV this controller provisioned that etcd never held (no resourceVersion): the binding
 * writer creates it with the claim's binding; until then it is the log's, not gone.
 */
function notWrittenYet(object: ClusterObject): boolean {
  return (
    object.kind === 'PersistentVolume' &&
    object.metadata.annotations?.[provisionedByAnnotation] !== undefined &&
    object.metadata.resourceVersion === undefined
  );
}

export class ControllerInputs {
  private readonly nodeObjects = new Map<string, Node>();
  private readonly inUse = new Map<string, string[]>();
  /** Each node's CSI drivers and their node_id (the agent's status/<node>/csiNodeIds). */
  private readonly csiNodeIds = new Map<string, Record<string, string>>();
  /** Each node's CSI topology segments: labels of its Node (the kubelet labels it so). */
  private readonly csiTopology = new Map<string, Record<string, string>>();
  private readonly alive = new Set<string>();
  private readonly pods: PodsByKey;
  private readonly informers: PrefixInformer[] = [];
  /** Nodes are composed only once heartbeats, status and objects were all listed. */
  private nodesListed = false;
  /** Nodes where an attach just succeeded: their reported volumesInUse is applied again. */
  private readonly attachedOn = new Set<string>();
  private unsubscribe: (() => void) | null = null;

  constructor(
    private readonly client: KvStore,
    private readonly keys: ClusterKeys,
    private readonly cm: Controller,
    private readonly say: (line: string) => void,
    private readonly clock: Clock,
  ) {
    this.pods = new PodsByKey(
      {
        add: (pod) => {
          // The world keeps of a pod only what the controller reads (pod-record.ts): a pod
          // that differs from it elsewhere (its resourceVersion, always) changes nothing.
          const known = cm.world.pods.get(UniquePodName(pod.metadata.uid ?? ''))?.pod;
          if (!same(known, controllerPodOf(pod)) && cm.isRunning)
            this.guard(`pod ${pod.metadata.namespace}/${pod.metadata.name}`, () =>
              cm.upsertPod(compacted(pod)),
            );
        },
        remove: (uid) => {
          if (cm.world.pods.has(UniquePodName(uid)) && cm.isRunning) cm.removePod(uid);
        },
        say,
      },
      loose,
    );
    for (const [uid, { pod }] of cm.world.pods)
      this.pods.know(keys.podOf(pod), uid, pod.metadata.name);
  }

  /**
   * Lists (or, with `cache`, takes over a standby's informers: the same resets, without
   * waiting on etcd's pages) and watches the cluster. What follows each reset is the same
   * either way.
   */
  async start(cache?: InputsCache): Promise<void> {
    const { keys } = this;
    const trouble = (message: string) => this.say(`etcd: ${message}`);
    // Node inputs first, composed once all are listed; pods last, so they find their nodes.
    await this.follow(cache, keys.heartbeats, {
      reset: (kvs) =>
        this.resetSet(
          this.alive,
          kvs.map((kv) => ClusterKeys.rest(kv.key.toString(), keys.heartbeats)),
        ),
      put: (kv) => this.setAlive(ClusterKeys.rest(kv.key.toString(), keys.heartbeats), true),
      delete: (key) => this.setAlive(ClusterKeys.rest(key, keys.heartbeats), false),
      trouble,
    });
    await this.follow(cache, keys.status, {
      reset: (kvs) => this.resetInUse(kvs),
      put: (kv) => this.putInUse(kv),
      delete: (key) => this.deleteInUse(key),
      trouble,
    });
    await this.follow(cache, keys.objects, {
      reset: (kvs) => this.resetObjects(kvs),
      put: (kv) => this.putObject(kv),
      delete: (key) => this.deleteObject(key),
      trouble,
    });
    this.nodesListed = true;
    this.unsubscribe = this.cm.subscribe((event, world) => {
      // A failed attach leaves an uncertain entry, assumed mounted too (behaviour C2.1 AddVolumeNode).
      if (
        (event.type !== 'CallSucceeded' && event.type !== 'CallFailed') ||
        event.call !== 'attach'
      )
        return;
      const node = world.running.get(OpId(event.opId))?.node;
      if (node === undefined || node === null) return;
      if (this.attachedOn.size === 0) setImmediate(() => this.reapplyInUse());
      this.attachedOn.add(node);
    });
    for (const name of this.nodeNames()) this.syncNode(name);
    // EngineStarted made the attaches the previous leader left running uncertain, assumed
    // mounted: each node's report says otherwise now, not at its next change.
    for (const name of this.nodeNames()) this.attachedOn.add(name);
    this.reapplyInUse();
    await this.follow(cache, keys.pods, { ...this.pods.handlers(), trouble });
  }

  /** The prefix's informer: the standby's, handed over, or a new one that lists. */
  private async follow(
    cache: InputsCache | undefined,
    prefix: string,
    handlers: PrefixHandlers,
  ): Promise<void> {
    const taken = (await cache?.take(prefix, handlers)) ?? null;
    if (taken !== null) {
      this.informers.push(taken.informer);
      return void (await taken.ready);
    }
    const informer = new PrefixInformer(this.client, prefix, handlers, this.clock);
    this.informers.push(informer);
    await informer.start();
  }

  private nodeNames(): Set<string> {
    const names = new Set(this.nodeObjects.keys());
    for (const object of this.cm.world.objects.values())
      if (object.kind === 'Node') names.add(object.metadata.name);
    return names;
  }

  /**
   * A new attachment (confirmed or uncertain) is assumed mounted (behaviour C2.1) until the
   * node's next status update says otherwise; in Kubernetes that update comes within the kubelet's status period.
   * Here a node's published volumesInUse is applied again right after an attach on it
   * (safe: an agent reports a volume in use before it mounts it, behaviour C5).
   */
  private reapplyInUse(): void {
    const nodes = [...this.attachedOn];
    this.attachedOn.clear();
    for (const name of nodes) {
      const node = this.composeNode(name);
      const held = this.cm.world.nodes.get(NodeName(name))?.volumesInUse;
      const reported = node?.status?.volumesInUse ?? [];
      if (node === null || held === undefined || !this.cm.isRunning) continue;
      if (held.size !== reported.length || reported.some((v) => !held.has(v))) this.upsert(node);
    }
  }

  private upsert(object: ClusterObject): void {
    this.guard(`${object.kind} ${object.metadata.namespace ?? ''}/${object.metadata.name}`, () =>
      this.cm.upsertObject(object),
    );
  }

  /**
   * An object too large for a log row is left out, said, instead of stopping the leader
   * (the next leader would meet it again): nothing was appended for it.
   */
  private guard(what: string, append: () => void): void {
    try {
      append();
    } catch (error) {
      if (!(error instanceof LogRowTooLarge)) throw error;
      this.say(`skipped ${what}: ${error.message}`);
    }
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    for (const informer of this.informers) await informer.stop();
  }

  private resetSet(set: Set<string>, names: string[]): void {
    const before = new Set(set);
    set.clear();
    for (const name of names) set.add(name);
    for (const name of new Set([...before, ...names])) this.syncNode(name);
  }

  private setAlive(node: string, alive: boolean): void {
    if (alive) this.alive.add(node);
    else this.alive.delete(node);
    this.syncNode(node);
  }

  private resetInUse(kvs: readonly KeyValue[]): void {
    const before = [...this.inUse.keys(), ...this.csiNodeIds.keys()];
    this.inUse.clear();
    this.csiNodeIds.clear();
    this.csiTopology.clear();
    for (const kv of kvs) this.putInUse(kv, false);
    for (const node of new Set([...before, ...this.inUse.keys(), ...this.csiNodeIds.keys()]))
      this.syncNode(node);
  }

  /** A node's volumesInUse, or its CSI drivers' node IDs (the agent's two status keys). */
  private putInUse(kv: KeyValue, sync = true): void {
    const parsed = parseStatusKey(this.keys, kv.key.toString());
    if (parsed?.field === 'csiNodeIds') {
      const csi = decodeCsiNode(kv);
      if (csi === undefined)
        return void this.say(`skipped ${kv.key.toString()}: not {csiNodeIds: {driver: id}}`);
      this.csiNodeIds.set(parsed.node, csi.csiNodeIds);
      this.csiTopology.set(parsed.node, csi.topology ?? {});
      if (sync) this.syncNode(parsed.node);
      return;
    }
    if (parsed?.field !== 'volumesInUse') return;
    const volumes = decodeVolumesInUse(kv);
    if (volumes === undefined)
      return void this.say(`skipped ${kv.key.toString()}: not {volumesInUse: [...]}`);
    this.inUse.set(parsed.node, volumes);
    if (sync) this.syncNode(parsed.node);
  }

  private deleteInUse(key: string): void {
    const parsed = parseStatusKey(this.keys, key);
    if (parsed?.field === 'csiNodeIds') {
      this.csiNodeIds.delete(parsed.node);
      this.csiTopology.delete(parsed.node);
    } else if (parsed?.field === 'volumesInUse') this.inUse.delete(parsed.node);
    else return;
    this.syncNode(parsed.node);
  }

  /** The Node as the controller's fold sees it, or null when no Node object exists. */
  private composeNode(name: string): Node | null {
    const object = this.nodeObjects.get(name);
    if (object === undefined) return null;
    const others = (object.status?.conditions ?? []).filter((c) => c.type !== 'Ready');
    const ready = { type: 'Ready', status: this.alive.has(name) ? 'True' : 'False' };
    const { resourceVersion: _rv, ...metadata } = object.metadata;
    const ids = this.csiNodeIds.get(name);
    if (ids !== undefined && Object.keys(ids).length > 0)
      metadata.annotations = {
        ...metadata.annotations,
        [csiNodeIdAnnotation]: JSON.stringify(ids),
      };
    const topology = this.csiTopology.get(name) ?? {};
    if (Object.keys(topology).length > 0) metadata.labels = { ...metadata.labels, ...topology };
    return {
      ...object,
      metadata,
      status: {
        ...object.status,
        conditions: [...others, ready],
        volumesInUse: this.inUse.get(name) ?? [],
      },
    };
  }

  private syncNode(name: string): void {
    if (!this.nodesListed) return;
    const node = this.composeNode(name);
    const held = this.cm.world.objects.get(objectKey('Node', name));
    if (node === null) {
      if (held !== undefined && this.cm.isRunning) this.cm.removeObject({ kind: 'Node', name });
      return;
    }
    if (!same(held, node) && this.cm.isRunning) this.upsert(node);
  }

  private async resetObjects(kvs: readonly KeyValue[]): Promise<void> {
    const listed = new Set<string>();
    const nodesBefore = new Set(this.nodeObjects.keys());
    // Node objects are gathered apart and swapped in at the end: a node composed between
    // two turns (a heartbeat's watch) must not see half a list.
    const nodeObjects: typeof this.nodeObjects = new Map();
    await eachInTurns(kvs, (kv) => {
      const object = this.decode(kv);
      if (object === undefined) return;
      listed.add(objectKey(object.kind, object.metadata.name, object.metadata.namespace));
      takeObject(this.cm, nodeObjects, object, (o) => this.upsert(o));
    });
    this.nodeObjects.clear();
    for (const [name, node] of nodeObjects) this.nodeObjects.set(name, node);
    for (const [key, object] of [...this.cm.world.objects]) {
      if (object.kind === 'Node' || listed.has(key) || notWrittenYet(object)) continue;
      if (this.cm.isRunning) this.cm.removeObject(refOf(object));
    }
    for (const name of new Set([...nodesBefore, ...this.nodeNames()])) this.syncNode(name);
  }

  /**
   * The object as the controller's log holds it (ConfigMaps and Secrets: a content hash; a
   * claim written without a UID: the one the log gave it), so an object listed again is
   * compared with the world's as the log would hold it: a new leader logged every such
   * claim again (50,000 pods: 33,000 events, 6 s of its takeover).
   */
  private decode(kv: KeyValue): ClusterObject | undefined {
    const decoded = decodeObject(kv, loose);
    if (decoded.ok) return this.cm.loggedObject(decoded.value);
    this.say(`skipped ${decoded.message}`);
    return undefined;
  }

  private useObject(object: ClusterObject): void {
    takeObject(this.cm, this.nodeObjects, object, (o) => this.upsert(o));
  }

  private putObject(kv: KeyValue): void {
    const object = this.decode(kv);
    if (object === undefined) return;
    this.useObject(object);
    if (object.kind === 'Node') this.syncNode(object.metadata.name);
  }

  private deleteObject(key: string): void {
    const node = dropObjectKey(this.cm, this.keys, this.nodeObjects, key);
    if (node !== undefined) this.syncNode(node);
  }
}

function refOf(object: ClusterObject): {
  kind: ClusterObject['kind'];
  name: string;
  namespace?: string;
} {
  return {
    kind: object.kind,
    name: object.metadata.name,
    ...(object.metadata.namespace === undefined ? {} : { namespace: object.metadata.namespace }),
  };
}
