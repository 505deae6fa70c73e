/**
 * `status.volumesAttached` on each Node, written by the leading controller as Kubernetes'
 * node status updater does: a patch of the status subresource, taken from the world when
 * an event may have changed a node's report, each write fenced on the Lease. A Node whose
 * object already says what the world holds is not written.
 */
import type { ControllerManager } from '../agent/controller-manager.js';
import type { Clock } from '../clock.js';
import { kubeWriteRetryMs } from '../constants.js';
import { objectKey } from '../events/k8s.js';
import { OpId } from '../ids.js';
import { KubeApiError, type KubeTransport } from './http.js';
import type { ApiObject } from './informer.js';

export interface VolumesAttachedWriterOptions {
  readonly http: KubeTransport;
  readonly clock: Clock;
  readonly cm: Pick<ControllerManager, 'world' | 'subscribe' | 'volumesAttached'>;
  readonly fence: () => Promise<void>;
  readonly say: (line: string) => void;
  /**
   * The Node as the informer last saw it (default: as the log holds it): the controller
   * does not log a Node update that changes only status.volumesAttached, so the writer
   * compares with the live object.
   */
  readonly observedNode?: (name: string) => ApiObject | undefined;
}

type NodeStatus = { status?: { volumesAttached?: { name: string; devicePath?: string }[] } };

export class VolumesAttachedWriter {
  private readonly dirty = new Set<string>();
  private all = true;
  private scheduled = false;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;
  private unsubscribe: () => void = () => undefined;
  /**
   * The node of each running operation, by opId: an OperationFinished names none, and the
   * world has let the operation go when the writer hears of it, yet a detach that ends with
   * the volume still attached puts it back in the node's report (GenerateDetachVolumeFunc's
   * AddVolumeToReportAsAttached), which the Node must list again for its kubelet to mount.
   */
  private readonly runningOn = new Map<string, string>();

  constructor(private readonly opts: VolumesAttachedWriterOptions) {}

  start(): void {
    this.unsubscribe = this.opts.cm.subscribe((event, world) => {
      const fields = event as { node?: unknown; opId?: unknown; object?: { kind?: string } };
      if (event.type === 'EngineStarted') {
        this.all = true;
        this.runningOn.clear(); // every operation was cut off
      }
      if (typeof fields.node === 'string') this.dirty.add(fields.node);
      if (event.type === 'ObjectUpserted' && event.object.kind === 'Node')
        this.dirty.add(event.object.metadata.name);
      if (typeof fields.opId === 'string') {
        const node = world.running.get(OpId(fields.opId))?.node ?? this.runningOn.get(fields.opId);
        if (typeof node === 'string') this.dirty.add(node);
        if (event.type === 'OperationFinished') this.runningOn.delete(fields.opId);
        else if (event.type === 'OperationStarted' && typeof node === 'string')
          this.runningOn.set(fields.opId, node);
      }
      if (this.all || this.dirty.size > 0) this.schedule();
    });
    this.schedule();
  }

  /** A Node update the log did not take: its volumesAttached may differ from the world's. */
  nodeObserved(name: string): void {
    this.dirty.add(name);
    this.schedule();
  }

  private node(name: string): NodeStatus | undefined {
    if (this.opts.observedNode !== undefined) {
      const observed = this.opts.observedNode(name);
      return observed?.kind === 'Node' ? (observed as NodeStatus) : undefined;
    }
    const object = this.opts.cm.world.objects.get(objectKey('Node', name));
    return object?.kind === 'Node' ? object : undefined;
  }

  private nodes(): string[] {
    const world = this.opts.cm.world;
    const names = this.all
      ? new Set<string>([...world.nodes.keys(), ...world.reported.keys()])
      : new Set(this.dirty);
    this.all = false;
    this.dirty.clear();
    return [...names];
  }

  private schedule(): void {
    if (this.scheduled || this.stopped) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const changes = new Map<string, { name: string; devicePath: string }[]>();
      for (const node of this.nodes()) {
        const object = this.node(node);
        if (object === undefined) continue; // no Node object: nothing to write to
        const want = this.opts.cm.volumesAttached(node);
        const has = (object.status?.volumesAttached ?? []).map((v) => ({
          name: v.name,
          devicePath: v.devicePath ?? '',
        }));
        const sorted = [...has].sort((a, b) => a.name.localeCompare(b.name));
        if (JSON.stringify(sorted) !== JSON.stringify(want)) changes.set(node, want);
      }
      if (changes.size > 0) this.running = this.running.then(() => this.write(changes));
    });
  }

  /** One fence for the batch, then every Node's patch at once (a Node is in one batch). */
  private async write(changes: Map<string, { name: string; devicePath: string }[]>): Promise<void> {
    if (this.stopped) return;
    try {
      await this.opts.fence();
    } catch (error) {
      if (!this.stopped) this.retry([...changes.keys()], error as Error);
      return;
    }
    await Promise.all(
      [...changes].map(async ([node, volumesAttached]) => {
        try {
          await this.patchNode(node, volumesAttached);
        } catch (error) {
          if (!this.stopped) this.retry([node], error as Error);
        }
      }),
    );
  }

  /**
   * The node's volumesAttached as the world holds it now, written and answered before a
   * verified detach (the reconciler's UpdateNodeStatusForNode before the detach starts):
   * written whatever the informer's copy says, since that copy may be behind. After the
   * writes queued before it; rejects when the write was refused or could not be made.
   */
  publishNode(node: string): Promise<void> {
    const volumesAttached = this.opts.cm.volumesAttached(node);
    const written = this.running.then(async () => {
      if (this.stopped) throw new Error('this replica stopped leading: the Node is not written');
      await this.opts.fence();
      await this.patchNode(node, volumesAttached);
    });
    // The chain goes on whatever this write answered; a failed one leaves the node dirty.
    this.running = written.catch(() => {
      this.dirty.add(node);
      this.schedule();
    });
    return written;
  }

  /** The Node's status.volumesAttached written; a Node gone (404) has nothing to write to. */
  private async patchNode(
    node: string,
    volumesAttached: readonly { name: string; devicePath: string }[],
  ): Promise<void> {
    try {
      await this.opts.http.patch(
        `/api/v1/nodes/${encodeURIComponent(node)}/status`,
        { status: { volumesAttached } },
        'merge',
      );
    } catch (error) {
      if (error instanceof KubeApiError && error.statusCode === 404) return;
      throw error;
    }
  }

  private retry(nodes: readonly string[], error: Error): void {
    this.opts.say(`volumesAttached of ${nodes.join(', ')} not written, retrying: ${error.message}`);
    const { clock } = this.opts;
    clock.setTimer(clock.nowMs() + kubeWriteRetryMs, () => {
      for (const node of nodes) this.dirty.add(node);
      this.schedule();
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe();
    await this.running.catch(() => undefined);
  }
}
