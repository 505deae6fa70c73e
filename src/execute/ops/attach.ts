/** behaviour K4.3 AttachVolume (kubelet attach mode) and K4.6 VerifyControllerAttachedVolume. */
import type { VolumeOperation } from '../../kubelet/planner.js';
import { type OpContext, failOperation, runCall, runningOp } from '../context.js';

export async function attach(ctx: OpContext, op: VolumeOperation): Promise<void> {
  const spec = runningOp(ctx).spec;
  if (spec === null)
    failOperation(
      `AttachVolume.FindAttachablePluginBySpec failed: ${ctx.op.volume} is no longer desired`,
    );
  const plugin = ctx.host.plugins.find(spec.traits.pluginName);
  if (plugin?.attacher === undefined) {
    failOperation(
      `AttachVolume.FindAttachablePluginBySpec failed for volume "${ctx.op.volume}": ` +
        `no attachable plugin "${spec.traits.pluginName}" is registered; register it or remove the volume`,
    );
  }
  const attacher = plugin.attacher;
  // The planner refused the call (max_volumes_per_node): fail at once, retried with backoff.
  if (op.refused !== undefined) failOperation(op.refused, 'transient');
  await runCall(
    ctx,
    {
      call: 'attach',
      prefix: 'AttachVolume.Attach failed',
      plugin,
      succeeded: (devicePath: string) => ({ devicePath }),
    },
    (target) => attacher.attach(spec, target),
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
      // It reads node.status.volumesAttached as the world holds it: nothing on the host.
      local: true,
      succeeded: (path: string) => ({ devicePath: path }),
    },
    async () => {
      if (devicePath === undefined) throw new Error('Volume not attached according to node status');
      return devicePath;
    },
  );
}
