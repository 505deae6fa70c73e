/** What the disk driver's services share: request shapes, the context, capability checks. */
import type { FsType } from '../../host/fs.js';
import type { CapacityRange, StringMap, VolumeCapability } from '../proto.js';
import type { DiskDriverOptions } from './options.js';
import { invalid } from './errors.js';
import type { DriverState } from './state.js';

export const diskCsiDriverName = 'disk.csi.vole.dev';

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
};

export type Handler = (request: CsiRequest) => Promise<object>;

export interface DriverContext {
  readonly opts: DiskDriverOptions;
  readonly state: DriverState;
  /** The known volume's image (NOT_FOUND otherwise). */
  imageOf(id: string, rpc: string): Promise<string>;
  hold(rpc: string): Promise<void>;
}

/** `mount:<fsType>` or `block`: what must match between stage calls. */
export function accessTypeOf(capability: VolumeCapability | null | undefined, rpc: string): string {
  if (capability === null || capability === undefined)
    throw invalid(`${rpc}: volume_capability is required`);
  if (capability.access_type === 'block' || (capability.block !== undefined && capability.block !== null))
    return 'block';
  return `mount:${fsTypeOf(capability, rpc)}`;
}

export function fsTypeOf(capability: VolumeCapability, rpc: string): FsType {
  const fsType = capability.mount?.fs_type || 'ext4';
  if (fsType !== 'ext4' && fsType !== 'xfs')
    throw invalid(`${rpc}: fs_type "${fsType}" is not supported by ${diskCsiDriverName}; use ext4 or xfs`);
  return fsType;
}

