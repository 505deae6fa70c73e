/**
 * What a controller replica of `vole chaos --cluster` reads from the simulated store, as
 * src/cluster/controller-inputs.ts reads etcd: pods, objects, and each Node composed from
 * its object, its agent's volumesInUse and its heartbeat (present = Ready); one list, then
 * a watch from the listed revision. Events are appended only for what changed, so a new
 * leader's first list appends only what changed while nobody led. The pods and objects
 * are decoded and validated by the cluster code's own decoders (src/cluster/objects.ts).
 */
import type { ControllerManager } from '../agent/controller-manager.js';
import { dropObjectKey, takeObject } from '../cluster/controller-inputs.js';
import { ClusterKeys } from '../cluster/keys.js';
import { decodeObject } from '../cluster/objects.js';
import { PodsByKey } from '../cluster/pods-by-key.js';
import type { KeyValue } from '../cluster/store.js';
import { decodeVolumesInUse, parseStatusKey } from '../cluster/status.js';
import { type ClusterObject, type Node, objectKey } from '../events/k8s.js';
import { toLoggedObject } from '../sources/contents.js';
import type { StoreClient, StoreKv, WatchEvent } from './cluster-store.js';

/** The store's key-value in etcd3's shape, for the cluster code's decoders. */
export function asKeyValue(kv: StoreKv): KeyValue {
  return {
    key: kv.key,
    value: Buffer.from(kv.value),
    createRevision: kv.createRevision,
    modRevision: kv.modRevision,
    lease: String(kv.lease),
  };
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

type Controller = Pick<
  ControllerManager,
  'world' | 'isRunning' | 'upsertObject' | 'removeObject' | 'upsertPod' | 'removePod' | 'subscribe'
>;

export class SimControllerInputs {
  private readonly nodeObjects = new Map<string, Node>();
  private readonly inUse = new Map<string, string[]>();
  private readonly alive = new Set<string>();
  private readonly pods: PodsByKey;
  private cancel: (() => void) | null = null;

  constructor(
    private readonly client: StoreClient,
    private readonly keys: ClusterKeys,
    private readonly cm: Controller,
  ) {
    this.pods = new PodsByKey({
      add: (pod) => {
        const known = cm.world.pods.get(pod.metadata.uid as never)?.pod;
        if (!same(known, pod) && cm.isRunning) cm.upsertPod(pod);
      },
      remove: (uid) => {
        if (cm.world.pods.has(uid as never) && cm.isRunning) cm.removePod(uid);
      },
      say: () => undefined,
    });
    for (const [uid, record] of cm.world.pods) this.pods.know(keys.podOf(record.pod), uid);
  }

  /** Lists everything, then watches from the listed revision. */
  async start(): Promise<void> {
    const { kvs, revision } = await this.client.call(() => this.client.store.range(this.keys.prefix), {
      writes: false,
    });
    this.reset(kvs.map(asKeyValue));
    this.cancel = this.client.watch(this.keys.prefix, revision + 1, (event) => this.change(event));
    // A new attachment, confirmed or uncertain, is assumed mounted until the node's next
    // report (§2.1): apply the report again — after an attach, and for the attaches the
    // previous leader left running, which EngineStarted made uncertain.
    this.cm.subscribe((event, world) => {
      if ((event.type !== 'CallSucceeded' && event.type !== 'CallFailed') || event.call !== 'attach') return;
      const node = world.running.get(event.opId as never)?.node;
      if (typeof node === 'string') queueMicrotask(() => this.reapply(node));
    });
    for (const name of this.nodeNames()) this.reapply(name);
  }

  stop(): void {
    this.cancel?.();
  }

  private reset(kvs: KeyValue[]): void {
    const listed = new Set<string>();
    for (const kv of kvs) {
      const key = kv.key.toString();
      if (key.startsWith(this.keys.heartbeats)) this.alive.add(ClusterKeys.rest(key, this.keys.heartbeats));
      else if (key.startsWith(this.keys.status)) this.putInUse(kv);
      else if (key.startsWith(this.keys.objects)) {
        const object = this.decode(kv);
        if (object !== undefined) listed.add(objectKey(object.kind, object.metadata.name, object.metadata.namespace));
      }
    }
    for (const [key, object] of [...this.cm.world.objects]) {
      if (object.kind !== 'Node' && !listed.has(key) && this.cm.isRunning)
        this.cm.removeObject({ kind: object.kind, name: object.metadata.name, ...ns(object) });
    }
    for (const name of this.nodeNames()) this.syncNode(name);
    this.pods.handlers().reset(
      kvs.filter((kv) => kv.key.toString().startsWith(this.keys.pods)),
      0,
    );
  }

  private change(event: WatchEvent): void {
    const { keys } = this;
    const key = event.key;
    if (key.startsWith(keys.pods)) {
      if (event.kv !== undefined) this.pods.handlers().put(asKeyValue(event.kv));
      else this.pods.handlers().delete(key);
    } else if (key.startsWith(keys.heartbeats)) {
      const node = ClusterKeys.rest(key, keys.heartbeats);
      if (event.type === 'put') this.alive.add(node);
      else this.alive.delete(node);
      this.syncNode(node);
    } else if (key.startsWith(keys.status)) {
      const parsed = parseStatusKey(keys, key);
      if (parsed?.field !== 'volumesInUse') return;
      if (event.kv !== undefined) this.putInUse(asKeyValue(event.kv));
      else this.inUse.delete(parsed.node);
      this.syncNode(parsed.node);
    } else if (key.startsWith(keys.objects)) {
      this.changeObject(event);
    }
  }

  private changeObject(event: WatchEvent): void {
    if (event.kv !== undefined) {
      const object = this.decode(asKeyValue(event.kv));
      if (object?.kind === 'Node') this.syncNode(object.metadata.name);
      return;
    }
    const node = dropObjectKey(this.cm, this.keys, this.nodeObjects, event.key);
    if (node !== undefined) this.syncNode(node);
  }

  /** Decodes an object and hands it on (a Node is kept to be composed). */
  private decode(kv: KeyValue): ClusterObject | undefined {
    const decoded = decodeObject(kv);
    if (!decoded.ok) return undefined;
    const object = toLoggedObject(decoded.value);
    takeObject(this.cm, this.nodeObjects, object, (o) => this.cm.upsertObject(o));
    return object;
  }

  private putInUse(kv: KeyValue): void {
    const parsed = parseStatusKey(this.keys, kv.key.toString());
    const volumes = decodeVolumesInUse(kv);
    if (parsed?.field === 'volumesInUse' && volumes !== undefined) this.inUse.set(parsed.node, volumes);
  }

  private nodeNames(): Set<string> {
    const names = new Set(this.nodeObjects.keys());
    for (const object of this.cm.world.objects.values())
      if (object.kind === 'Node') names.add(object.metadata.name);
    return names;
  }

  private composeNode(name: string): Node | null {
    const object = this.nodeObjects.get(name);
    if (object === undefined) return null;
    const others = (object.status?.conditions ?? []).filter((c) => c.type !== 'Ready');
    const ready = { type: 'Ready', status: this.alive.has(name) ? 'True' : 'False' };
    const { resourceVersion: _rv, ...metadata } = object.metadata;
    return {
      ...object,
      metadata,
      status: { ...object.status, conditions: [...others, ready], volumesInUse: this.inUse.get(name) ?? [] },
    };
  }

  private syncNode(name: string): void {
    const node = this.composeNode(name);
    const held = this.cm.world.objects.get(objectKey('Node', name));
    if (!this.cm.isRunning) return;
    if (node === null) {
      if (held !== undefined) this.cm.removeObject({ kind: 'Node', name });
      return;
    }
    if (!same(held, node)) this.cm.upsertObject(node);
  }

  /** The node's reported volumesInUse again, when the world assumed more (a new attachment). */
  private reapply(name: string): void {
    const node = this.composeNode(name);
    const held = this.cm.world.nodes.get(name as never)?.volumesInUse;
    const reported = node?.status?.volumesInUse ?? [];
    if (node === null || held === undefined || !this.cm.isRunning) return;
    if (held.size !== reported.length || reported.some((v) => !held.has(v))) this.cm.upsertObject(node);
  }
}

function ns(object: ClusterObject): { namespace?: string } {
  return object.metadata.namespace === undefined ? {} : { namespace: object.metadata.namespace };
}
