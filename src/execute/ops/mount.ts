/**
 * spec §4.7 MountVolume (filesystem): WaitForAttach when attachable, MountDevice unless
 * the device is already globally mounted, then SetUp — one operation, several calls.
 */
import type { MountOperation } from '../../plan/index.js';
import type { VolumePlugin } from '../../plugins/types.js';
import type { ResolvedVolume } from '../../world/types.js';
import { type OpContext, failOperation, runCall, runningOp } from '../context.js';
import { map } from './map.js';
import { waitForAttachStep } from './wait-for-attach.js';

function rwopConflict(ctx: OpContext, op: MountOperation): boolean {
  const spec = runningOp(ctx).spec;
  if (spec === null || spec.accessModes.length !== 1 || spec.accessModes[0] !== 'ReadWriteOncePod')
    return false;
  const others = ctx.host.world().mounts.get(op.volume);
  return [...(others?.keys() ?? [])].some((pod) => pod !== op.pod);
}

export async function mount(ctx: OpContext, op: MountOperation): Promise<void> {
  const spec = runningOp(ctx).spec;
  if (spec === null)
    failOperation(
      `MountVolume.FindPluginBySpec failed: ${op.volume} is no longer desired by pod ${op.pod}`,
    );
  const plugin = ctx.host.plugins.find(spec.pluginName);
  if (plugin === undefined) {
    failOperation(
      `MountVolume.FindPluginBySpec failed for volume "${spec.outerVolumeSpecName}" ` +
        `(UniqueName: "${op.volume}"): no plugin "${spec.pluginName}" is registered`,
    );
  }
  if (rwopConflict(ctx, op)) {
    failOperation(
      'MountVolume.SetUp failed: volume uses the ReadWriteOncePod access mode and is ' +
        'already in use by another pod',
    );
  }
  if (spec.volumeMode === 'Block') return map(ctx, op, spec, plugin);
  const world = () => ctx.host.world();
  const devicePath = await waitForAttachStep(
    ctx,
    op,
    spec,
    plugin,
    'MountVolume.WaitForAttach failed',
  );
  const deviceMounter = spec.deviceMountable ? plugin.deviceMounter : undefined;
  const deviceState = world().attachments.get(op.volume)?.state.value;
  if (deviceMounter !== undefined && deviceState !== 'attached.deviceMounted') {
    const deviceMountPath = deviceMounter.deviceMountPath(spec);
    const path = devicePath;
    await runCall(
      ctx,
      {
        call: 'mountDevice',
        prefix: 'MountVolume.MountDevice failed',
        started: { deviceMountPath },
        succeeded: () => ({ deviceMountPath, devicePath: path }),
      },
      (target) => deviceMounter.mountDevice(spec, path, deviceMountPath, target),
    );
  }
  const deviceMountPath = world().attachments.get(op.volume)?.state.context.deviceMountPath ?? '';
  const fsGroup = world().pods.get(op.pod)?.pod.spec.securityContext?.fsGroup ?? null;
  await runCall(ctx, { call: 'setUp', prefix: 'MountVolume.SetUp failed', pod: op.pod }, (target) =>
    plugin.pod.setUp(spec, { devicePath, deviceMountPath, fsGroup }, target),
  );
  await expandDuringMount(ctx, spec, plugin, { devicePath, deviceMountPath });
}

/**
 * spec §4.7 step 12, §4.13 "Expansion during mount": a PV-backed volume whose claim's
 * status capacity is below the PV's is expanded before the mount counts; a failure leaves
 * the pod's mount uncertain (the fold does it) and fails the operation, to be retried.
 */
async function expandDuringMount(
  ctx: OpContext,
  spec: ResolvedVolume,
  plugin: VolumePlugin,
  paths: { devicePath: string; deviceMountPath: string },
): Promise<void> {
  const expander = plugin.expander;
  const current = ctx.host.world().attachments.get(spec.volume)?.state.context;
  if (expander === undefined || !plugin.caps.nodeExpandable || !plugin.caps.requiresFSResize)
    return;
  if (spec.source.kind === 'csi' && spec.source.inline) return;
  if (spec.claimSizeBytes === 0 || spec.sizeBytes <= spec.claimSizeBytes) return;
  if (current === undefined || current.inUseExpansionError || current.sizeBytes >= spec.sizeBytes)
    return;
  const oldSizeBytes = current.sizeBytes || spec.claimSizeBytes;
  await runCall(
    ctx,
    {
      call: 'nodeExpand',
      prefix: 'MountVolume.Setup failed while expanding volume',
      succeeded: (sizeBytes: number) => ({ sizeBytes }),
    },
    (target) =>
      expander.nodeExpand(spec, { ...paths, newSizeBytes: spec.sizeBytes, oldSizeBytes }, target),
  );
}
