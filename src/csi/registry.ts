/**
 * The node agent's CSI drivers: each one found (`--csi NAME=unix:///…`, or a registration
 * socket under `<root>/plugins_registry/`) is asked who it is and what it can do
 * (GetPluginInfo, NodeGetInfo, NodeGetCapabilities, GetPluginCapabilities and, with a
 * controller service, ControllerGetCapabilities), then served by a CSI plugin. Each
 * registration and each driver that goes away is an event in the log.
 */
import type { Logger } from 'pino';
import type { CsiDriverCaps, EventOf } from '../events/index.js';
import type { PluginManager } from '../plugins/manager.js';
import { realCsiHost } from './host.js';
import { type CsiDriverHandle, csiPlugin, csiPluginCaps } from './plugin.js';
import type { ServiceCapability } from './proto.js';
import { type CsiTransport, GrpcTransport } from './transport.js';

/** How long the questions of a registration may take each. */
const probeDeadlineMs = 10_000;

export type DriverEvent =
  | Omit<EventOf<'CsiDriverRegistered'>, 'seq' | 'tsMs'>
  | Omit<EventOf<'CsiDriverDeregistered'>, 'seq' | 'tsMs'>;

export interface DriverInfo {
  readonly name: string;
  readonly vendorVersion: string;
  readonly nodeId: string;
  readonly nodeCapabilities: string[];
  readonly controllerCapabilities: string[];
  readonly caps: CsiDriverCaps;
}

const typesOf = (capabilities: readonly ServiceCapability[] | undefined, key: 'rpc' | 'service') =>
  (capabilities ?? []).map((c) => c[key]?.type).filter((t): t is string => t !== undefined);

/** The questions the kubelet asks a driver after it registers. */
export async function probeDriver(transport: CsiTransport): Promise<DriverInfo> {
  const ask = <T>(rpc: Parameters<CsiTransport['call']>[0]) =>
    transport.call<T>(rpc, {}, { deadlineMs: probeDeadlineMs });
  const plugin = await ask<{ name: string; vendor_version: string }>('GetPluginInfo');
  const node = await ask<{ node_id: string; max_volumes_per_node: string }>('NodeGetInfo');
  const nodeCaps = await ask<{ capabilities: ServiceCapability[] }>('NodeGetCapabilities');
  const pluginCaps = await ask<{ capabilities: ServiceCapability[] }>('GetPluginCapabilities');
  const hasController = typesOf(pluginCaps.capabilities, 'service').includes('CONTROLLER_SERVICE');
  const controllerCaps = hasController
    ? await ask<{ capabilities: ServiceCapability[] }>('ControllerGetCapabilities')
    : { capabilities: [] };
  const nodeCapabilities = typesOf(nodeCaps.capabilities, 'rpc');
  const controllerCapabilities = typesOf(controllerCaps.capabilities, 'rpc');
  return {
    name: plugin.name,
    vendorVersion: plugin.vendor_version,
    nodeId: node.node_id,
    nodeCapabilities,
    controllerCapabilities,
    caps: {
      publishUnpublish: controllerCapabilities.includes('PUBLISH_UNPUBLISH_VOLUME'),
      stageUnstage: nodeCapabilities.includes('STAGE_UNSTAGE_VOLUME'),
      expand: nodeCapabilities.includes('EXPAND_VOLUME'),
      singleNodeMultiWriter: nodeCapabilities.includes('SINGLE_NODE_MULTI_WRITER'),
      maxVolumesPerNode: Number(node.max_volumes_per_node ?? 0),
    },
  };
}

export class CsiDriverRegistry {
  private readonly drivers = new Map<string, { handle: CsiDriverHandle; endpoint: string }>();
  private record: ((event: DriverEvent) => void) | undefined;
  private readonly pending: DriverEvent[] = [];

  constructor(
    private readonly opts: {
      root: string;
      plugins: PluginManager;
      logger: Logger;
      /** The attach/detach controller's: each node's node_id for a driver (CsiPluginOptions). */
      nodeIdOf?: (driver: string, node: string) => string | undefined;
    },
  ) {}

  /** Where events go; those of drivers found before (startup) are handed over now. */
  setRecorder(record: (event: DriverEvent) => void): void {
    this.record = record;
    for (const event of this.pending.splice(0)) record(event);
  }

  private emit(event: DriverEvent): void {
    if (this.record === undefined) this.pending.push(event);
    else this.record(event);
  }

  /** Connects, asks, and serves the driver's volumes from now on. */
  async add(endpoint: string, via: 'flag' | 'registration', expectedName?: string): Promise<DriverInfo> {
    const transport = new GrpcTransport(endpoint);
    let info: DriverInfo;
    try {
      info = await probeDriver(transport);
    } catch (error) {
      transport.close();
      throw new Error(`CSI driver at ${endpoint} did not answer: ${(error as Error).message}`);
    }
    if (expectedName !== undefined && info.name !== expectedName) {
      transport.close();
      throw new Error(`CSI driver at ${endpoint} calls itself ${info.name}, not ${expectedName}`);
    }
    this.drivers.get(info.name)?.handle.transport?.close();
    const handle: CsiDriverHandle = { name: info.name, transport, caps: info.caps, nodeId: info.nodeId };
    this.drivers.set(info.name, { handle, endpoint });
    const host = realCsiHost(this.opts.root);
    const nodeIdOf = this.opts.nodeIdOf;
    const options = { root: this.opts.root, host, nowMs: () => performance.now(), ...(nodeIdOf === undefined ? {} : { nodeIdOf }) };
    this.opts.plugins.upsert(csiPlugin(handle, options));
    this.emit({
      type: 'CsiDriverRegistered',
      driver: info.name,
      endpoint,
      via,
      vendorVersion: info.vendorVersion,
      nodeId: info.nodeId,
      nodeCapabilities: info.nodeCapabilities,
      controllerCapabilities: info.controllerCapabilities,
      caps: csiPluginCaps(info.name, info.caps),
    });
    return info;
  }

  /** The driver went away: its calls fail as uncertain until it registers again. */
  remove(name: string, reason: string): void {
    const entry = this.drivers.get(name);
    if (entry === undefined || entry.handle.transport === undefined) return;
    entry.handle.transport.close();
    entry.handle.transport = undefined;
    this.emit({ type: 'CsiDriverDeregistered', driver: name, endpoint: entry.endpoint, reason });
  }

  close(): void {
    for (const { handle } of this.drivers.values()) handle.transport?.close();
  }
}
