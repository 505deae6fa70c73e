/** spec §4.3 AttachVolume (kubelet attach mode) and §4.6 VerifyControllerAttachedVolume. */
import type { VolumeOperation } from '../../plan/index.js';
import { type OpContext, failOperation, runCall, runningOp } from '../context.js';

export async function attach(ctx: OpContext): Promise<void> {
  const spec = runningOp(ctx).spec;
  if (spec === null)
    failOperation(
      `AttachVolume.FindAttachablePluginBySpec failed: ${ctx.op.volume} is no longer desired`,
    );
  const plugin = ctx.host.plugins.find(spec.pluginName);
  if (plugin?.attacher === undefined) {
    failOperation(
      `AttachVolume.FindAttachablePluginBySpec failed for volume "${ctx.op.volume}": ` +
        `no attachable plugin "${spec.pluginName}" is registered; register it or remove the volume`,
    );
  }
  const attacher = plugin.attacher;
  const limit = volumeLimitReached(ctx, spec.pluginName);
  if (limit !== undefined) failOperation(limit, 'transient');
  await runCall(
    ctx,
    {
      call: 'attach',
      prefix: 'AttachVolume.Attach failed',
      succeeded: (devicePath: string) => ({ devicePath }),
    },
    (target) => attacher.attach(spec, target),
  );
}

/**
 * CSI.md: NodeGetInfo's max_volumes_per_node caps how many of a driver's volumes may be
 * attached to this node (the capability recorded in the log). A volume past it is not
 * attached; the error says why, and the attach is retried with backoff, so it goes on once
 * another of the driver's volumes is detached.
 */
function volumeLimitReached(ctx: OpContext, pluginName: string): string | undefined {
  const world = ctx.host.world();
  const limit = world.plugins.get(pluginName)?.csi?.maxVolumesPerNode ?? 0;
  if (limit === 0) return undefined;
  let attachedCount = 0;
  for (const attachment of world.attachments.values()) {
    if (attachment.spec.pluginName !== pluginName || attachment.volume === ctx.op.volume) continue;
    if (attachment.value !== 'detached') attachedCount++;
  }
  if (attachedCount < limit) return undefined;
  return (
    `AttachVolume.Attach failed for volume "${ctx.op.volume}": node ${world.config.node} has ` +
    `${attachedCount} volume(s) of CSI driver ${pluginName} attached, its limit ` +
    `(max_volumes_per_node ${limit}); detach one or schedule the pod elsewhere`
  );
}

/**
 * Non-attachable volumes are "attached" at once; attachable ones when the controller
 * lists them in node.status.volumesAttached (the planner only plans it then, and gives
 * the devicePath listed there).
 */
export async function verifyControllerAttached(ctx: OpContext, op: VolumeOperation): Promise<void> {
  const devicePath = op.devicePath;
  await runCall(
    ctx,
    {
      call: 'verifyControllerAttached',
      prefix: 'VerifyControllerAttachedVolume failed',
      succeeded: (path: string) => ({ devicePath: path }),
    },
    async () => {
      if (devicePath === undefined) throw new Error('Volume not attached according to node status');
      return devicePath;
    },
  );
}
