/**
 * Volume plugin interfaces: seed 001's VolumePlugin, Attacher/Detacher, DeviceMounter/
 * DeviceUnmounter, Mounter/Unmounter and NodeExpandable in TypeScript form.
 *
 * Every call may throw a PluginError whose kind is one of Kubernetes' three classes
 * (behaviour K0.5); anything else thrown counts as final. Every call must be idempotent: the engine
 * retries after uncertain outcomes and crashes.
 */
import type { ErrorKind } from '../../machines/index.js';
import type {
  PluginCaps,
  ProvisionedVolume,
  ProvisionRequest,
  RpcRecord,
} from '../events/index.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';

/** What a plugin call knows about where it runs. */
export interface CallTarget {
  /** The node the call acts on; '' for a call on none (a provisioner's CreateVolume). */
  readonly node: string;
  /** The pod UID for pod-level calls (setUp, tearDown), else null. */
  readonly pod: string | null;
  readonly signal: AbortSignal;
  /**
   * A plugin that speaks gRPC (CSI) sets this to the RPC the call made (the last one, when
   * it made several), so the call's outcome event carries it for metrics.
   */
  rpc?: RpcRecord;
}

export interface SetUpOptions {
  readonly devicePath: string;
  readonly deviceMountPath: string;
  readonly fsGroup: number | null;
  /**
   * The one user all the pod's containers run as (FsUserFrom), null when none or several:
   * the owner the kubelet gives service-account token files. Absent: null.
   */
  readonly fsUser?: number | null;
}

/** Mounter + Unmounter: the pod-level half every plugin has (behaviour K4.7 step 11, K4.11). */
export interface PodVolumeOps {
  /** The pod's directory for this volume (`<root>/pods/<uid>/volumes/<plugin>/<name>`). */
  podVolumePath(spec: ResolvedVolume, podUid: string): string;
  setUp(spec: ResolvedVolume, opts: SetUpOptions, target: CallTarget): Promise<void>;
  tearDown(spec: ResolvedVolume, target: CallTarget): Promise<void>;
  /** Is anything of this pod volume on the host? (restart cross-check; optional) */
  isSetUp?(spec: ResolvedVolume, podUid: string): Promise<boolean>;
}

/** Attacher + Detacher (behaviour K4.3, K4.5, K4.7 step 7). */
export interface AttacherOps {
  /** Returns the devicePath where the volume appears on the node. */
  attach(spec: ResolvedVolume, target: CallTarget): Promise<string>;
  /** Blocks until the device is there; returns its path. */
  waitForAttach(spec: ResolvedVolume, devicePath: string, target: CallTarget): Promise<string>;
  volumesAreAttached(
    specs: readonly ResolvedVolume[],
    target: CallTarget,
  ): Promise<Map<string, boolean>>;
  detach(spec: ResolvedVolume, target: CallTarget): Promise<void>;
  /** Is the volume attached to this node? (restart cross-check; optional) */
  isAttached?(spec: ResolvedVolume): Promise<boolean>;
}

/** DeviceMounter + DeviceUnmounter (behaviour K4.7 steps 8–9, K4.12). */
export interface DeviceMounterOps {
  deviceMountPath(spec: ResolvedVolume): string;
  mountDevice(
    spec: ResolvedVolume,
    devicePath: string,
    deviceMountPath: string,
    target: CallTarget,
  ): Promise<void>;
  unmountDevice(spec: ResolvedVolume, deviceMountPath: string, target: CallTarget): Promise<void>;
  /** Other mounts of the device (pods' bind mounts): UnmountDevice waits while any remain. */
  deviceMountRefs(deviceMountPath: string): Promise<string[]>;
  /** Is the device mounted at its global path? (restart cross-check; optional) */
  isDeviceMounted?(spec: ResolvedVolume, deviceMountPath: string): Promise<boolean>;
}

/**
 * BlockVolumeMapper / BlockVolumeUnmapper (behaviour K4.10, K4.11–4.12 block): a Block volume
 * is mapped, not mounted — the device is set up at a global map path once per node, then
 * mapped into each pod's device path.
 */
