/** behaviour K4.13 online expansion ("volume_fs_resize"): the sizes and paths the planner read. */
import type { VolumeOperation } from '../../kubelet/planner.js';
import { type OpContext, failOperation, OperationFailed, runCall, runningOp } from '../context.js';

export async function expand(ctx: OpContext, op: VolumeOperation): Promise<void> {
  const spec = runningOp(ctx).spec;
  const expansion = op.expansion;
  if (spec === null || expansion === undefined)
    failOperation(`NodeExpandVolume failed: ${op.volume} is not in use`);
  const { oldSizeBytes, newSizeBytes } = expansion;
  if (oldSizeBytes === 0 || newSizeBytes === 0) {
    failOperation(
      'NodeExpandvolume.expansion failed: current or new size of the volume is not set',
    );
  }
  const plugin = ctx.host.plugins.find(spec.traits.pluginName);
  const expander = plugin?.expander;
  if (expander === undefined)
    failOperation(
      `NodeExpandVolume.NodeExpandVolume failed: plugin "${spec.traits.pluginName}" cannot expand`,
    );
  try {
    await runCall(
      ctx,
      {
        call: 'nodeExpand',
        prefix: 'NodeExpandVolume.NodeExpandVolume failed',
        ...(plugin && { plugin }),
        succeeded: (sizeBytes: number) => ({ sizeBytes }),
      },
      (target) => expander.nodeExpand(spec, expansion, target),
    );
  } catch (error) {
    // FailedPrecondition: recorded, never retried on this node, and the operation is done.
    if (error instanceof OperationFailed && error.error.failedPrecondition === true) return;
    throw error;
  }
}
