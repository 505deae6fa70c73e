/**
 * Runs the controller's operations (behaviour C3.8): Attach, and Detach with the fresh check
 * of the node's volumesInUse unless forced. The same appending discipline as the
 * kubelet's executor: OperationStarted and each CallStarted are durable before the call.
 */
import type { Runner } from '../engine/core.js';
import {
  type ExecutorHost,
  failOperation,
  OperationAbandoned,
  type OpContext,
  runCall,
  runningOp,
} from './context.js';
import { OperationTasks } from './tasks.js';
import { controllerExpand, deleteVolume, provision } from './ops/provision.js';
import { type ControllerOperation, controllerDecision } from '../controller/plan.js';
import type { ControllerWorld } from '../controller/types.js';

type Ctx = OpContext<ControllerWorld, ControllerOperation>;

/**
 * The node's volumesInUse read fresh from where the node writes it, right before a detach
 * that must verify, once the node's volumesAttached without the volume is stored (cluster
 * mode's leader writes it, as the reconciler calls UpdateNodeStatusForNode before a detach;
 * verifyVolumeIsSafeToDetach then GETs the Node, not its informer's copy). The world's copy
 * is not enough: the node's write may have landed and not reached the world yet, and a node
 * whose write lands after this read finds the volume gone from volumesAttached and does not
 * mount it. Answers whether the node reports the volume in use (false for a node that is
 * gone); throws when it cannot tell, and the detach fails without a call, retried.
 */
export type NodeInUseCheck = (node: string, volume: string) => Promise<boolean>;

async function attach(ctx: Ctx): Promise<void> {
  const spec = runningOp(ctx).spec;
  if (spec === null)
    failOperation(
      `AttachVolume.FindAttachablePluginBySpec failed: ${ctx.op.volume} is no longer desired on ${ctx.op.node}`,
    );
  const plugin = ctx.host.plugins.find(spec.traits.pluginName);
  const attacher = plugin?.attacher;
  if (attacher === undefined)
    failOperation(
      `AttachVolume.FindAttachablePluginBySpec failed for volume "${ctx.op.volume}": no attachable plugin "${spec.traits.pluginName}"`,
    );
  await runCall(
    ctx,
    {
      call: 'attach',
      prefix: `AttachVolume.Attach failed for volume "${spec.innerVolumeSpecName}"`,
      node: ctx.op.node,
      ...(plugin && { plugin }),
      succeeded: (devicePath: string) => ({ devicePath }),
    },
    (target) => attacher.attach(spec, target),
  );
}

/**
 * behaviour C3.8 / S3: a detach that must verify reads the node's volumesInUse again right before
 * it runs, once OperationStarted is durable. Waiting for the log (a full disk, an etcd
 * commit in cluster mode) takes time, and the node may have reported the volume in use
 * again meanwhile (its pod came back): then the detach fails without a call, retried.
 */
async function verifySafeToDetach(
  ctx: Ctx,
  specName: string,
  inUseNow: NodeInUseCheck | undefined,
): Promise<void> {
  const { op, host } = ctx;
  if (op.verifySafeToDetach !== true) return;
  const waiting = host.flush();
  if (waiting !== undefined) {
    await waiting;
    if (!host.alive()) throw new OperationAbandoned('engine stopped before detach');
  }
  const inUse = () =>
    failOperation(
      `DetachVolume failed for volume "${specName}": node ${op.node} reports it in use again (verifySafeToDetach)`,
      'transient',
    );
  if (host.world().nodes.get(op.node)?.volumesInUse.has(op.volume) === true) inUse();
  if (inUseNow === undefined) return;
  let reported: boolean;
  try {
    reported = await inUseNow(op.node, op.volume);
  } catch (error) {
    failOperation(
      `DetachVolume failed fetching node ${op.node} for volume "${specName}": ${(error as Error).message}; retried`,
      'transient',
    );
  }
  if (!host.alive()) throw new OperationAbandoned('engine stopped before detach');
  if (reported) inUse();
}

async function detach(ctx: Ctx, inUseNow: NodeInUseCheck | undefined): Promise<void> {
  const { op } = ctx;
  const spec = runningOp(ctx).spec;
  if (spec === null)
    failOperation(`DetachVolume failed: ${op.volume} is not attached to ${op.node}`);
  const plugin = ctx.host.plugins.find(spec.traits.pluginName);
  const attacher = plugin?.attacher;
  if (attacher === undefined)
    failOperation(
      `DetachVolume.findDetachablePluginBySpec failed for volume "${op.volume}": no attachable plugin "${spec.traits.pluginName}"`,
    );
  await verifySafeToDetach(ctx, spec.innerVolumeSpecName, inUseNow);
  await runCall(
    ctx,
    {
      call: 'detach',
      prefix: `DetachVolume.Detach failed for volume "${spec.innerVolumeSpecName}"`,
      node: op.node,
      ...(plugin && { plugin }),
    },
    (target) => attacher.detach(spec, target),
  );
}

const base = (op: ControllerOperation) => ({ volume: op.volume, key: op.key, cause: op.cause });

/**
 * The operation's steps: attach, detach, or the provisioner's CreateVolume / DeleteVolume
 * and the resizer's ControllerExpandVolume.
 */
function run(ctx: Ctx, inUseNow: NodeInUseCheck | undefined): Promise<void> {
  const { op } = ctx;
  switch (op.op) {
    case 'attach':
      return attach(ctx);
    case 'detach':
      return detach(ctx, inUseNow);
    case 'provision':
      return provision(ctx, {
        ...base(op),
        op: 'provision',
        provision: op.provision!,
        ...(op.refused === undefined ? {} : { refused: op.refused }),
      });
    case 'deleteVolume':
      return deleteVolume(ctx, { ...base(op), op: 'deleteVolume', pv: op.pv! });
    case 'controllerExpand':
      return controllerExpand(ctx, {
        ...base(op),
        op: 'controllerExpand',
        pv: op.pv!,
        sizeBytes: op.sizeBytes!,
      });
  }
}

export class ControllerExecutor implements Runner<ControllerOperation> {
  private readonly tasks: OperationTasks<ControllerWorld, ControllerOperation>;

  constructor(
    host: ExecutorHost<ControllerWorld>,
    /** The fresh read of a node's volumesInUse a mode gives (none: the world's copy only). */
    private readonly inUseNow?: NodeInUseCheck,
  ) {
    this.tasks = new OperationTasks(host, 'every', (op) => op.node);
  }

  get inFlightCount(): number {
    return this.tasks.inFlightCount;
  }

  capacity(): number {
    return this.tasks.capacity();
  }

  start(op: ControllerOperation): void {
    const bindings = { op: op.op, volume: op.volume, node: op.node };
    this.tasks.start(op, controllerDecision(op), bindings, (ctx) => run(ctx, this.inUseNow));
  }

  drain(): Promise<void> {
    return this.tasks.drain();
  }
}
