/**
 * What keeps the Node alive for kube-controller-manager's node lifecycle controller, kept
 * as the kubelet keeps it: a Lease named like the Node in kube-node-lease (holder the
 * Node, 40 s, owned by the Node) renewed every quarter of its duration, and a Ready
 * condition in the Node's status posted at start and again every five minutes. The
 * controller counts a renewed Lease as a heartbeat; without a Ready condition it would
 * still taint the Node unreachable. Ready says what vole is: a volume manager, no
 * container runtime. A Node whose Ready someone else changed (the node lifecycle controller
 * sets Unknown once no heartbeat came for its grace period: the link was cut) gets Ready
 * again at the next beat, as the kubelet's tryUpdateNodeStatus posts a status that changed
 * without waiting for the five minutes.
 */
import {
  nodeLeaseDurationSeconds,
  nodeLeaseRenewMs,
  nodeStatusReportMs,
  kubeWriteRetryMs,
  nodePodsMax,
} from '../constants.js';
import type { NodeAllocatable } from '../events/types.js';
import type { Clock, TimerHandle } from '../clock.js';
import { KubeApiError, type JsonObject, type KubeTransport } from './http.js';
import { microTime } from './lease.js';

const nodeLeaseNamespace = 'kube-node-lease';
const readyReason = 'VoleReady';

const statusOf = (error: unknown) => (error instanceof KubeApiError ? error.statusCode : 0);

/** The Node's capacity and allocatable (the same: vole reserves nothing), as quantities. */
function resourcesOf(allocatable: NodeAllocatable | undefined): Record<string, unknown> {
  if (allocatable === undefined) return {};
  const { cpuMillis, memoryBytes, ephemeralStorageBytes } = allocatable;
  const resources = {
    cpu: cpuMillis % 1000 === 0 ? String(cpuMillis / 1000) : `${cpuMillis}m`,
    memory: String(memoryBytes),
    'ephemeral-storage': String(ephemeralStorageBytes),
    pods: String(nodePodsMax),
  };
  return { capacity: resources, allocatable: resources };
}

export class NodeHeartbeat {
  private lease: JsonObject | null = null;
  private timer: TimerHandle | null = null;
  private stopped = false;
  private lastReadyMs = -Infinity;
  private failures = 0;
  private readySinceMs: number;

  constructor(
    private readonly opts: {
      http: KubeTransport;
      node: string;
      nodeUid: string;
      say: (line: string) => void;
      clock: Clock;
      /** Published as the Node's capacity and allocatable with Ready (none: none published). */
      allocatable?: NodeAllocatable | undefined;
    },
  ) {
    this.readySinceMs = this.now();
  }

  private now(): number {
    return this.opts.clock.nowMs();
  }

  private get leasePath(): string {
    const name = encodeURIComponent(this.opts.node);
    return `/apis/coordination.k8s.io/v1/namespaces/${nodeLeaseNamespace}/leases/${name}`;
  }

  /** The first beat (Lease and Ready) before it returns; then one every renew interval. */
  async start(): Promise<void> {
    await this.beat();
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = this.opts.clock.setTimer(this.now() + delayMs, () => void this.beat());
  }

  /**
   * Renews the Lease, posts Ready when due. A failure is said and retried sooner, the wait
   * doubling up to the renew interval (the kubelet's lease controller backs off so too).
   */
  private async beat(): Promise<void> {
    this.timer = null;
    try {
      await this.renewLease();
      if (this.now() - this.lastReadyMs >= nodeStatusReportMs) await this.postReady();
      this.failures = 0;
      this.schedule(nodeLeaseRenewMs);
    } catch (error) {
      const retryMs = Math.min(kubeWriteRetryMs * 2 ** this.failures, nodeLeaseRenewMs);
      this.failures += 1;
      this.opts.say(
        `node heartbeat failed, retrying in ${retryMs} ms: ${(error as Error).message}`,
      );
      this.schedule(retryMs);
    }
  }

  /**
   * The Node's status as its watch shows it: a Ready condition not True (not ours) is posted again
   * at the next beat, a transition from now.
   */
  nodeSeen(nodeStatus: unknown): void {
    const { conditions } = (nodeStatus ?? {}) as {
      conditions?: { type?: string; status?: string }[];
    };
    const ready = conditions?.find((c) => c.type === 'Ready');
    if (ready === undefined || ready.status === 'True' || this.lastReadyMs === -Infinity) return;
    this.opts.say(
      `node Ready is ${ready.status ?? 'unset'} on the API server: posting Ready again`,
    );
    this.lastReadyMs = -Infinity;
    this.readySinceMs = this.now();
  }

  /** An update of the Lease last seen; created when absent, read again on a conflict. */
  private async renewLease(): Promise<void> {
    const { http } = this.opts;
    if (this.lease === null) {
      try {
        this.lease = await http.get(this.leasePath);
      } catch (error) {
        if (statusOf(error) !== 404) throw error;
        this.lease = await this.createLease();
        return;
      }
    }
    const spec = (this.lease.spec ?? {}) as Record<string, unknown>;
    const renewed = { ...this.lease, spec: { ...spec, renewTime: microTime(this.now()) } };
    try {
      this.lease = await http.put(this.leasePath, renewed);
    } catch (error) {
      this.lease = null; // read again next time (409: someone wrote it; 404: it was deleted)
      throw error;
    }
  }

  private createLease(): Promise<JsonObject> {
    const { http, node, nodeUid } = this.opts;
    return http.post(`/apis/coordination.k8s.io/v1/namespaces/${nodeLeaseNamespace}/leases`, {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: node,
        namespace: nodeLeaseNamespace,
        ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: node, uid: nodeUid }],
      },
      spec: {
        holderIdentity: node,
        leaseDurationSeconds: nodeLeaseDurationSeconds,
        renewTime: microTime(this.now()),
      },
    });
  }

  /**
   * The Ready condition (a strategic merge patch keyed by type leaves the others), with the
   * node's capacity and allocatable, which the scheduler's NodeResourcesFit reads: without
   * them (and their `pods`) no pod would ever be placed here.
   */
  private async postReady(): Promise<void> {
    const nowMs = this.now();
    const node = encodeURIComponent(this.opts.node);
    await this.opts.http.patch(
      `/api/v1/nodes/${node}/status`,
      {
        status: {
          ...resourcesOf(this.opts.allocatable),
          conditions: [
            {
              type: 'Ready',
              status: 'True',
              reason: readyReason,
              message: 'vole is posting ready status (volumes only, no container runtime)',
              lastHeartbeatTime: new Date(nowMs).toISOString().replace(/\.\d+Z$/, 'Z'),
              lastTransitionTime: new Date(this.readySinceMs).toISOString().replace(/\.\d+Z$/, 'Z'),
            },
          ],
        },
      },
      'strategic',
    );
    this.lastReadyMs = nowMs;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) this.opts.clock.clearTimer(this.timer);
    this.timer = null;
  }
}
