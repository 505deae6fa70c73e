/**
 * The kubelet's `kubernetes.io/csi` plugin: every call of a volume served by a CSI driver
 * is the RPC docs/csi.md gives (attach → ControllerPublishVolume, mountDevice →
 * NodeStageVolume, setUp → NodePublishVolume, and back; Block volumes; NodeExpandVolume),
 * each with a deadline. A failed RPC is a PluginError of the class docs/csi.md gives its code:
 * `uncertain` when the operation may still be in progress, `final` when it did not happen.
 * Each call leaves its RPC (method, code, duration) on the call target for the log.
 */
import { dirname } from 'node:path';
import { csiRpcDeadlineMs } from '../constants.js';
import type { CsiDriverCaps, PluginCaps } from '../events/index.js';
import {
  type AttacherOps,
  type BlockMapperOps,
  type CallTarget,
  caps,
  type DeviceMounterOps,
  type ExpanderOps,
  type PodVolumeOps,
  PluginError,
  type ProvisionerOps,
  type VolumePlugin,
} from '../plugins/types.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';
import type { CsiHostOps } from './host.js';
import {
  csiBlockPublishDir,
  csiBlockPublishPath,
  csiBlockStagingPath,
  csiPodDevicePath,
  csiPublishPath,
  csiStagingPath,
} from './paths.js';
import {
  type ControllerExpandVolumeResponse,
  type CreateVolumeResponse,
  type CsiRpc,
  fullMethod,
  type VolumeCapability,
} from './proto.js';
import {
  accessModeOf,
  csiSourceOf,
  decodePublishContext,
  encodePublishContext,
  volumeCapabilityOf,
  volumeContextOf,
  volumeIdOf,
} from './requests.js';
import {
  type CsiTransport,
  CsiRpcError,
  errorClassOf,
  provisionErrorClassOf,
} from './transport.js';

/** A driver as the plugin sees it: its connection (absent while it is away) and what it can do. */
export interface CsiDriverHandle {
  readonly name: string;
  transport: CsiTransport | undefined;
  readonly caps: CsiDriverCaps;
  /** NodeGetInfo's node_id: what ControllerPublishVolume names the node by. */
  readonly nodeId: string;
  /**
   * Before each RPC: undefined to go on, or a promise to wait for first (the registry asks
   * a restarted driver again); it rejects with a PluginError when the RPC must not go.
   */
  readonly beforeRpc?: () => Promise<void> | undefined;
  /**
   * Why no RPC can reach the driver now (not registered, endpoint socket gone), else
   * undefined. Absent: the driver is unreachable exactly while it has no transport.
   */
  readonly unavailable?: () => string | undefined;
}

export interface CsiPluginOptions {
  readonly root: string;
  /**
   * The node_id a node's copy of this driver answered NodeGetInfo with, by node name (the
   * attach/detach controller in cluster mode: what `csi.volume.kubernetes.io/nodeid` on the
   * Node says). Absent: the node is this driver's own (a node agent attaching itself).
   */
  readonly nodeIdOf?: (driver: string, node: string) => string | undefined;
  readonly host: CsiHostOps;
  /** A clock for RPC durations (the virtual clock in a simulation). */
  readonly nowMs: () => number;
  readonly deadlineMs?: number;
}

/** The plugin capabilities of a CSI driver (recorded in the log like any plugin's). */
export function csiPluginCaps(driver: string, csi: CsiDriverCaps): PluginCaps {
  return {
    ...caps(driver, {
      attachable: csi.publishUnpublish,
      deviceMountable: true,
      blockMappable: true,
      nodeExpandable: csi.expand,
      requiresFSResize: true,
    }),
    csi,
  };
}

/** One RPC with its deadline, recorded on the target, its failure classified. */
class CsiClient {
  constructor(
    readonly driver: CsiDriverHandle,
    readonly opts: CsiPluginOptions,
  ) {}

  rpc<Res>(rpc: CsiRpc, request: object, spec: ResolvedVolume, target: CallTarget): Promise<Res> {
    const about = { volume: spec.volume, handle: csiSourceOf(spec).volumeHandle };
    return this.rpcAbout(rpc, request, about, target);
  }

