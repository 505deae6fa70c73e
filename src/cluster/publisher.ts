/**
 * node.status.volumesAttached per node, published by the leader (behaviour C3.6): taken from
 * the world when something changed, written once the log holding it is durable, each write
 * fenced on the leader's term. A new leader publishes every node it knows at start.
 */
import { createHash } from 'node:crypto';
import type { ControllerManager } from '../agent/controller-manager.js';
import { assert } from '../assert.js';
import { type Clock, sleep, type TimerHandle } from '../clock.js';
import { OpId } from '../ids.js';
import type { EtcdEventLog } from './etcd-log.js';
import { listPrefix } from './informer.js';
import type { ClusterKeys } from './keys.js';
import type { Leadership } from './leadership.js';
import type { KvStore } from './store.js';

const resyncEveryMs = 10_000;

/**
 * What a published value is remembered by: its SHA-256, not the value. A node's value
 * names every volume attached to it (some 70 bytes each); kept whole for every node, the
 * values took about 70 bytes a pod of the leader's heap, where a digest takes 64 a node.
 */
function digestOf(value: string): string {
  return createHash('sha256').update(value).digest('base64');
}

export class VolumesAttachedPublisher {
  /** Key → the digest of the value last published there (digestOf). */
  private readonly published = new Map<string, string>();
  private scheduled = false;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;
  private unsubscribe: (() => void) | null = null;
  /** Nodes whose report may have changed since the last pass; every node when `all`. */
  private readonly dirtyNodes = new Set<string>();
  private all = true;
  private resync: TimerHandle | null = null;
  /**
   * The node of each running operation, by opId: an OperationFinished names neither, and
   * the world has let the operation go when it is told, yet a detach that ends without a
   * call puts its volume back in the node's report.
   */
  private readonly runningOn = new Map<string, string>();

  constructor(
    private readonly client: KvStore,
    private readonly keys: ClusterKeys,
    private readonly leadership: Pick<Leadership, 'fence' | 'isLost' | 'lose'>,
    private readonly log: Pick<EtcdEventLog, 'durable' | 'head'>,
    private readonly cm: Pick<ControllerManager, 'world' | 'subscribe' | 'volumesAttached'>,
    private readonly say: (line: string) => void,
    private readonly clock: Clock,
  ) {}

  async start(): Promise<void> {
    assert(this.unsubscribe === null, 'the volumesAttached publisher started twice');
    // What the previous leader published counts as published only if it matches.
    const { kvs } = await listPrefix(this.client, this.keys.status);
    for (const kv of kvs) {
      if (kv.key.endsWith('/volumesAttached'))
        this.published.set(kv.key, digestOf(kv.value.toString()));
    }
    this.unsubscribe = this.cm.subscribe((event, world) => {
      // The events that change a node's report name the node, or an operation on it.
      const fields = event as { node?: unknown; opId?: unknown };
      if (event.type === 'EngineStarted') {
        this.all = true;
        this.runningOn.clear(); // every operation was cut off
      }
      if (typeof fields.node === 'string') this.dirtyNodes.add(fields.node);
      if (typeof fields.opId === 'string') {
        const node = world.running.get(OpId(fields.opId))?.node ?? this.runningOn.get(fields.opId);
        if (typeof node === 'string') this.dirtyNodes.add(node);
        if (event.type === 'OperationFinished') this.runningOn.delete(fields.opId);
        else if (event.type === 'OperationStarted' && typeof node === 'string')
          this.runningOn.set(fields.opId, node);
      }
      if (this.all || this.dirtyNodes.size > 0) this.schedule();
    });
    // A full pass now and then: a safety net that costs O(nodes) every 10 s, not per event.
    this.scheduleResync();
    this.schedule();
  }

  private scheduleResync(): void {
    this.resync = this.clock.setTimer(this.clock.nowMs() + resyncEveryMs, () => {
      if (this.stopped) return;
      this.all = true;
      this.schedule();
      this.scheduleResync();
    });
  }

