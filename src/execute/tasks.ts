/**
 * What every executor shares: the operations in flight (bounded by operationsInFlightMax),
 * OperationStarted before anything runs, OperationFinished with the outcome after, and one
 * place for the operation's log lines (docs/style.md rule 13).
 */
import type { Logger } from 'pino';
import { assert } from '../assert.js';
import { operationsInFlightMax } from '../constants.js';
import type { EventOf } from '../events/index.js';
import { OpId, type Seq } from '../ids.js';
import type { RunningOp } from '../operations/types.js';
import {
  type ExecutorHost,
  OperationAbandoned,
  OperationFailed,
  type OpContext,
} from './context.js';

type Phase = 'started' | 'succeeded' | 'failed';

/** One helper for an operation's log lines, not a copied triplet. */
function logOperation(logger: Logger, phase: Phase, detail: { error?: string } = {}): void {
  if (phase === 'failed') logger.warn({ error: detail.error }, 'operation failed');
  else logger.debug(`operation ${phase}`);
}

type StartFields = Omit<EventOf<'OperationStarted'>, 'seq' | 'tsMs' | 'type' | 'opId'>;

export class OperationTasks<W extends { running: Map<OpId, RunningOp>; seq: Seq }, O> {
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly host: ExecutorHost<W>,
    private readonly durableCalls: 'first' | 'every',
    /** The node an operation's calls act on ('' for none: a provisioner's CreateVolume). */
    private readonly nodeOf: (op: O) => string,
  ) {}

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /** How many more operations may start now (backpressure at operationsInFlightMax). */
  capacity(): number {
    return operationsInFlightMax - this.inFlight.size;
  }

  /** Appends OperationStarted, then runs `steps` in the background and records the outcome. */
  start(
    op: O,
    fields: StartFields,
    bindings: Record<string, unknown>,
    steps: (ctx: OpContext<W, O>) => Promise<void>,
  ): void {
    assert(
      this.capacity() > 0,
      () => `executor: more than ${operationsInFlightMax} operations in flight`,
    );
    const { host } = this;
    const opId = OpId(`op-${host.world().seq + 1}`);
    host.append({ type: 'OperationStarted', tsMs: host.clock.nowMs(), opId, ...fields });
    const logger = host.logger.child({ opId, ...bindings });
    logOperation(logger, 'started');
    const { durableCalls } = this;
    const node = this.nodeOf(op);
    const ctx: OpContext<W, O> = { host, op, opId, node, logger, durableCalls, callsStarted: 0 };
    const task = this.run(ctx, steps).finally(() => this.inFlight.delete(task));
    this.inFlight.add(task);
  }

  private async run(
    ctx: OpContext<W, O>,
    steps: (ctx: OpContext<W, O>) => Promise<void>,
  ): Promise<void> {
    const { host, opId, logger } = ctx;
    try {
      await steps(ctx);
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
