/**
 * What an operation needs while it runs, and `runCall`: the one way an operation calls a
 * plugin. It appends CallStarted and makes it durable before the host is touched, bounds
 * the call by a timeout, classifies the outcome and appends it (docs/design.md executor).
 */
import type { Logger } from 'pino';
import type { RunnerHost } from '../engine/engine.js';
import type { CallError, CallName } from '../events/index.js';
import type { OpId } from '../ids.js';
import type { Operation } from '../kubelet/planner.js';
import type { CallTarget, VolumePlugin } from '../plugins/types.js';
import { EngineCallTarget } from '../plugins/call-target.js';
import type { World } from '../kubelet/types.js';
import type { RunningOp } from '../operations/types.js';
import { type Clock } from '../clock.js';
import { classify, timeoutError } from './errors.js';

/** The engine as the executor sees it. */
export type ExecutorHost<W = World> = RunnerHost<W>;

export interface OpContext<W extends { running: Map<OpId, RunningOp> } = World, O = Operation> {
  readonly host: ExecutorHost<W>;
  readonly op: O;
  readonly opId: OpId;
  /** The node the operation's calls act on (the kubelet's own; an attachment's for the controller). */
  readonly node: string;
  readonly logger: Logger;
  /**
   * Which calls wait for the log before they touch the host (docs/reliability.md, "Durable
   * points"): 'first', only the operation's first (its OperationStarted is durable before
   * anything runs; a crash leaves every step not answered in the log uncertain, the
   * EngineStarted records it); 'every', each call's CallStarted.
   */
  readonly durableCalls: 'first' | 'every';
  /** Calls started so far. */
  callsStarted: number;
}

/** The operation failed; its error is already recorded (CallFailed) or is recorded now. */
export class OperationFailed extends Error {
  override name = 'OperationFailed';
  constructor(
    readonly error: CallError,
    readonly recorded: boolean,
  ) {
    super(error.message);
  }
}

/** The engine stopped while the operation ran: nothing more is appended for it. */
export class OperationAbandoned extends Error {
  override name = 'OperationAbandoned';
}

export function runningOp<W extends { running: Map<OpId, RunningOp> }, O>(
  ctx: OpContext<W, O>,
): RunningOp {
  const op = ctx.host.world().running.get(ctx.opId);
  if (op === undefined) throw new OperationAbandoned(`operation ${ctx.opId} is no longer running`);
  return op;
}

/** Fails the operation before any plugin call (a synchronous check of the behaviour K4). */
export function failOperation(message: string, kind: CallError['kind'] = 'final'): never {
  throw new OperationFailed({ kind, message }, false);
}

interface CallOptions<T> {
  readonly call: CallName;
  /** The message prefix of spec Appendix B, e.g. `MountVolume.SetUp failed`. */
  readonly prefix: string;
  readonly started?: { deviceMountPath?: string };
  readonly succeeded?: (value: T) => {
    devicePath?: string;
    deviceMountPath?: string;
    sizeBytes?: number;
  };
  readonly pod?: string | null;
  /** The node the call acts on (default: the operation's node). */
  readonly node?: string;
  /**
   * The plugin the call goes to: when it says it cannot be reached (a CSI driver not
   * registered), the operation fails before the call is recorded, as nothing happened.
   */
  readonly plugin?: Pick<VolumePlugin, 'unavailable'>;
  /**
   * The call acts on nothing outside the engine (no plugin, no driver, no API: it reads the
   * world the log made), so nothing outside can have seen it and it waits for no commit
   * (docs/reliability.md, "Durable points"). Its events go with the next commit.
   */
  readonly local?: true;
}

async function withTimeout<T, W extends { running: Map<OpId, RunningOp> }, O>(
  ctx: OpContext<W, O>,
  promise: Promise<T>,
  timeoutMs: number,
): Promise<{ ok: true; value: T } | { ok: false; error: unknown; timedOut: boolean }> {
  const { clock } = ctx.host;
  let timer: ReturnType<Clock['setTimer']> | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = clock.setTimer(clock.nowMs() + timeoutMs, () => resolve('timeout'));
  });
  try {
    const raced = await Promise.race([
      promise.then((value) => ({ ok: true as const, value })),
      timeout,
    ]);
    if (raced === 'timeout') return { ok: false, error: undefined, timedOut: true };
    return raced;
  } catch (error) {
    return { ok: false, error, timedOut: false };
  } finally {
    if (timer !== undefined) clock.clearTimer(timer);
  }
}

/** Runs one plugin call of the operation; returns its value or throws OperationFailed. */
export async function runCall<
  T,
  W extends { running: Map<OpId, RunningOp> } = World,
  O = Operation,
>(ctx: OpContext<W, O>, opts: CallOptions<T>, fn: (target: CallTarget) => Promise<T>): Promise<T> {
  const { host, opId } = ctx;
  if (!host.alive()) throw new OperationAbandoned(`engine stopped before ${opts.call}`);
  const unavailable = opts.plugin?.unavailable?.();
  if (unavailable !== undefined) failOperation(`${opts.prefix}: ${unavailable}`);
  host.append({
    type: 'CallStarted',
    tsMs: host.clock.nowMs(),
    opId,
    call: opts.call,
    ...opts.started,
  });
  // OperationStarted (and CallStarted, for every call when durableCalls says so) is durable
  // before the host is touched: while the log is blocked (disk full), the call waits for it.
  const first = ctx.callsStarted++ === 0;
  const touchesHost = opts.local !== true;
  // A mount its pod's intent covers waits only for the attach that named the pod.
  const durable =
    touchesHost && (first || ctx.durableCalls === 'every')
      ? host.flush(first ? runningOp(ctx).coveredBy : undefined)
      : undefined;
  if (durable !== undefined) {
    await durable;
    if (!host.alive()) throw new OperationAbandoned(`engine stopped before ${opts.call}`);
  }
  // Its signal is made only if the plugin asks; the engine's stop or the timeout cuts it off.
  const target = new EngineCallTarget(opts.node ?? ctx.node, opts.pod ?? null, host.signal);
  const timeoutMs = host.callTimeoutMs(opts.call);
  const outcome = await withTimeout(
    ctx,
    Promise.resolve().then(() => fn(target)),
    timeoutMs,
  );
  target.end();
  if (!host.alive()) throw new OperationAbandoned(`engine stopped during ${opts.call}`);
  const tsMs = host.clock.nowMs();
  if (outcome.ok) {
    host.append({
      type: 'CallSucceeded',
      tsMs,
      opId,
      call: opts.call,
      ...opts.succeeded?.(outcome.value),
      ...(target.rpc === undefined ? {} : { rpc: target.rpc }),
    });
    return outcome.value;
  }
  if (outcome.timedOut) target.timeOut();
  const error = outcome.timedOut
    ? timeoutError(opts.prefix, opts.call, timeoutMs)
    : classify(opts.prefix, outcome.error);
  host.append({
    type: 'CallFailed',
    tsMs,
    opId,
    call: opts.call,
    error,
    ...(target.rpc === undefined ? {} : { rpc: target.rpc }),
  });
  throw new OperationFailed(error, true);
}
