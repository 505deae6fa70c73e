/** behaviour K4.11 UnmountVolume and K4.12 UnmountDevice (filesystem). */
import type { UnmountDeviceOperation, UnmountOperation } from '../../kubelet/planner.js';
import { type OpContext, failOperation, runCall } from '../context.js';
import { tearDownDevice, unmap } from './map.js';
import { podEntry } from '../../kubelet/by-pod.js';

export async function unmount(ctx: OpContext, op: UnmountOperation): Promise<void> {
  const record = podEntry(ctx.host.world().mounts.get(op.volume), op.pod);
  if (record === undefined)
    failOperation(`UnmountVolume failed: ${op.volume} is not mounted for pod ${op.pod}`);
  const plugin = ctx.host.plugins.find(record.spec.traits.pluginName);
  if (op.steps[0] === 'unmap') return unmap(ctx, op, record, plugin);
  if (plugin === undefined) {
    failOperation(
      `UnmountVolume.FindPluginByName failed for volume "${op.volume}": no plugin ` +
        `"${record.spec.traits.pluginName}" is registered; register it so vole can tear the volume down`,
    );
  }
  await runCall(
    ctx,
    { call: 'tearDown', prefix: 'UnmountVolume.TearDown failed', pod: op.pod, plugin },
    (target) => plugin.pod.tearDown(record.spec, target),
  );
}

export async function unmountDevice(ctx: OpContext, op: UnmountDeviceOperation): Promise<void> {
  const attachment = ctx.host.world().attachments.get(ctx.op.volume);
  if (attachment === undefined)
    failOperation(`UnmountDevice failed: ${ctx.op.volume} is not attached`);
  const plugin = ctx.host.plugins.find(attachment.spec.traits.pluginName);
  if (op.steps[0] === 'tearDownDevice') return tearDownDevice(ctx, attachment, plugin);
  const deviceMounter = plugin?.deviceMounter;
  if (deviceMounter === undefined) {
    failOperation(
      `UnmountDevice.FindDeviceMountablePluginByName failed for volume "${ctx.op.volume}": ` +
        `no device-mountable plugin "${attachment.spec.traits.pluginName}" is registered`,
    );
  }
  const deviceMountPath =
    attachment.context.deviceMountPath || deviceMounter.deviceMountPath(attachment.spec);
  // behaviour K4.12 step 2: other references keep the device mounted; no state change, backoff.
  const refs = await deviceMounter.deviceMountRefs(deviceMountPath);
  if (refs.length > 0) {
    failOperation(
      `GetDeviceMountRefs check failed for volume "${ctx.op.volume}": the device mount path ` +
        `"${deviceMountPath}" is still mounted by other references [${refs.join(' ')}]`,
      'transient',
    );
  }
  await runCall(
    ctx,
    { call: 'unmountDevice', prefix: 'UnmountDevice failed', ...(plugin && { plugin }) },
    (target) => deviceMounter.unmountDevice(attachment.spec, deviceMountPath, target),
  );
}
