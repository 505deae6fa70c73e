/** spec §4.13 online expansion ("volume_fs_resize"). */
import { type OpContext, failOperation, OperationFailed, runCall } from '../context.js';

export async function expand(ctx: OpContext): Promise<void> {
  const world = ctx.host.world();
  const attachment = world.attachments.get(ctx.op.volume);
  const desired = world.dsw.get(ctx.op.volume)?.pods.values().next().value?.resolved;
  if (attachment === undefined || desired === undefined)
    failOperation(`NodeExpandVolume failed: ${ctx.op.volume} is not in use`);
  const oldSizeBytes = attachment.state.context.sizeBytes;
  const newSizeBytes = desired.sizeBytes;
  if (oldSizeBytes === 0 || newSizeBytes === 0) {
    failOperation(
      'NodeExpandvolume.expansion failed: current or new size of the volume is not set',
    );
  }
  const expander = ctx.host.plugins.find(attachment.pluginName)?.expander;
  if (expander === undefined)
    failOperation(
      `NodeExpandVolume.NodeExpandVolume failed: plugin "${attachment.pluginName}" cannot expand`,
    );
  const { devicePath, deviceMountPath } = attachment.state.context;
  try {
    await runCall(
      ctx,
      {
        call: 'nodeExpand',
        prefix: 'NodeExpandVolume.NodeExpandVolume failed',
        succeeded: (sizeBytes: number) => ({ sizeBytes }),
      },
      (target) =>
        expander.nodeExpand(
          desired,
          { devicePath, deviceMountPath, newSizeBytes, oldSizeBytes },
          target,
        ),
    );
  } catch (error) {
    // FailedPrecondition: recorded, never retried on this node, and the operation is done.
    if (error instanceof OperationFailed && error.error.failedPrecondition === true) return;
    throw error;
  }
}
