/**
 * The operation executor: starts planned operations, each as an async task that appends
 * OperationStarted before touching anything and OperationFinished after (docs/design.md).
 * The planner guarantees that no two started operations have conflicting keys; the fold
 * asserts it again when OperationStarted is folded.
 */
import { assert, unreachable } from '../assert.js';
import { kubeletDecision, type Operation, operationPod } from '../kubelet/planner.js';
import type { World } from '../kubelet/types.js';
import type { ExecutorHost, OpContext } from './context.js';
import { attach, type ControllerAttachedCheck, verifyControllerAttached } from './ops/attach.js';
import { detach, markDetached } from './ops/detach.js';
import { expand } from './ops/expand.js';
import { mount } from './ops/mount.js';
import { controllerExpand, deleteVolume, provision } from './ops/provision.js';
import { unmount, unmountDevice } from './ops/unmount.js';
import { OperationTasks } from './tasks.js';

function runSteps(ctx: OpContext, attachedNow?: ControllerAttachedCheck): Promise<void> {
  const { op } = ctx;
  switch (op.op) {
    case 'attach':
      return attach(ctx, op);
    case 'verifyControllerAttached':
      return verifyControllerAttached(ctx, op, attachedNow);
    case 'detach':
      return detach(ctx);
    case 'markDetached':
      return markDetached(ctx);
    case 'mount':
      return mount(ctx, op);
    case 'unmount':
      return unmount(ctx, op);
    case 'unmountDevice':
      return unmountDevice(ctx, op);
    case 'expand':
      return expand(ctx, op);
    case 'provision':
      return provision(ctx, op);
    case 'deleteVolume':
      return deleteVolume(ctx, op);
    case 'controllerExpand':
      return controllerExpand(ctx, op);
    default:
      return unreachable(op, 'operation');
  }
}

/** The kubelet's executor: starts planned operations (src/execute/ops/*). */
export class Executor {
  /** Only a mount has several calls; the fold makes its steps not in the log uncertain. */
  readonly durableCalls = 'first';
  private readonly tasks: OperationTasks<World, Operation>;

  constructor(
    host: ExecutorHost,
    /** The fresh read of the node's volumesAttached a mode gives (none: the world's copy). */
    private readonly attachedNow?: ControllerAttachedCheck,
  ) {
    this.tasks = new OperationTasks(host, 'first', () => {
      const { node } = host.world().config;
      assert(node !== '', 'a kubelet operation before EngineStarted named the node');
      return node;
    });
  }

  get inFlightCount(): number {
    return this.tasks.inFlightCount;
  }

  capacity(): number {
    return this.tasks.capacity();
  }

  /** Appends OperationStarted (the planner's decision) and runs the operation. */
  start(op: Operation): void {
    const pod = operationPod(op);
    const bindings = { op: op.op, volume: op.volume, pod: pod ?? undefined };
    this.tasks.start(op, kubeletDecision(op), bindings, (ctx) => runSteps(ctx, this.attachedNow));
  }

  drain(): Promise<void> {
    return this.tasks.drain();
  }
}
