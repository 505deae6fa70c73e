/**
 * The node agent's CSI drivers: each one found (`--csi NAME=unix:///…`, or a registration
 * socket under `<root>/plugins_registry/`) is asked who it is and what it can do
 * (GetPluginInfo, NodeGetInfo, NodeGetCapabilities, GetPluginCapabilities and, with a
 * controller service, ControllerGetCapabilities), then served by a CSI plugin. Each
 * registration and each driver that goes away is an event in the log.
 */
import { existsSync, statSync } from 'node:fs';
import pino, { type Logger } from 'pino';
import type { CsiDriverCaps, EventOf } from '../events/index.js';
import type { PluginManager } from '../plugins/manager.js';
import { PluginError } from '../plugins/types.js';
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
async function probeDriver(transport: CsiTransport): Promise<DriverInfo> {
  const ask = <T>(rpc: Parameters<CsiTransport['call']>[0]) =>
    transport.call<T>(rpc, {}, { deadlineMs: probeDeadlineMs });
  const plugin = await ask<{ name: string; vendor_version: string }>('GetPluginInfo');
  const node = await ask<{
    node_id: string;
    max_volumes_per_node: string;
    accessible_topology?: { segments?: Record<string, string> } | null;
  }>('NodeGetInfo');
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
      createDelete: controllerCapabilities.includes('CREATE_DELETE_VOLUME'),
      controllerExpand: controllerCapabilities.includes('EXPAND_VOLUME'),
      ...topologyOf(node.accessible_topology?.segments),
    },
  };
}

/** NodeGetInfo's accessible_topology, when it has segments. */
function topologyOf(segments: Record<string, string> | undefined) {
  if (segments === undefined || Object.keys(segments).length === 0) return {};
  const sorted = Object.entries(segments).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return { accessibleTopology: Object.fromEntries(sorted) };
}

/** Whether two probes of a driver answered the same (then nothing is recorded again). */
function sameInfo(a: DriverInfo, b: DriverInfo): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

interface Registered {
  readonly handle: CsiDriverHandle;
  readonly endpoint: string;
  readonly via: 'flag' | 'registration';
  readonly info: DriverInfo;
  /** The socket file the answers came from (a new file is a restarted driver). */
  socket: string | undefined;
  /** The questions being asked again, while they are. */
  asking?: Promise<void>;
  /** Why the driver is not registered now (CsiDriverDeregistered's reason), while it is not. */
  deregistered?: string;
}

/** Which socket file is at the endpoint now (inode and change time), or undefined. */
function socketIdentity(endpoint: string): string | undefined {
  if (!endpoint.startsWith('unix://')) return undefined;
  try {
    const st = statSync(endpoint.slice('unix://'.length), { bigint: true });
    return `${st.ino}:${st.ctimeNs}`;
  } catch {
    return undefined;
  }
}

export class CsiDriverRegistry {
  private readonly drivers = new Map<string, Registered>();
  private record: ((event: DriverEvent) => void) | undefined;
  private readonly pending: DriverEvent[] = [];

  private readonly logger: Logger;

  constructor(
    private readonly opts: {
      root: string;
      plugins: PluginManager;
      /** Where it logs drivers that restart or fail to register (default: nowhere). */
      logger?: Logger;
      /** The attach/detach controller's: each node's node_id for a driver (CsiPluginOptions). */
      nodeIdOf?: (driver: string, node: string) => string | undefined;
    },
  ) {
    this.logger = opts.logger ?? pino({ level: 'silent' });
  }

  /** Where events go; those of drivers found before (startup) are handed over now. */
  setRecorder(record: (event: DriverEvent) => void): void {
    this.record = record;
    for (const event of this.pending.splice(0)) record(event);
  }

  private emit(event: DriverEvent): void {
    if (this.record === undefined) this.pending.push(event);
    else this.record(event);
  }

  /**
   * Connects, asks, and serves the driver's volumes from now on. Its answers are kept (the
   * kubelet asks NodeGetCapabilities before each operation; vole asks once per driver
   * process): before each RPC the socket file is looked at, and when it is a new one (the
   * driver restarted, maybe as another version) the driver is asked again before the RPC
   * goes. Different answers are recorded as a new registration, and that RPC is not sent:
   * its operation was planned with the old answers, and is planned again with the new.
   */
  async add(
    endpoint: string,
    via: 'flag' | 'registration',
    expectedName?: string,
  ): Promise<DriverInfo> {
    const transport = new GrpcTransport(endpoint);
    const socket = socketIdentity(endpoint);
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
    this.install(info, transport, { endpoint, via, socket });
    return info;
  }

