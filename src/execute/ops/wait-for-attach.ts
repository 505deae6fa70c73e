/** The WaitForAttach step both a mount (filesystem) and a map (block) begin with. */
import type { MountOperation } from '../../plan/index.js';
import type { VolumePlugin } from '../../plugins/types.js';
import type { ResolvedVolume } from '../../world/types.js';
import { type OpContext, runCall } from '../context.js';

/**
 * spec §4.7 step 7 / §4.10 step 3: WaitForAttach for attachable volumes (also when the
 * device is already mounted). Returns the devicePath to use.
 */
export async function waitForAttachStep(
  ctx: OpContext,
  op: MountOperation,
  spec: ResolvedVolume,
  plugin: VolumePlugin,
  prefix: string,
): Promise<string> {
  const given = ctx.host.world().attachments.get(op.volume)?.state.context.devicePath ?? '';
  const attacher = spec.attachable ? plugin.attacher : undefined;
  if (attacher === undefined) return given;
  return runCall(
    ctx,
    { call: 'waitForAttach', prefix, succeeded: (path: string) => ({ devicePath: path }) },
    (target) => attacher.waitForAttach(spec, given, target),
  );
}
