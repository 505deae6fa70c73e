/**
 * One attach/detach controller and N node agents in one process, each with its own log,
 * wired through node status as in Kubernetes (behaviour C5): an agent publishes volumesInUse
 * (then marks them reported in use), the controller publishes volumesAttached, and each
 * side acts only on what the other published. For tests, demos and simulations.
 */
import pino, { type Logger } from 'pino';
import { ControllerManager } from '../agent/controller-manager.js';
import { type EventSink, MemorySink } from '../engine/sink.js';
import { VolumeManager } from '../agent/volume-manager.js';
import type { ClusterObject, Node, Pod } from '../events/k8s.js';
import type { Clock } from '../clock.js';
import type { PluginManager } from '../plugins/manager.js';
import { managedAnnotation } from '../controller/fold.js';

export interface ClusterOptions {
  readonly nodes: readonly string[];
  readonly clock: Clock;
  /** The controller's plugins (attach/detach) and each node's (mount). */
  readonly controllerPlugins: PluginManager;
  readonly nodePlugins: (node: string) => PluginManager;
  readonly logger?: Logger;
  readonly sinks?: { controller?: EventSink; node?: (node: string) => EventSink };
  readonly maxWaitForUnmountMs?: number;
}

export class Cluster {
  readonly controller: ControllerManager;
  readonly agents = new Map<string, VolumeManager>();
  private readonly published = new Map<string, string>();
  private readonly inUse = new Map<string, string>();
  private syncScheduled = false;

  constructor(private readonly opts: ClusterOptions) {
    const logger = opts.logger ?? pino({ level: 'silent' });
    this.controller = ControllerManager.create({
      plugins: opts.controllerPlugins,
      clock: opts.clock,
      log: { sink: opts.sinks?.controller ?? new MemorySink(), history: [] },
      logger,
      verifyAttachments: false,
      ...(opts.maxWaitForUnmountMs === undefined
        ? {}
        : { maxWaitForUnmountMs: opts.maxWaitForUnmountMs }),
    });
    for (const node of opts.nodes) {
      const sink = opts.sinks?.node?.(node) ?? new MemorySink();
      this.agents.set(
        node,
        VolumeManager.create({
          node,
          plugins: opts.nodePlugins(node),
          clock: opts.clock,
          controllerAttachDetach: true,
          logger,
          log: { sink, history: [] },
        }),
      );
    }
    this.controller.subscribe(() => this.scheduleSync());
    for (const agent of this.agents.values()) agent.subscribe(() => this.scheduleSync());
  }

  start(): void {
    this.controller.start();
    for (const node of this.opts.nodes)
      this.controller.inputs.upsertObject(this.nodeObject(node, []));
    for (const agent of this.agents.values()) {
      agent.start();
      agent.inputs.markSourcesReady();
    }
  }

  stop(): void {
    this.controller.stop();
    for (const agent of this.agents.values()) agent.stop();
  }

  private nodeObject(node: string, volumesInUse: readonly string[]): Node {
    return {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: node, annotations: { [managedAnnotation]: 'true' } },
      status: { conditions: [{ type: 'Ready', status: 'True' }], volumesInUse: [...volumesInUse] },
    };
  }

  /** A pod scheduled to a node: the controller and that node's agent both see it. */
  addPod(pod: Pod): void {
    this.controller.inputs.addPod(pod);
    const node = pod.spec.nodeName;
    if (node !== undefined) this.agents.get(node)?.inputs.addPod(pod);
  }

  removePod(pod: Pod): void {
    const uid = pod.metadata.uid ?? '';
    this.controller.inputs.removePod(uid);
    const node = pod.spec.nodeName;
    if (node !== undefined) this.agents.get(node)?.inputs.removePod(uid);
  }

  upsertObject(object: ClusterObject): void {
    this.controller.inputs.upsertObject(object);
    for (const agent of this.agents.values()) agent.inputs.upsertObject(object);
  }

  private scheduleSync(): void {
    if (this.syncScheduled) return;
    this.syncScheduled = true;
    setImmediate(() => {
      this.syncScheduled = false;
      this.sync();
    });
  }

  /**
   * One round of node status: each agent's volumesInUse goes to the controller (the node
   * status patch) and is then marked reported in use on the agent; the controller's
   * volumesAttached goes to each agent.
   */
  sync(): void {
    if (!this.controller.isRunning) return;
    for (const [node, agent] of this.agents) {
      const inUse = agent.status.getVolumesInUse();
      const key = inUse.join(' ');
      if (this.inUse.get(node) !== key) {
        this.inUse.set(node, key);
        this.controller.inputs.upsertObject(this.nodeObject(node, inUse));
        agent.inputs.markVolumesAsReportedInUse(inUse);
      }
      const list = this.controller.status.volumesAttached(node);
      const published = JSON.stringify(list);
      if (this.published.get(node) !== published) {
        this.published.set(node, published);
        agent.inputs.observeVolumesAttached(list);
      }
    }
  }
}
