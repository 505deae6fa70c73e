/**
 * behaviour K4.10 MapVolume and the block halves of K4.11–4.12: a Block volume is waited for
 * (if attachable), its device set up at the global map path once, then mapped into the
 * pod's device path; unmapping runs the other way.
 */
import type { MountOperation, UnmountOperation } from '../../kubelet/planner.js';
import type { VolumePlugin } from '../../plugins/types.js';
import type { AttachmentRecord, MountRecord } from '../../kubelet/types.js';
import type { ResolvedVolume } from '../../operations/volume-spec.js';
import { type OpContext, failOperation, runCall } from '../context.js';

/** What a mount's steps pass on to the next: the devicePath and the device's mount path. */
export interface MountPaths {
  devicePath: string;
  deviceMountPath: string;
}

export function mapper(plugin: VolumePlugin | undefined, spec: ResolvedVolume, prefix: string) {
  const blockMapper = plugin?.blockMapper;
  if (blockMapper === undefined) {
    failOperation(
      `${prefix} failed for volume "${spec.volume}": plugin "${spec.traits.pluginName}" cannot map Block volumes ` +
        '(no BlockVolumeMapper); use volumeMode Filesystem or a plugin that maps block devices',
    );
  }
  return blockMapper;
}

/** behaviour K4.10 SetUpDevice: the device at the global map path, once per volume. */
export async function setUpDevice(
  ctx: OpContext,
  spec: ResolvedVolume,
  plugin: VolumePlugin,
  paths: MountPaths,
): Promise<void> {
  const blockMapper = mapper(plugin, spec, 'MapVolume.FindMapperPluginBySpec');
  const globalMapPath = blockMapper.globalMapPath(spec);
  const { devicePath } = paths;
  await runCall(
    ctx,
    {
      call: 'setUpDevice',
      prefix: 'MapVolume.SetUpDevice failed',
      plugin,
      started: { deviceMountPath: globalMapPath },
      succeeded: () => ({ deviceMountPath: globalMapPath, devicePath }),
    },
    (target) => blockMapper.setUpDevice(spec, devicePath, globalMapPath, target),
  );
  paths.deviceMountPath = globalMapPath;
}

/** behaviour K4.10 MapPodDevice: the device into the pod's device path. */
export async function mapPodDevice(
  ctx: OpContext,
  op: MountOperation,
  spec: ResolvedVolume,
  plugin: VolumePlugin,
  paths: MountPaths,
): Promise<void> {
  const blockMapper = mapper(plugin, spec, 'MapVolume.FindMapperPluginBySpec');
  const globalMapPath = blockMapper.globalMapPath(spec);
  const { devicePath } = paths;
  await runCall(
    ctx,
    { call: 'mapPodDevice', prefix: 'MapVolume.MapPodDevice failed', pod: op.pod, plugin },
    (target) => blockMapper.mapPodDevice(spec, devicePath, globalMapPath, target),
  );
}

export async function unmap(
  ctx: OpContext,
  op: UnmountOperation,
  record: MountRecord,
  plugin: VolumePlugin | undefined,
): Promise<void> {
  const blockMapper = mapper(plugin, record.spec, 'UnmapVolume.FindMapperPluginByName');
  await runCall(
    ctx,
    {
      call: 'unmapPodDevice',
      prefix: 'UnmapVolume.UnmapPodDevice failed',
      pod: op.pod,
      ...(plugin === undefined ? {} : { plugin }),
    },
    (target) => blockMapper.unmapPodDevice(record.spec, target),
  );
}

export async function tearDownDevice(
  ctx: OpContext,
  attachment: AttachmentRecord,
  plugin: VolumePlugin | undefined,
): Promise<void> {
  const blockMapper = mapper(plugin, attachment.spec, 'UnmapDevice.FindMapperPluginByName');
  const globalMapPath =
    attachment.context.deviceMountPath || blockMapper.globalMapPath(attachment.spec);
  // behaviour K4.12 block step 1: pods still mapping the device keep it; no state change.
  const refs = await blockMapper.deviceMapRefs(attachment.spec, globalMapPath);
  if (refs.length > 0) {
    failOperation(
      `UnmapDevice failed for volume "${attachment.volume}": the device "${globalMapPath}" is still ` +
        `referenced from other Pods [${refs.join(' ')}]`,
      'transient',
    );
  }
  await runCall(
    ctx,
    {
      call: 'tearDownDevice',
      prefix: 'UnmapDevice.TearDownDevice failed',
      ...(plugin === undefined ? {} : { plugin }),
    },
    (target) => blockMapper.tearDownDevice(attachment.spec, globalMapPath, target),
  );
}
