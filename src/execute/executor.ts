/**
 * The operation executor: starts planned operations, each as an async task that appends
 * OperationStarted before touching anything and OperationFinished after (DESIGN.md).
 * The planner guarantees that no two started operations have conflicting keys; the fold
 * asserts it again when OperationStarted is folded.
 */
import type { Logger } from 'pino';
import { assert, unreachable } from '../assert.js';
import { operationsInFlightMax } from '../constants.js';
import { OpId } from '../ids.js';
import { type Operation, operationPod } from '../plan/index.js';
import {
  type ExecutorHost,
  OperationAbandoned,
  OperationFailed,
  type OpContext,
} from './context.js';
import { attach, verifyControllerAttached } from './ops/attach.js';
import { detach, markDetached } from './ops/detach.js';
import { expand } from './ops/expand.js';
import { mount } from './ops/mount.js';
import { unmount, unmountDevice } from './ops/unmount.js';

type Phase = 'started' | 'succeeded' | 'failed';

/** One helper for an operation's log lines (STYLE.md §13), not a copied triplet. */
function logOperation(logger: Logger, phase: Phase, detail: { error?: string } = {}): void {
  if (phase === 'failed') logger.warn({ error: detail.error }, 'operation failed');
  else logger.debug(`operation ${phase}`);
}

function runSteps(ctx: OpContext): Promise<void> {
  const { op } = ctx;
  switch (op.op) {
    case 'attach':
      return attach(ctx);
    case 'verifyControllerAttached':
      return verifyControllerAttached(ctx);
    case 'detach':
      return detach(ctx);
    case 'markDetached':
      return markDetached(ctx);
    case 'mount':
      return mount(ctx, op);
    case 'unmount':
      return unmount(ctx, op);
    case 'unmountDevice':
      return unmountDevice(ctx);
    case 'expand':
      return expand(ctx);
    default:
      return unreachable(op, 'operation');
  }
}

export class Executor {
  private inFlight = new Set<Promise<void>>();

  constructor(private readonly host: ExecutorHost) {}

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /** How many more operations may start now (backpressure at operationsInFlightMax). */
  capacity(): number {
    return operationsInFlightMax - this.inFlight.size;
  }

  /** Appends OperationStarted and runs the operation in the background. */
  start(op: Operation): void {
    assert(
      this.capacity() > 0,
      `executor: more than ${operationsInFlightMax} operations in flight`,
    );
    const { host } = this;
    const seq = host.world().seq + 1;
    const opId = OpId(`op-${seq}`);
    const pod = operationPod(op);
    host.append({
      type: 'OperationStarted',
      tsMs: host.clock.nowMs(),
      opId,
      op: op.op,
      key: op.key,
      volume: op.volume,
      ...(pod === null ? {} : { pod }),
      ...('node' in op ? { node: op.node } : {}),
      ...(op.op === 'mount' ? { remount: op.remount } : {}),
      cause: op.cause,
    });
    const logger = host.logger.child({ opId, op: op.op, volume: op.volume, pod: pod ?? undefined });
    logOperation(logger, 'started');
    const ctx: OpContext = { host, op, opId, logger };
    const task = this.run(ctx).finally(() => this.inFlight.delete(task));
    this.inFlight.add(task);
  }

  private async run(ctx: OpContext): Promise<void> {
    const { host, opId, logger } = ctx;
    try {
      await runSteps(ctx);
      if (!host.alive()) return;
      host.append({ type: 'OperationFinished', tsMs: host.clock.nowMs(), opId, outcome: 'ok' });
      logOperation(logger, 'succeeded');
    } catch (error) {
      if (error instanceof OperationAbandoned || !host.alive()) return;
      if (!(error instanceof OperationFailed)) throw error; // A bug: let it crash loudly.
      host.append({
        type: 'OperationFinished',
        tsMs: host.clock.nowMs(),
        opId,
        outcome: 'failed',
        error: error.error,
      });
      logOperation(logger, 'failed', { error: error.error.message });
    }
  }

  /** Resolves when every operation started so far has finished (tests, clean stop). */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.race(this.inFlight);
  }
}
