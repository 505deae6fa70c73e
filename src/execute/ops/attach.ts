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
 * A fresh read of the node's status.volumesAttached, where the controller writes it: the
 * devicePath listed for `volume` now, undefined when it is not listed. Kubernetes'
 * GenerateVerifyControllerAttachedVolumeFunc GETs the Node for this, not its informer's
 * copy: the controller writes volumesAttached without a volume before it reads
 * volumesInUse to detach it, so a kubelet whose in-use report landed after that read
 * finds the volume gone here and mounts nothing.
 */
export type ControllerAttachedCheck = (volume: string) => Promise<string | undefined>;

/**
 * Non-attachable volumes are "attached" at once; attachable ones when the controller
 * lists them in node.status.volumesAttached (the planner only plans it then, and gives
 * the devicePath listed there), read again fresh when the mode gives `attachedNow`.
 */
export async function verifyControllerAttached(
  ctx: OpContext,
  op: VolumeOperation,
  attachedNow?: ControllerAttachedCheck,
): Promise<void> {
  let devicePath = op.devicePath;
  const attachable = runningOp(ctx).spec?.traits.attachable === true;
  if (attachable && devicePath !== undefined && attachedNow !== undefined) {
    try {
      devicePath = await attachedNow(op.volume);
    } catch (error) {
      failOperation(
        `VerifyControllerAttachedVolume failed fetching the node for volume "${op.volume}": ${(error as Error).message}; retried`,
        'transient',
      );
    }
    if (devicePath === undefined)
      failOperation(
        `VerifyControllerAttachedVolume failed for volume "${op.volume}": the node's status.volumesAttached no longer lists it; retried`,
        'transient',
      );
  }
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