  /** One RPC about a volume named by its unique name and handle (provisioning has no spec). */
  async rpcAbout<Res>(
    rpc: CsiRpc,
    request: object,
    about: { readonly volume: string; readonly handle: string },
    target: CallTarget,
  ): Promise<Res> {
    const waitFor = this.driver.beforeRpc?.();
    if (waitFor !== undefined) await waitFor;
    const transport = this.driver.transport;
    // Deregistered since the executor asked: nothing is sent, so nothing may be in progress.
    if (transport === undefined)
      throw new PluginError('final', `${rpc} of ${about.volume}: ${this.notRegistered()}`);
    const method = fullMethod(rpc);
    const startMs = this.opts.nowMs();
    // The call's signal is made only if the transport reads it (EngineCallTarget).
    const info = {
      ...about,
      node: target.node,
      pod: target.pod,
      get signal() {
        return target.signal;
      },
    };
    try {
      const deadlineMs = this.opts.deadlineMs ?? csiRpcDeadlineMs;
      const response = await transport.call<Res>(rpc, request, { deadlineMs, info });
      target.rpc = { method, code: 'OK', durationMs: this.opts.nowMs() - startMs };
      return response;
    } catch (error) {
      const code = error instanceof CsiRpcError ? error.code : null;
      target.rpc = { method, code: code ?? 'UNAVAILABLE', durationMs: this.opts.nowMs() - startMs };
      const message = error instanceof Error ? error.message : String(error);
      const provisioning =
        rpc === 'CreateVolume' || rpc === 'DeleteVolume' || rpc === 'ControllerExpandVolume';
      throw new PluginError(
        provisioning ? provisionErrorClassOf(code) : errorClassOf(code),
        `${rpc} of ${about.volume} by ${this.driver.name}: ${message}`,
        rpc === 'NodeExpandVolume' && code === 'FAILED_PRECONDITION',
      );
    }
  }

  /** Why no RPC can go to the driver now, or undefined (VolumePlugin.unavailable). */
  unavailable(): string | undefined {
    const { driver } = this;
    const why = driver.unavailable?.();
    return why ?? (driver.transport === undefined ? this.notRegistered() : undefined);
  }

  private notRegistered(): string {
    const why = this.driver.unavailable?.();
    return why ?? `CSI driver ${this.driver.name} is not registered; start it, vole retries`;
  }

  stages(): boolean {
    return this.driver.caps.stageUnstage;
  }
}

/** A VolumePlugin for one CSI driver. */
export function csiPlugin(driver: CsiDriverHandle, opts: CsiPluginOptions): VolumePlugin {
  const client = new CsiClient(driver, opts);
  return {
    name: driver.name,
    caps: csiPluginCaps(driver.name, driver.caps),
    pod: podOps(client),
    attacher: attacherOps(client),
    deviceMounter: deviceMounterOps(client),
    blockMapper: blockMapperOps(client),
    ...(driver.caps.expand ? { expander: expanderOps(client) } : {}),
    unavailable: () => client.unavailable(),
    ...(driver.caps.createDelete === true ? { provisioner: provisionerOps(client) } : {}),
  };
}

/** The node_id ControllerPublish/Unpublish name `node` by: its driver's NodeGetInfo answer. */
function nodeIdFor(client: CsiClient, node: string): string {
  const { nodeIdOf } = client.opts;
  if (nodeIdOf === undefined) return client.driver.nodeId;
  const nodeId = nodeIdOf(client.driver.name, node);
  if (nodeId === undefined)
    throw new PluginError(
      'final',
      `node ${node} has not registered CSI driver ${client.driver.name} (no node ID for it in the Node's ` +
        `csi.volume.kubernetes.io/nodeid annotation): run the driver on that node; vole retries`,
    );
  return nodeId;
}

