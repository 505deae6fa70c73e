/** behaviour K4.5 DetachVolume and K3.6's synchronous MarkVolumeAsDetached ("forget"). */
import { type OpContext, failOperation, runCall } from '../context.js';

export async function detach(ctx: OpContext): Promise<void> {
  const attachment = ctx.host.world().attachments.get(ctx.op.volume);
  if (attachment === undefined)
    failOperation(`DetachVolume failed: ${ctx.op.volume} is not attached`);
  const plugin = ctx.host.plugins.find(attachment.spec.traits.pluginName);
  if (plugin?.attacher === undefined) {
    failOperation(
      `DetachVolume.findDetachablePluginBySpec failed for volume "${ctx.op.volume}": ` +
        `no attachable plugin "${attachment.spec.traits.pluginName}" is registered; register it so vole can detach`,
    );
  }
  const attacher = plugin.attacher;
  await runCall(ctx, { call: 'detach', prefix: 'DetachVolume.Detach failed', plugin }, (target) =>
    attacher.detach(attachment.spec, target),
  );
}

/** The kubelet forgets a volume the controller detaches, or a non-attachable one. */
export async function markDetached(ctx: OpContext): Promise<void> {
  await runCall(
    ctx,
    { call: 'markDetached', prefix: 'MarkVolumeAsDetached failed', local: true },
    async () => {},
  );
}
