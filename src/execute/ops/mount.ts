/**
 * behaviour K4.7 MountVolume (filesystem) and K4.10 MapVolume (Block): the steps the planner
 * chose, run in order — WaitForAttach, MountDevice or SetUpDevice, SetUp or Map, and the
 * expansion during mount. The executor reads nothing of the world to decide.
 */
import type { MountOperation, MountStep } from '../../kubelet/planner.js';
import type { VolumePlugin } from '../../plugins/types.js';
import type { ResolvedVolume } from '../../operations/volume-spec.js';
import { type OpContext, failOperation, runCall, runningOp } from '../context.js';
import { mapPodDevice, mapper, type MountPaths, setUpDevice } from './map.js';

function lacking(spec: ResolvedVolume, what: string): never {
  return failOperation(
    `MountVolume failed for volume "${spec.outerVolumeSpecName}" (UniqueName: "${spec.volume}"): ` +
      `plugin "${spec.traits.pluginName}" has no ${what}; register a plugin that has one`,
  );
}

/** behaviour K4.7 step 7 / K4.10 step 3: WaitForAttach; returns the devicePath to use. */
async function waitForAttach(
  ctx: OpContext,
  spec: ResolvedVolume,
  plugin: VolumePlugin,
  paths: MountPaths,
  prefix: string,
): Promise<void> {
  const attacher = plugin.attacher ?? lacking(spec, 'attacher');
  const given = paths.devicePath;
  paths.devicePath = await runCall(
    ctx,
    { call: 'waitForAttach', prefix, succeeded: (path: string) => ({ devicePath: path }) },
    (target) => attacher.waitForAttach(spec, given, target),
  );
}

async function mountDevice(
  ctx: OpContext,
  spec: ResolvedVolume,
  plugin: VolumePlugin,
  paths: MountPaths,
): Promise<void> {
  const deviceMounter = plugin.deviceMounter ?? lacking(spec, 'device mounter');
  const deviceMountPath = deviceMounter.deviceMountPath(spec);
  const { devicePath } = paths;
  await runCall(
    ctx,
    {
      call: 'mountDevice',
      prefix: 'MountVolume.MountDevice failed',
      plugin,
      started: { deviceMountPath },
      succeeded: () => ({ deviceMountPath, devicePath }),
    },
    (target) => deviceMounter.mountDevice(spec, devicePath, deviceMountPath, target),
  );
  paths.deviceMountPath = deviceMountPath;
}

/**
 * behaviour K4.7 step 12, K4.13 "Expansion during mount": a failure leaves the pod's mount
 * uncertain (the fold does it) and fails the operation, to be retried.
 */
async function expand(
  ctx: OpContext,
  op: MountOperation,
  spec: ResolvedVolume,
  plugin: VolumePlugin,
  paths: MountPaths,
): Promise<void> {
  const expander = plugin.expander ?? lacking(spec, 'expander');
  const sizes =
    op.expansion ?? failOperation(`mount of ${op.volume}: an expand step without sizes`);
  await runCall(
    ctx,
    {
      call: 'nodeExpand',
      prefix: 'MountVolume.Setup failed while expanding volume',
      plugin,
      succeeded: (sizeBytes: number) => ({ sizeBytes }),
    },
    (target) => expander.nodeExpand(spec, { ...paths, ...sizes }, target),
  );
}

async function runStep(
  ctx: OpContext,
  step: MountStep,
  op: MountOperation,
  spec: ResolvedVolume,
  plugin: VolumePlugin,
  paths: MountPaths,
): Promise<void> {
  const block = spec.traits.volumeMode === 'Block';
  switch (step) {
    case 'waitForAttach': {
      const prefix = block ? 'MapVolume.WaitForAttach failed' : 'MountVolume.WaitForAttach failed';
      return waitForAttach(ctx, spec, plugin, paths, prefix);
    }
    case 'mountDevice':
      return mountDevice(ctx, spec, plugin, paths);
    case 'setUp': {
      const { fsGroup, fsUser } = op;
      const given = { ...paths, fsGroup, fsUser };
      await runCall(
        ctx,
        { call: 'setUp', prefix: 'MountVolume.SetUp failed', pod: op.pod, plugin },
        (target) => plugin.pod.setUp(spec, given, target),
      );
      return;
    }
    case 'expand':
      return expand(ctx, op, spec, plugin, paths);
    case 'setUpDevice':
      return setUpDevice(ctx, spec, plugin, paths);
    case 'map':
      return mapPodDevice(ctx, op, spec, plugin, paths);
  }
}

export async function mount(ctx: OpContext, op: MountOperation): Promise<void> {
  const spec = runningOp(ctx).spec;
  if (spec === null)
    failOperation(
      `MountVolume.FindPluginBySpec failed: ${op.volume} is no longer desired by pod ${op.pod}`,
    );
  const plugin = ctx.host.plugins.find(spec.traits.pluginName);
  if (plugin === undefined) {
    failOperation(
      `MountVolume.FindPluginBySpec failed for volume "${spec.outerVolumeSpecName}" ` +
        `(UniqueName: "${op.volume}"): no plugin "${spec.traits.pluginName}" is registered`,
    );
  }
  if (op.refusal !== undefined) failOperation(op.refusal);
  if (spec.traits.volumeMode === 'Block') mapper(plugin, spec, 'MapVolume.FindMapperPluginBySpec');
  const paths: MountPaths = { devicePath: op.devicePath, deviceMountPath: op.deviceMountPath };
  for (const step of op.steps) await runStep(ctx, step, op, spec, plugin, paths);
}