/**
 * attach → ControllerPublishVolume; its publish_context becomes the devicePath. Every CSI
 * driver has the ops, as every one has Kubernetes' csiAttacher: in Kubernetes mode a
 * volume needs attaching unless its CSIDriver says `attachRequired: false`, whatever the
 * driver's capabilities, and the node then waits for it (WaitForAttach). A driver without
 * PUBLISH_UNPUBLISH_VOLUME has nothing to publish: vole does not attach its volumes itself
 * (the resolver keeps them not attachable in kubelet attach mode), and detach is a no-op.
 */
function attacherOps(client: CsiClient): AttacherOps {
  const publishes = client.driver.caps.publishUnpublish;
  return {
    async attach(spec, target) {
      if (!publishes)
        throw new PluginError(
          'final',
          `CSI driver ${client.driver.name} has no PUBLISH_UNPUBLISH_VOLUME: ` +
            "Kubernetes' external-attacher attaches its volumes, not the node",
        );
      const response = await client.rpc<{ publish_context: Record<string, string> }>(
        'ControllerPublishVolume',
        {
          volume_id: volumeIdOf(spec, null),
          node_id: nodeIdFor(client, target.node),
          volume_capability: volumeCapabilityOf(spec, client.driver.caps),
          readonly: spec.traits.readOnly,
          volume_context: volumeContextOf(spec, null),
        },
        spec,
        target,
      );
      return encodePublishContext(response.publish_context ?? {});
    },
    // docs/csi.md: no RPC; the attachment's publish_context is what there is to wait for.
    waitForAttach: async (_spec, devicePath) => devicePath,
    volumesAreAttached: async (specs) => new Map(specs.map((s) => [s.volume, true])),
    async detach(spec, target) {
      if (!publishes) return;
      await client.rpc(
        'ControllerUnpublishVolume',
        { volume_id: volumeIdOf(spec, null), node_id: nodeIdFor(client, target.node) },
        spec,
        target,
      );
    },
  };
}

/**
 * mountDevice → NodeStageVolume, unmountDevice → NodeUnstageVolume: no-ops for a driver
 * without STAGE_UNSTAGE_VOLUME.
 */
function deviceMounterOps(client: CsiClient): DeviceMounterOps {
  const { host } = client.opts;
  return {
    deviceMountPath: (spec) => stagingPathOf(client, spec),
    async mountDevice(spec, devicePath, deviceMountPath, target) {
      if (!client.stages()) return;
      await host.makeDir(deviceMountPath);
      const request = stageRequest(client, spec, devicePath, deviceMountPath);
      await client.rpc('NodeStageVolume', request, spec, target);
    },
    async unmountDevice(spec, deviceMountPath, target) {
      if (client.stages()) {
        const request = { volume_id: volumeIdOf(spec, null), staging_target_path: deviceMountPath };
        await client.rpc('NodeUnstageVolume', request, spec, target);
      }
      await host.removeDir(deviceMountPath);
    },
    deviceMountRefs: (deviceMountPath) => host.mountRefs(deviceMountPath),
  };
}

function stagingPathOf(client: CsiClient, spec: ResolvedVolume): string {
  return csiStagingPath(client.opts.root, client.driver.name, csiSourceOf(spec).volumeHandle);
}

function stageRequest(
  client: CsiClient,
  spec: ResolvedVolume,
  devicePath: string,
  stagingTargetPath: string,
): object {
  return {
    volume_id: volumeIdOf(spec, null),
    publish_context: decodePublishContext(devicePath),
    staging_target_path: stagingTargetPath,
    volume_capability: volumeCapabilityOf(spec, client.driver.caps),
    volume_context: volumeContextOf(spec, null),
  };
}

function publishRequest(
  client: CsiClient,
  spec: ResolvedVolume,
  paths: { devicePath: string; stagingTargetPath: string; targetPath: string; podUid: string },
): object {
  const inline = csiSourceOf(spec).inline;
  return {
    volume_id: volumeIdOf(spec, inline ? paths.podUid : null),
    publish_context: decodePublishContext(paths.devicePath),
    staging_target_path: client.stages() && !inline ? paths.stagingTargetPath : '',
    target_path: paths.targetPath,
    volume_capability: volumeCapabilityOf(spec, client.driver.caps),
    readonly: spec.traits.readOnly,
    volume_context: volumeContextOf(spec, paths.podUid),
  };
}

