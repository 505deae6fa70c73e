/**
 * Runs the controller's operations (spec §3.8): Attach, and Detach with the fresh check
 * of the node's volumesInUse unless forced. The same appending discipline as the
 * kubelet's executor: OperationStarted and each CallStarted are durable before the call.
 */
import type { Runner } from '../agent/engine.js';
import {
  type ExecutorHost,
  failOperation,
  type OpContext,
  runCall,
  runningOp,
} from '../execute/context.js';
import { OperationTasks } from '../execute/tasks.js';
import type { ControllerOperation } from './plan.js';
import { type ControllerWorld, pairKey } from './types.js';

type Ctx = OpContext<ControllerWorld, ControllerOperation>;

async function attach(ctx: Ctx): Promise<void> {
  const spec = runningOp(ctx).spec;
  if (spec === null)
    failOperation(
      `AttachVolume.FindAttachablePluginBySpec failed: ${ctx.op.volume} is no longer desired on ${ctx.op.node}`,
    );
  const attacher = ctx.host.plugins.find(spec.pluginName)?.attacher;
  if (attacher === undefined)
    failOperation(
      `AttachVolume.FindAttachablePluginBySpec failed for volume "${ctx.op.volume}": no attachable plugin "${spec.pluginName}"`,
    );
  await runCall(
    ctx,
    {
      call: 'attach',
      prefix: `AttachVolume.Attach failed for volume "${spec.innerVolumeSpecName}"`,
      node: ctx.op.node,
      succeeded: (devicePath: string) => ({ devicePath }),
    },
    (target) => attacher.attach(spec, target),
  );
}

async function detach(ctx: Ctx): Promise<void> {
  const { op } = ctx;
  const world = ctx.host.world();
  const attachment = world.attachments.get(pairKey(op.volume, op.node));
  if (attachment === undefined)
    failOperation(`DetachVolume failed: ${op.volume} is not attached to ${op.node}`);
  const attacher = ctx.host.plugins.find(attachment.pluginName)?.attacher;
  if (attacher === undefined)
    failOperation(
      `DetachVolume.findDetachablePluginBySpec failed for volume "${op.volume}": no attachable plugin "${attachment.pluginName}"`,
    );
  await runCall(
    ctx,
    {
      call: 'detach',
      prefix: `DetachVolume.Detach failed for volume "${attachment.spec.innerVolumeSpecName}"`,
      node: op.node,
    },
    async (target) => {
      // §3.8 step 1: a fresh read of the node; a deleted node is safe to detach from.
      if (op.verifySafeToDetach === true) {
        const node = ctx.host.world().nodes.get(op.node);
        if (node?.exists === true && node.volumesInUse.has(op.volume)) {
          throw new Error(
            `DetachVolume failed for volume "${op.volume}" from node "${op.node}": volume is still in use by node, according to Node status`,
          );
        }
      }
      await attacher.detach(attachment.spec, target);
    },
  );
}

export class ControllerExecutor implements Runner<ControllerOperation> {
  private readonly tasks: OperationTasks<ControllerWorld, ControllerOperation>;

  constructor(host: ExecutorHost<ControllerWorld>) {
    this.tasks = new OperationTasks(host);
  }

  get inFlightCount(): number {
    return this.tasks.inFlightCount;
  }

  capacity(): number {
    return this.tasks.capacity();
  }

  start(op: ControllerOperation): void {
    const fields = {
      op: op.op,
      key: op.key,
      volume: op.volume,
      node: op.node,
      cause: op.cause,
      ...(op.verifySafeToDetach === undefined ? {} : { verifySafeToDetach: op.verifySafeToDetach }),
      ...(op.forced === undefined ? {} : { forced: op.forced }),
    };
    this.tasks.start(op, fields, { op: op.op, volume: op.volume, node: op.node }, (ctx: Ctx) =>
      ctx.op.op === 'attach' ? attach(ctx) : detach(ctx),
    );
  }

  drain(): Promise<void> {
    return this.tasks.drain();
  }
}