export interface BlockMapperOps {
  globalMapPath(spec: ResolvedVolume): string;
  podDevicePath(spec: ResolvedVolume, podUid: string): string;
  setUpDevice(
    spec: ResolvedVolume,
    devicePath: string,
    globalMapPath: string,
    target: CallTarget,
  ): Promise<void>;
  mapPodDevice(
    spec: ResolvedVolume,
    devicePath: string,
    globalMapPath: string,
    target: CallTarget,
  ): Promise<void>;
  unmapPodDevice(spec: ResolvedVolume, target: CallTarget): Promise<void>;
  tearDownDevice(spec: ResolvedVolume, globalMapPath: string, target: CallTarget): Promise<void>;
  /** Pods' mappings of the device still present: the device is not torn down while any is. */
  deviceMapRefs(spec: ResolvedVolume, globalMapPath: string): Promise<string[]>;
}

/** NodeExpandableVolumePlugin (behaviour K4.13). Returns the new size in bytes. */
export interface ExpanderOps {
  nodeExpand(
    spec: ResolvedVolume,
    opts: {
      devicePath: string;
      deviceMountPath: string;
      newSizeBytes: number;
      oldSizeBytes: number;
    },
    target: CallTarget,
  ): Promise<number>;
}

/**
 * A provisioner's calls (a CSI driver's controller with CREATE_DELETE_VOLUME, and
 * EXPAND_VOLUME for ControllerExpandVolume). `volume` names the unique volume the call is
 * about (for the journal and the driver's per-volume faults).
 */
export interface ProvisionerOps {
  createVolume(request: ProvisionRequest, target: CallTarget): Promise<ProvisionedVolume>;
  deleteVolume(
    v: { readonly volume: string; readonly volumeHandle: string },
    target: CallTarget,
  ): Promise<void>;
  /** undefined when the driver has no controller expansion (the resizer skips the call). */
  controllerExpand?(
    v: {
      readonly volume: string;
      readonly volumeHandle: string;
      readonly sizeBytes: number;
      readonly accessModes: readonly string[];
      readonly volumeMode: 'Filesystem' | 'Block';
      readonly fsType: string;
    },
    target: CallTarget,
  ): Promise<{ capacityBytes: number; nodeExpansionRequired: boolean }>;
}

export interface VolumePlugin {
  readonly name: string;
  /** What it can do; recorded in EngineStarted so replays resolve pods the same way. */
  readonly caps: PluginCaps;
  readonly pod: PodVolumeOps;
  readonly attacher?: AttacherOps;
  readonly deviceMounter?: DeviceMounterOps;
  readonly expander?: ExpanderOps;
  readonly blockMapper?: BlockMapperOps;
  /**
   * Why no call can reach the plugin now (a CSI driver that is not registered, or whose
   * endpoint socket is gone), else undefined. The executor asks before recording a call:
   * an unreachable plugin fails the operation as one where nothing happened, with no call
   * recorded. Absent: always reachable (built-in plugins).
   */
  unavailable?(): string | undefined;
  readonly provisioner?: ProvisionerOps;
}

export type AttachableVolumePlugin = VolumePlugin & { readonly attacher: AttacherOps };
export type DeviceMountableVolumePlugin = VolumePlugin & {
  readonly deviceMounter: DeviceMounterOps;
};

export function isAttachable(plugin: VolumePlugin): plugin is AttachableVolumePlugin {
  return plugin.attacher !== undefined;
}

export function isDeviceMountable(plugin: VolumePlugin): plugin is DeviceMountableVolumePlugin {
  return plugin.deviceMounter !== undefined;
}

/** A plugin's answer that it failed, with the class that says what the failure left. */
export class PluginError extends Error {
  override name = 'PluginError';
  constructor(
    readonly kind: ErrorKind,
    message: string,
    readonly failedPrecondition = false,
  ) {
    super(message);
  }
}

export function caps(name: string, c: Partial<Omit<PluginCaps, 'name'>> = {}): PluginCaps {
  const attachable = c.attachable ?? false;
  return {
    name,
    attachable,
    deviceMountable: c.deviceMountable ?? attachable,
    blockMappable: c.blockMappable ?? false,
    nodeExpandable: c.nodeExpandable ?? false,
    requiresFSResize: c.requiresFSResize ?? true,
    requiresRemount: c.requiresRemount ?? false,
  };
}
