/**
 * The CSI v1 (spec v1.12.0, the whole csi.proto) and plugin-registration services, loaded
 * from the project's own `.proto` files with @grpc/proto-loader, and the TypeScript shapes of the messages vole uses.
 * Loader options follow docs/csi.md: field names as in the spec (`keepCase`), 64-bit integers
 * as decimal strings, enums by name, defaults filled in, oneofs named.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** The `.proto` next to this module, or in the source tree when running from dist/. */
function protoPath(file: string): string {
  const candidates = [
    new URL(`./${file}`, import.meta.url),
    new URL(`../../../src/csi/${file}`, import.meta.url),
  ];
  for (const url of candidates) {
    const path = fileURLToPath(url);
    if (existsSync(path)) return path;
  }
  throw new Error(`cannot find ${file} next to ${fileURLToPath(import.meta.url)}; reinstall vole`);
}

const loaderOptions: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

type ServiceCtor = grpc.ServiceClientConstructor;

export interface CsiServices {
  readonly Identity: ServiceCtor;
  readonly Controller: ServiceCtor;
  readonly Node: ServiceCtor;
}

let csiLoaded: CsiServices | undefined;
let registrationLoaded: ServiceCtor | undefined;

/** The csi.v1 services (loaded once). */
export function csiServices(): CsiServices {
  if (csiLoaded !== undefined) return csiLoaded;
  const definition = protoLoader.loadSync(protoPath('csi.proto'), loaderOptions);
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    csi: { v1: CsiServices };
  };
  csiLoaded = pkg.csi.v1;
  return csiLoaded;
}

/** pluginregistration.Registration (loaded once). */
export function registrationService(): ServiceCtor {
  if (registrationLoaded !== undefined) return registrationLoaded;
  const definition = protoLoader.loadSync(protoPath('registration.proto'), loaderOptions);
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    pluginregistration: { Registration: ServiceCtor };
  };
  registrationLoaded = pkg.pluginregistration.Registration;
  return registrationLoaded;
}

export type CsiService = keyof CsiServices;

/** The RPCs vole calls or serves, by service. */
export const csiRpcs = {
  Identity: ['GetPluginInfo', 'GetPluginCapabilities', 'Probe'],
  Controller: [
    'CreateVolume',
    'DeleteVolume',
    'ControllerPublishVolume',
    'ControllerUnpublishVolume',
    'ValidateVolumeCapabilities',
    'ListVolumes',
    'GetCapacity',
    'ControllerGetCapabilities',
    'ControllerExpandVolume',
  ],
  Node: [
    'NodeStageVolume',
    'NodeUnstageVolume',
    'NodePublishVolume',
    'NodeUnpublishVolume',
    'NodeGetVolumeStats',
    'NodeExpandVolume',
    'NodeGetCapabilities',
    'NodeGetInfo',
  ],
} as const;

export type CsiRpc = (typeof csiRpcs)[CsiService][number];

/** The service an RPC belongs to. */
function serviceOf(rpc: CsiRpc): CsiService {
  for (const service of ['Identity', 'Controller', 'Node'] as const)
    if ((csiRpcs[service] as readonly string[]).includes(rpc)) return service;
  throw new Error(`unknown CSI RPC ${rpc}`);
}

/** The gRPC method path, as metrics label it (`/csi.v1.Node/NodeStageVolume`). */
export function fullMethod(rpc: CsiRpc): string {
  return `/csi.v1.${serviceOf(rpc)}/${rpc}`;
}

export type StringMap = Record<string, string>;

export type AccessModeName =
  | 'SINGLE_NODE_WRITER'
  | 'SINGLE_NODE_READER_ONLY'
  | 'MULTI_NODE_READER_ONLY'
  | 'MULTI_NODE_SINGLE_WRITER'
  | 'MULTI_NODE_MULTI_WRITER'
  | 'SINGLE_NODE_SINGLE_WRITER'
  | 'SINGLE_NODE_MULTI_WRITER';

export interface VolumeCapability {
  block?: Record<string, never> | null;
  mount?: { fs_type: string; mount_flags: string[]; volume_mount_group?: string } | null;
  access_mode: { mode: AccessModeName | 'UNKNOWN' } | null;
  /** Set by the loader (`oneofs`): which of block / mount is present. */
  access_type?: 'block' | 'mount';
}

export interface CapacityRange {
  required_bytes: string;
  limit_bytes: string;
}

export interface ServiceCapability {
  rpc?: { type: string } | null;
  service?: { type: string } | null;
  volume_expansion?: { type: string } | null;
}

/** csi.v1 Topology: a set of segments (key → value). */
export interface Topology {
  segments: StringMap;
}

/** csi.v1 Volume, as CreateVolume answers it. */
export interface CsiVolume {
  capacity_bytes: string;
  volume_id: string;
  volume_context: StringMap;
  accessible_topology?: Topology[];
}

export interface CreateVolumeResponse {
  volume: CsiVolume | null;
}

export interface ControllerExpandVolumeResponse {
  capacity_bytes: string;
  node_expansion_required: boolean;
}