  /** Serves the driver's volumes with what it answered, and records it. */
  private install(
    info: DriverInfo,
    transport: CsiTransport,
    at: Pick<Registered, 'endpoint' | 'via' | 'socket'>,
  ): void {
    const handle: CsiDriverHandle = {
      name: info.name,
      transport,
      caps: info.caps,
      nodeId: info.nodeId,
      beforeRpc: () => this.beforeRpc(info.name, handle),
      unavailable: () => this.unavailable(info.name, handle),
    };
    const { endpoint, via, socket } = at;
    this.drivers.set(info.name, { handle, info, endpoint, via, socket });
    const host = realCsiHost(this.opts.root);
    const nodeIdOf = this.opts.nodeIdOf;
    const options = {
      root: this.opts.root,
      host,
      nowMs: () => performance.now(),
      ...(nodeIdOf === undefined ? {} : { nodeIdOf }),
    };
    this.opts.plugins.upsert(csiPlugin(handle, options));
    this.emit({
      type: 'CsiDriverRegistered',
      driver: info.name,
      endpoint: at.endpoint,
      via: at.via,
      vendorVersion: info.vendorVersion,
      nodeId: info.nodeId,
      nodeCapabilities: info.nodeCapabilities,
      controllerCapabilities: info.controllerCapabilities,
      caps: csiPluginCaps(info.name, info.caps),
    });
  }

  /** Undefined (go on) unless the socket is a new file: then the driver is asked again first. */
  private beforeRpc(name: string, handle: CsiDriverHandle): Promise<void> | undefined {
    const entry = this.drivers.get(name);
    if (entry === undefined || entry.handle !== handle) return this.replaced(name);
    const socket = socketIdentity(entry.endpoint);
    // No socket: unavailable() kept the call from being recorded; gone since, the RPC fails
    // as UNAVAILABLE (uncertain: the kubelet cannot tell either).
    if (socket === undefined || socket === entry.socket) return entry.asking;
    entry.socket = socket;
    entry.asking = this.askAgain(entry).finally(() => (entry.asking = undefined));
    return entry.asking;
  }

  /**
   * Why no RPC can reach the driver: it is not registered (its registration went away), or
   * its endpoint socket is gone. Either way nothing would be sent, so nothing can be in
   * progress: the call fails as one that did not happen, before it is recorded.
   */
  private unavailable(name: string, handle: CsiDriverHandle): string | undefined {
    const entry = this.drivers.get(name);
    if (handle.transport === undefined) {
      const why = entry?.handle === handle ? entry.deregistered : undefined;
      return `CSI driver ${name} is not registered: ${why ?? 'it went away'}`;
    }
    if (entry?.handle !== handle || !entry.endpoint.startsWith('unix://')) return undefined;
    const path = entry.endpoint.slice('unix://'.length);
    if (existsSync(path)) return undefined;
    const fix = 'start the driver again, vole retries';
    return `CSI driver ${name}'s endpoint socket ${path} is gone; ${fix}`;
  }

  /** A call planned with a registration that has been replaced since does not go. */
  private replaced(name: string): Promise<void> {
    return Promise.reject(
      new PluginError(
        'final',
        `CSI driver ${name} registered again since this call was planned; planning again`,
      ),
    );
  }

  /** The same questions to a restarted driver; new answers replace the registration. */
  private async askAgain(entry: Registered): Promise<void> {
    const { handle, info: before } = entry;
    let info: DriverInfo;
    try {
      info = await probeDriver(handle.transport!);
    } catch (error) {
      entry.socket = undefined; // asked again before the next RPC
      const err = (error as Error).message;
      this.logger.warn({ driver: handle.name, err }, 'restarted CSI driver did not answer');
      return;
    }
    if (this.drivers.get(handle.name) !== entry || sameInfo(info, before)) return;
    if (info.name !== handle.name) {
      const reason = `the driver at ${entry.endpoint} now calls itself ${info.name}; register it by that name`;
      this.remove(handle.name, reason);
    } else {
      this.logger.info({ driver: handle.name }, 'restarted CSI driver answered differently');
      this.install(info, handle.transport!, entry);
    }
    const message = `CSI driver ${handle.name} restarted with other answers; planning again with them`;
    throw new PluginError('final', message);
  }

  /** The driver went away: its calls fail as uncertain until it registers again. */
  remove(name: string, reason: string): void {
    const entry = this.drivers.get(name);
    if (entry === undefined || entry.handle.transport === undefined) return;
    entry.handle.transport.close();
    entry.handle.transport = undefined;
    entry.deregistered = reason;
    this.emit({ type: 'CsiDriverDeregistered', driver: name, endpoint: entry.endpoint, reason });
  }

  close(): void {
    for (const { handle } of this.drivers.values()) handle.transport?.close();
  }
}