/**
 * setUp → NodePublishVolume, tearDown → NodeUnpublishVolume:
 * vole makes the target's parent, the driver the target. */
function podOps(client: CsiClient): PodVolumeOps {
  const { root, host } = client.opts;
  const targetOf = (spec: ResolvedVolume, uid: string) =>
    csiPublishPath(root, uid, spec.outerVolumeSpecName);
  return {
    podVolumePath: (spec, uid) => targetOf(spec, uid),
    async setUp(spec, setUpOpts, target) {
      const podUid = target.pod!;
      const targetPath = targetOf(spec, podUid);
      const stagingTargetPath = setUpOpts.deviceMountPath || stagingPathOf(client, spec);
      await host.makeDir(dirname(targetPath));
      const request = publishRequest(client, spec, {
        devicePath: setUpOpts.devicePath,
        stagingTargetPath,
        targetPath,
        podUid,
      });
      await client.rpc('NodePublishVolume', request, spec, target);
    },
    async tearDown(spec, target) {
      const podUid = target.pod!;
      const targetPath = targetOf(spec, podUid);
      const inline = csiSourceOf(spec).inline;
      const volumeId = volumeIdOf(spec, inline ? podUid : null);
      const request = { volume_id: volumeId, target_path: targetPath };
      await client.rpc('NodeUnpublishVolume', request, spec, target);
      await host.removeDir(targetPath);
      await host.removeDir(dirname(targetPath));
    },
  };
}

/** NodeExpandVolume (EXPAND_VOLUME); FAILED_PRECONDITION is the in-use expansion error. */
function expanderOps(client: CsiClient): ExpanderOps {
  return {
    async nodeExpand(spec, expandOpts, target) {
      const stagingTargetPath = client.stages() ? expandOpts.deviceMountPath : '';
      const response = await client.rpc<{ capacity_bytes: string }>(
        'NodeExpandVolume',
        {
          volume_id: volumeIdOf(spec, null),
          volume_path: expandOpts.deviceMountPath,
          capacity_range: { required_bytes: String(expandOpts.newSizeBytes), limit_bytes: '0' },
          staging_target_path: stagingTargetPath,
          volume_capability: volumeCapabilityOf(spec, client.driver.caps),
        },
        spec,
        target,
      );
      const capacityBytes = Number(response.capacity_bytes ?? 0);
      return capacityBytes > 0 ? capacityBytes : expandOpts.newSizeBytes;
    },
  };
}

/**
 * Block (docs/csi.md): NodeStageVolume at the block staging path, NodePublishVolume to a file
 * under `volumeDevices/publish/<pv>/<podUID>`, which vole then binds onto the pod's
 * device path; back in the reverse order.
 */
function blockMapperOps(client: CsiClient): BlockMapperOps {
  const { root, host } = client.opts;
  const pvOf = (spec: ResolvedVolume) => spec.innerVolumeSpecName;
  return {
    globalMapPath: (spec) => csiBlockStagingPath(root, pvOf(spec)),
    podDevicePath: (spec, uid) => csiPodDevicePath(root, uid, pvOf(spec)),
    async setUpDevice(spec, devicePath, globalMapPath, target) {
      if (!client.stages()) return;
      await host.makeDir(globalMapPath);
      const request = stageRequest(client, spec, devicePath, globalMapPath);
      await client.rpc('NodeStageVolume', request, spec, target);
    },
    async mapPodDevice(spec, devicePath, globalMapPath, target) {
      const podUid = target.pod!;
      const targetPath = csiBlockPublishPath(root, pvOf(spec), podUid);
      await host.makeDir(dirname(targetPath));
      const request = publishRequest(client, spec, {
        devicePath,
        stagingTargetPath: globalMapPath,
        targetPath,
        podUid,
      });
      await client.rpc('NodePublishVolume', request, spec, target);
      await host.bindDevice(targetPath, csiPodDevicePath(root, podUid, pvOf(spec)));
    },
    async unmapPodDevice(spec, target) {
      const podUid = target.pod!;
      const targetPath = csiBlockPublishPath(root, pvOf(spec), podUid);
      await host.unbindDevice(csiPodDevicePath(root, podUid, pvOf(spec)));
      const request = { volume_id: volumeIdOf(spec, null), target_path: targetPath };
      await client.rpc('NodeUnpublishVolume', request, spec, target);
      await host.removeDir(targetPath);
    },
    async tearDownDevice(spec, globalMapPath, target) {
      if (client.stages()) {
        const request = { volume_id: volumeIdOf(spec, null), staging_target_path: globalMapPath };
        await client.rpc('NodeUnstageVolume', request, spec, target);
      }
      await host.removeDir(globalMapPath);
    },
    deviceMapRefs: (spec) => host.listDir(csiBlockPublishDir(root, pvOf(spec))),
  };
}

