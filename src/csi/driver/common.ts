/** What the disk driver's services share: request shapes, the context, capability checks. */
import type { FsType } from '../../host/fs.js';
import type { AccessModeName, CapacityRange, StringMap, VolumeCapability } from '../proto.js';
import type { DiskDriverOptions } from './options.js';
import { invalid } from './errors.js';
import type { DriverState } from './state.js';

export const diskCsiDriverName = 'disk.csi.vole.dev';

/**
 * The driver's topology key: a volume lives on the node whose image file holds it, so its
 * accessible topology is `{<key>: <node id>}`, and NodeGetInfo answers the same segment.
 */
export const diskTopologyKey = 'topology.disk.csi.vole.dev/node';

export interface Topology {
  segments: StringMap;
}

/** A request as the loader decodes it: the fields of the spec, by name. */
export type CsiRequest = {
  name?: string;
  volume_id?: string;
  node_id?: string;
  capacity_range?: CapacityRange | null;
  volume_capability?: VolumeCapability | null;
  volume_capabilities?: VolumeCapability[];
  volume_context?: StringMap;
  publish_context?: StringMap;
  staging_target_path?: string;
  target_path?: string;
  volume_path?: string;
  readonly?: boolean;
  parameters?: StringMap;
  accessibility_requirements?: { requisite: Topology[]; preferred: Topology[] } | null;
  accessible_topology?: Topology | null;
  volume_content_source?: object | null;
  max_entries?: number;
  starting_token?: string;
};

export type Handler = (request: CsiRequest) => Promise<object>;

export interface DriverContext {
  readonly opts: DiskDriverOptions;
  readonly state: DriverState;
  /** The known volume's image (NOT_FOUND otherwise). */
  imageOf(id: string, rpc: string): Promise<string>;
  hold(rpc: string): Promise<void>;
  /** Runs `work` once every earlier call of it ended: volume changes, one at a time. */
  serially<T>(work: () => Promise<T>): Promise<T>;
  /** The topology segments of this node: `{<diskTopologyKey>: <node id>}`. */
  readonly segments: Readonly<Record<string, string>>;
}

/** `mount:<fsType>` or `block`: what must match between stage calls. */
export function accessTypeOf(capability: VolumeCapability | null | undefined, rpc: string): string {
  if (capability === null || capability === undefined)
    throw invalid(`${rpc}: volume_capability is required`);
  if (
    capability.access_type === 'block' ||
    (capability.block !== undefined && capability.block !== null)
  )
    return 'block';
  return `mount:${fsTypeOf(capability, rpc)}`;
}

/**
 * The access modes a loop disk can give: it lives on one node, so only the single-node
 * modes (SINGLE_NODE_SINGLE_WRITER and _MULTI_WRITER need the SINGLE_NODE_MULTI_WRITER
 * capability, which this driver does not advertise).
 */
const supportedAccessModes: readonly AccessModeName[] = [
  'SINGLE_NODE_WRITER',
  'SINGLE_NODE_READER_ONLY',
];

/** Why the driver cannot give this capability, or undefined when it can. */
export function unsupportedReason(capability: VolumeCapability): string | undefined {
  const mode = capability.access_mode?.mode ?? 'UNKNOWN';
  if (!(supportedAccessModes as readonly string[]).includes(mode))
    return (
      `access mode ${mode} is not supported ` +
      `(a loop disk is on one node: ${supportedAccessModes.join(', ')})`
    );
  const block =
    capability.access_type === 'block' ||
    (capability.block !== undefined && capability.block !== null);
  const mount =
    capability.access_type === 'mount' ||
    (capability.mount !== undefined && capability.mount !== null);
  if (!block && !mount) return 'the access type (block or mount) is missing';
  if (block) return undefined;
  const fsType = capability.mount?.fs_type || 'ext4';
  if (fsType !== 'ext4' && fsType !== 'xfs')
    return `fs_type "${fsType}" is not supported (ext4 or xfs)`;
  return undefined;
}

/** Every capability must be one the driver gives (INVALID_ARGUMENT naming one that is not). */
export function checkCapabilities(
  capabilities: VolumeCapability[] | undefined,
  rpc: string,
): VolumeCapability[] {
  if (capabilities === undefined || capabilities.length === 0)
    throw invalid(`${rpc}: volume_capabilities is required`);
  for (const capability of capabilities) {
    const reason = unsupportedReason(capability);
    if (reason !== undefined) throw invalid(`${rpc}: ${diskCsiDriverName}: ${reason}`);
  }
  return capabilities;
}

export function fsTypeOf(capability: VolumeCapability, rpc: string): FsType {
  const fsType = capability.mount?.fs_type || 'ext4';
  if (fsType !== 'ext4' && fsType !== 'xfs')
    throw invalid(
      `${rpc}: fs_type "${fsType}" is not supported by ${diskCsiDriverName}; use ext4 or xfs`,
    );
  return fsType;
}
