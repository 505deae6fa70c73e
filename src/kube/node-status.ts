/**
 * What the kubelet writes about its node, written by vole: the Node's registration (with
 * the controller-managed-attach-detach annotation), `status.volumesInUse` (a patch of the
 * status subresource), and from CSI plugin registration the CSINode object, the
 * `csi.volume.kubernetes.io/nodeid` annotation and the driver's topology labels.
 */
import type { Logger } from 'pino';
import { kubeWriteRetryMs } from '../constants.js';
import { managedAnnotation } from '../controller/fold.js';
import { csiNodeIdAnnotation } from '../cluster/status.js';
import { type Clock, sleep } from '../clock.js';
import { KubeApiError, type JsonObject, type KubeTransport } from './http.js';

/** One CSI driver as CSINode.spec.drivers lists it. */
export interface CsiNodeDriver {
  readonly name: string;
  readonly nodeID: string;
  readonly topologyKeys: readonly string[] | null;
  readonly allocatable?: { count: number };
}

const isNotFound = (error: unknown) => error instanceof KubeApiError && error.statusCode === 404;
const isConflict = (error: unknown) => error instanceof KubeApiError && error.statusCode === 409;

export class NodeStatusWriter {
  private readonly drivers = new Map<string, CsiNodeDriver>();
  private csiWrites: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly opts: {
      http: KubeTransport;
      clock: Clock;
      node: string;
      controllerAttachDetach: boolean;
      logger: Logger;
      say: (line: string) => void;
    },
  ) {}

  private get nodePath(): string {
    return `/api/v1/nodes/${encodeURIComponent(this.opts.node)}`;
  }

  /**
   * Registers the Node as the kubelet does (labels kubernetes.io/hostname, os, arch) when
   * nobody created it; sets or clears the controller-managed-attach-detach annotation on
   * an existing one. Returns the Node's uid (the CSINode's owner).
   */
  async registerNode(): Promise<string> {
    const { http, node, controllerAttachDetach } = this.opts;
    const annotation = controllerAttachDetach ? 'true' : null;
    try {
      const created = await http.post('/api/v1/nodes', {
        apiVersion: 'v1',
        kind: 'Node',
        metadata: {
          name: node,
          labels: {
            'kubernetes.io/hostname': node,
            'kubernetes.io/os': 'linux',
            'kubernetes.io/arch': process.arch === 'x64' ? 'amd64' : process.arch,
          },
          annotations: annotation === null ? {} : { [managedAnnotation]: annotation },
        },
      });
      return uidOf(created);
    } catch (error) {
      if (!(error instanceof KubeApiError && error.statusCode === 409)) throw error;
    }
    const patched = await http.patch(
      this.nodePath,
      { metadata: { annotations: { [managedAnnotation]: annotation } } },
      'merge',
    );
    return uidOf(patched);
  }

  /** status.volumesInUse, replaced whole (absent when empty, as the kubelet leaves it). */
  async patchVolumesInUse(volumes: readonly string[]): Promise<void> {
    await this.opts.http.patch(
      `${this.nodePath}/status`,
      { status: { volumesInUse: volumes.length === 0 ? null : volumes } },
      'merge',
    );
  }

  /** The CSINode with no drivers yet, owned by the Node (the kubelet makes it at start). */
  async initializeCsiNode(nodeUid: string): Promise<void> {
    const { http, node } = this.opts;
    try {
      await http.post('/apis/storage.k8s.io/v1/csinodes', {
        apiVersion: 'storage.k8s.io/v1',
        kind: 'CSINode',
        metadata: {
          name: node,
          ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: node, uid: nodeUid }],
        },
        spec: { drivers: [] },
      });
    } catch (error) {
      if (!isConflict(error)) throw error;
    }
  }

  /**
   * A driver registered: as the kubelet's node info manager, the Node first (nodeid
   * annotation, a label per topology segment), then its CSINode entry; retried. A segment
   * whose label the Node already has with another value is a collision: the driver is not
   * installed (neither write is made) and the agent says why.
   */
  driverRegistered(driver: CsiNodeDriver, topology: Readonly<Record<string, string>> = {}): void {
    this.drivers.set(driver.name, driver);
    this.enqueue(`CSI driver ${driver.name} registered`, async () => {
      const collision = await this.topologyCollision(topology);
      if (collision !== undefined) {
        this.drivers.delete(driver.name);
        this.opts.say(`CSI driver ${driver.name} not installed on the Node: ${collision}`);
        return;
      }
      await this.writeNodeAnnotation(topology);
      await this.writeCsiNode();
    });
  }

  /** The kubelet's check: a topology label the Node has with another value. */
  private async topologyCollision(
    topology: Readonly<Record<string, string>>,
  ): Promise<string | undefined> {
    if (Object.keys(topology).length === 0) return undefined;
    const current = await this.opts.http.get(this.nodePath);
    const labels = (current.metadata as { labels?: Record<string, string> }).labels ?? {};
    for (const [key, value] of Object.entries(topology)) {
      const existing = labels[key];
      if (existing !== undefined && existing !== value)
        return (
          `detected topology value collision: driver reported ${key}=${value} ` +
          `but the Node has ${key}=${existing}`
        );
    }
    return undefined;
  }

  /**
   * A driver went away: its CSINode entry and annotation key go too; its topology labels
   * stay on the Node, as the kubelet leaves them.
   */
  driverDeregistered(name: string): void {
    if (!this.drivers.delete(name)) return;
    this.enqueue(`CSI driver ${name} deregistered`, async () => {
      await this.writeCsiNode();
      await this.writeNodeAnnotation({});
    });
  }

  /** Resolves once every CSI write asked for so far is done. */
  settled(): Promise<void> {
    return this.csiWrites;
  }

  stop(): void {
    this.stopped = true;
  }

  private enqueue(what: string, write: () => Promise<void>): void {
    this.csiWrites = this.csiWrites.then(async () => {
      while (!this.stopped) {
        try {
          await write();
          return;
        } catch (error) {
          this.opts.say(
            `${what}: writing CSINode or the Node failed, retrying: ${(error as Error).message}`,
          );
          await sleep(this.opts.clock, kubeWriteRetryMs);
        }
      }
    });
  }

  /** CSINode.spec.drivers from what is registered now (read, replaced, written back). */
  private async writeCsiNode(): Promise<void> {
    const path = `/apis/storage.k8s.io/v1/csinodes/${encodeURIComponent(this.opts.node)}`;
    let current: JsonObject;
    try {
      current = await this.opts.http.get(path);
    } catch (error) {
      if (!isNotFound(error)) throw error;
      await this.initializeCsiNode(uidOf(await this.opts.http.get(this.nodePath)));
      current = await this.opts.http.get(path);
    }
    const drivers = [...this.drivers.values()]
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((d) => ({
        name: d.name,
        nodeID: d.nodeID,
        topologyKeys: d.topologyKeys,
        ...(d.allocatable === undefined ? {} : { allocatable: d.allocatable }),
      }));
    await this.opts.http.put(path, { ...current, spec: { drivers } });
  }

  /** The nodeid annotation (JSON map driver → node ID) and the topology labels. */
  private async writeNodeAnnotation(topology: Readonly<Record<string, string>>): Promise<void> {
    const ids = Object.fromEntries([...this.drivers.values()].map((d) => [d.name, d.nodeID]));
    const value = Object.keys(ids).length === 0 ? null : JSON.stringify(ids);
    const labels = Object.keys(topology).length === 0 ? {} : { labels: topology };
    await this.opts.http.patch(
      this.nodePath,
      { metadata: { annotations: { [csiNodeIdAnnotation]: value }, ...labels } },
      'merge',
    );
  }
}

function uidOf(object: JsonObject): string {
  const metadata = object.metadata as { uid?: string } | undefined;
  if (metadata?.uid === undefined) throw new Error('the API server answered a Node without a uid');
  return metadata.uid;
}

/**
 * verifyControllerAttachedVolume's read of the Node (GenerateVerifyControllerAttachedVolumeFunc
 * GETs it from the API server, not from an informer): the devicePath status.volumesAttached
 * lists for the volume now. A Node that is gone lists nothing.
 */
export function controllerAttachedNow(
  http: Pick<KubeTransport, 'get'>,
  node: string,
): (volume: string) => Promise<string | undefined> {
  return async (volume) => {
    let object: JsonObject;
    try {
      object = await http.get(`/api/v1/nodes/${encodeURIComponent(node)}`);
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
    const status = (object.status ?? {}) as {
      volumesAttached?: { name: string; devicePath?: string }[];
    };
    const entry = status.volumesAttached?.find((v) => v.name === volume);
    return entry === undefined ? undefined : (entry.devicePath ?? '');
  };
}