/** The capability of each access mode a provisioned volume is asked for (external-provisioner). */
function provisionCapabilities(
  v: { accessModes: readonly string[]; volumeMode: 'Filesystem' | 'Block'; fsType: string },
  caps: CsiDriverCaps,
): VolumeCapability[] {
  const modes = v.accessModes.length === 0 ? ['ReadWriteOnce'] : v.accessModes;
  return modes.map((mode) => {
    const access_mode = { mode: accessModeOf([mode], caps) };
    return v.volumeMode === 'Block'
      ? { block: {}, access_mode }
      : { mount: { fs_type: v.fsType, mount_flags: [] }, access_mode };
  });
}

/** Topology segments as the spec's Topology messages. */
const topologies = (segments: readonly Record<string, string>[]) =>
  segments.map((s) => ({ segments: { ...s } }));

/** CreateVolume, DeleteVolume, ControllerExpandVolume (CREATE_DELETE_VOLUME, EXPAND_VOLUME). */
function provisionerOps(client: CsiClient): ProvisionerOps {
  const caps = client.driver.caps;
  return {
    async createVolume(request, target) {
      const volume = `kubernetes.io/csi/${client.driver.name}^${request.name}`;
      const response = await client.rpcAbout<CreateVolumeResponse>(
        'CreateVolume',
        {
          name: request.name,
          capacity_range: { required_bytes: String(request.requiredBytes), limit_bytes: '0' },
          volume_capabilities: provisionCapabilities(request, caps),
          parameters: { ...request.parameters },
          ...(request.requisite.length === 0
            ? {}
            : {
                accessibility_requirements: {
                  requisite: topologies(request.requisite),
                  preferred: topologies(request.requisite),
                },
              }),
        },
        { volume, handle: request.name },
        target,
      );
      const created = response.volume;
      if (created === null || created === undefined || created.volume_id === '')
        throw new PluginError('final', `CreateVolume of ${request.name}: no volume_id answered`);
      return {
        volumeId: created.volume_id,
        capacityBytes: Number(created.capacity_bytes ?? 0),
        volumeContext: { ...(created.volume_context ?? {}) },
        accessibleTopology: (created.accessible_topology ?? []).map((t) => ({ ...t.segments })),
      };
    },
    async deleteVolume(v, target) {
      await client.rpcAbout(
        'DeleteVolume',
        { volume_id: v.volumeHandle },
        { volume: v.volume, handle: v.volumeHandle },
        target,
      );
    },
    ...(caps.controllerExpand === true
      ? {
          async controllerExpand(v, target) {
            const [capability] = provisionCapabilities(v, caps);
            const response = await client.rpcAbout<ControllerExpandVolumeResponse>(
              'ControllerExpandVolume',
              {
                volume_id: v.volumeHandle,
                capacity_range: { required_bytes: String(v.sizeBytes), limit_bytes: '0' },
                volume_capability: capability,
              },
              { volume: v.volume, handle: v.volumeHandle },
              target,
            );
            const capacityBytes = Number(response.capacity_bytes ?? 0);
            return {
              capacityBytes: capacityBytes > 0 ? capacityBytes : v.sizeBytes,
              nodeExpansionRequired: response.node_expansion_required !== false,
            };
          },
        }
      : {}),
  };
}