  private nodes(): Set<string> {
    if (!this.all) {
      const nodes = new Set(this.dirtyNodes);
      this.dirtyNodes.clear();
      return nodes;
    }
    this.all = false;
    this.dirtyNodes.clear();
    const world = this.cm.world;
    const names = new Set<string>([...world.nodes.keys(), ...world.reported.keys()]);
    for (const key of this.published.keys())
      names.add(key.slice(this.keys.status.length).split('/')[0]!);
    return names;
  }

  private schedule(): void {
    if (this.scheduled || this.stopped) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const changes = new Map<string, string>();
      const worldSeq = this.cm.world.seq;
      for (const node of this.nodes()) {
        const key = this.keys.volumesAttached(node);
        const value = JSON.stringify({ volumesAttached: this.cm.volumesAttached(node) });
        if (this.published.get(key) !== digestOf(value)) changes.set(key, value);
      }
      if (changes.size > 0) this.running = this.running.then(() => this.write(changes, worldSeq));
    });
  }

  /** Writes what the world at `worldSeq` says, once the log holding it is durable. */
  private async write(changes: Map<string, string>, worldSeq: number): Promise<void> {
    if (this.stopped || this.leadership.isLost) return;
    try {
      await this.log.durable();
      assert(
        this.log.head >= worldSeq,
        `volumesAttached from the world at seq ${worldSeq} published before the log is durable to it (head ${this.log.head})`,
      );
      const entries = [...changes];
      for (let i = 0; i < entries.length; i += 100) {
        const part = entries.slice(i, i + 100);
        const puts = part.map(([key, value]) => {
          assert(
            key.startsWith(this.keys.status) && key.endsWith('/volumesAttached'),
            `the publisher writes a node's volumesAttached only, not ${key}`,
          );
          return { put: key, value };
        });
        const result = await this.client.txn(this.leadership.fence(), puts);
        if (!result.succeeded)
          return void this.leadership.lose('a volumesAttached write was refused (fenced)');
        for (const [key, value] of part) this.published.set(key, digestOf(value));
      }
    } catch (error) {
      if (this.leadership.isLost) return;
      this.say(`publishing volumesAttached failed, retrying: ${(error as Error).message}`);
      await sleep(this.clock, 500);
      this.all = true; // the failed nodes are no longer marked: look at every node
      this.schedule();
    }
  }

  /**
   * Writes `node`'s report as the world says it now and resolves once the store holds it
   * (nothing to write when it does already); rejects when it cannot, leadership lost too.
   * A detach waits for it, as the reconciler runs UpdateNodeStatusForNode before a detach
   * and skips the detach when that fails: the node's agent mounts only what its
   * volumesAttached lists, so once the volume is gone from it the detach may go on.
   */
  publishNode(node: string): Promise<void> {
    const key = this.keys.volumesAttached(node);
    const value = JSON.stringify({ volumesAttached: this.cm.volumesAttached(node) });
    const worldSeq = this.cm.world.seq;
    const written = this.running.then(async () => {
      if (this.stopped || this.leadership.isLost)
        throw new Error('this replica no longer leads: the node status is not written');
      if (this.published.get(key) === digestOf(value)) return;
      await this.log.durable();
      assert(
        this.log.head >= worldSeq,
        `volumesAttached from the world at seq ${worldSeq} published before the log is durable to it (head ${this.log.head})`,
      );
      const result = await this.client.txn(this.leadership.fence(), [{ put: key, value }]);
      if (!result.succeeded) {
        this.leadership.lose('a volumesAttached write was refused (fenced)');
        throw new Error('the node status write was refused: this replica no longer leads');
      }
      this.published.set(key, digestOf(value));
    });
    // The chain goes on whatever this write answered; a failed write leaves the node dirty.
    this.running = written.catch(() => {
      this.dirtyNodes.add(node);
      this.schedule();
    });
    return written;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.resync !== null) this.clock.clearTimer(this.resync);
    this.unsubscribe?.();
    await this.running.catch(() => undefined);
  }
}
