/**
 * The engine: one writer that appends events, folds them into the world at once, plans
 * after every change and starts the planned operations. Event-driven, not polled: a tick
 * runs on the next turn of the event loop after any change, and at backoff expiries.
 *
 * It knows no core of its own: it is given one (src/engine/cores.ts: the kubelet's or the
 * controller's), whose mode it records in EngineStarted, and a runner for its operations.
 */
import { setMaxListeners } from 'node:events';
import type { Logger } from 'pino';
import { assert } from '../assert.js';
import {
  callTimeoutMsDefault,
  operationsInFlightMax,
  planOperationsMax,
  waitForAttachTimeoutMs,
} from '../constants.js';
import type { CallName, NewEvent, VoleEvent } from '../events/index.js';
import type { Clock, TimerHandle } from '../clock.js';
import type { Seq, UniqueVolumeName } from '../ids.js';
import type { PluginManager } from '../plugins/manager.js';
import type { EventSink } from './sink.js';
import type { Core, CoreConfig, CoreOperation, CoreWorld, Runner } from './core.js';

export const engineVersion = '0.1.0';

/** The engine as a runner (an executor) sees it. */
export interface RunnerHost<W> {
  readonly clock: Clock;
  readonly plugins: PluginManager;
  readonly logger: Logger;
  world(): W;
  /** Folds the event into the world and buffers it for the next group commit. */
  append(event: NewEvent): Seq;
  /**
   * Makes every appended event durable (one transaction): undefined when they are, or a
   * promise that resolves once they are (the log is blocked, e.g. its disk is full).
   */
  flush(throughSeq?: Seq): Promise<void> | undefined;
  /** False once this engine stopped: a late answer of a cut-off call is dropped. */
  alive(): boolean;
  /** Aborted when the engine stops: calls still running are cut off. */
  readonly signal: AbortSignal;
  callTimeoutMs(call: CallName): number;
}

export interface EngineOptions<W extends CoreWorld, O extends CoreOperation> {
  /** The pure core (no default: the log's mode names it) and what runs its operations. */
  readonly core: Core<W, O>;
  readonly runner: (host: RunnerHost<W>) => Runner<O>;
  /** The core's configuration, recorded in EngineStarted. */
  readonly config: CoreConfig;
  readonly plugins: PluginManager;
  readonly clock: Clock;
  readonly sink: EventSink;
  readonly logger: Logger;
  /** The world folded from the log so far (a restart); the empty world for a new log. */
  readonly world?: W;
  readonly callTimeoutsMs?: Partial<Record<CallName, number>>;
  /**
   * Re-plan the whole world on every tick and demand the same operations as the
   * incremental plan (a self-check for simulations and tests; O(world) per tick).
   */
  readonly checkIncrementalPlan?: boolean;
  /**
   * false: no mount intents (docs/reliability.md, "Durable points"), as in `vole simulate`,
   * whose restart reads back every event. By default an executor that waits for the log
   * before an operation's first call only, on a log whose commits it waits for, uses them.
   */
  readonly mountIntents?: false;
  /** Called after a flush when snapshotEveryEvents events have passed since the last one. */
  readonly snapshot?: { everyEvents: number; save: (world: W) => void; lastSeq: number };
}

/** The executor's flush: durable now (undefined), or a promise while the log is blocked. */
function durable(sink: EventSink, throughSeq?: Seq): Promise<void> | undefined {
  if (sink.whenDurable !== undefined) return sink.whenDurable(throughSeq);
  sink.flush();
  return undefined;
}

export type EventListener<W> = (event: VoleEvent, world: W) => void;

export class Engine<W extends CoreWorld, O extends CoreOperation> {
  readonly world: W;
  private readonly core: Core<W, O>;
  private readonly executor: Runner<O>;
  private readonly listeners = new Set<EventListener<W>>();
  private readonly retryTimers = new Map<UniqueVolumeName, { atMs: number; handle: TimerHandle }>();
  private running = false;
  private readonly stopped = new AbortController();
  private tickScheduled = false;
  private ticks = 0;
  private lastSnapshotSeq: number;

  constructor(private readonly opts: EngineOptions<W, O>) {
    this.core = opts.core;
    // Every running call listens for the stop (src/execute/context.ts): as many as may run.
    setMaxListeners(operationsInFlightMax + 16, this.stopped.signal);
    this.world = opts.world ?? this.core.initialWorld();
    this.lastSnapshotSeq = opts.snapshot?.lastSeq ?? 0;
    const host: RunnerHost<W> = {
      clock: opts.clock,
      plugins: opts.plugins,
      logger: opts.logger.child({ component: 'executor' }),
      world: () => this.world,
      append: (event) => this.append(event),
      flush: (throughSeq) => durable(opts.sink, throughSeq),
      alive: () => this.running,
      signal: this.stopped.signal,
      callTimeoutMs: (call) => this.callTimeoutMs(call),
    };
    this.executor = opts.runner(host);
    // Ticks skipped while the log was blocked plan what they left dirty.
    opts.sink.onWritable?.(() => this.scheduleTick());
  }

  get isRunning(): boolean {
    return this.running;
  }

  get tickCount(): number {
    return this.ticks;
  }

  get inFlightCount(): number {
    return this.executor.inFlightCount;
  }

  /** Whether attaches name the pods whose mounts then need no commit (EngineOptions.mountIntents). */
  private mountIntents(): boolean {
    const { opts } = this;
    return (
      opts.mountIntents !== false &&
      this.executor.durableCalls === 'first' &&
      opts.sink.whenDurable !== undefined
    );
  }

  /** True when nothing is left to plan now (operations may still wait on timers). */
  get idle(): boolean {
    return !this.tickScheduled && this.world.dirty.size === 0;
  }

  private callTimeoutMs(call: CallName): number {
    const given = this.opts.callTimeoutsMs?.[call];
    if (given !== undefined) return given;
    return call === 'waitForAttach' ? waitForAttachTimeoutMs : callTimeoutMsDefault;
  }

  /** Appends EngineStarted (which closes operations a previous process left in flight). */
  start(): void {
    assert(!this.running, 'engine started twice');
    this.running = true;
    const config = this.opts.config;
    const kubelet = config.controller === undefined ? config : undefined;
    // The fields in the order earlier versions wrote them, absent ones left out.
    this.append({
      type: 'EngineStarted',
      tsMs: this.opts.clock.nowMs(),
      ...(kubelet === undefined
        ? {}
        : {
            node: kubelet.node,
            controllerAttachDetach: kubelet.controllerAttachDetach,
            ...(kubelet.bindClaims === false ? { bindClaims: false } : {}),
            ...(kubelet.tokenRequests === true ? { tokenRequests: true } : {}),
            ...(kubelet.csiDriverObjects === true ? { csiDriverObjects: true } : {}),
          }),
      plugins: this.opts.plugins.catalog(),
      ...(this.executor.durableCalls === 'first' ? { durableCalls: 'first' } : {}),
      ...(this.mountIntents() ? { mountIntents: true } : {}),
      ...(kubelet?.allocatable === undefined ? {} : { allocatable: kubelet.allocatable }),
      version: engineVersion,
      mode: this.core.mode,
      ...(config.controller === undefined ? {} : { controller: config.controller }),
    });
    this.opts.sink.flush();
  }

  /**
   * Stops planning and drops the answers of calls still running (they are cut off, as in
   * a crash; the next engine's EngineStarted makes their pairs uncertain).
   */
  stop(): void {
    if (!this.running) return;
    this.running = false;
    this.stopped.abort();
    for (const { handle } of this.retryTimers.values()) this.opts.clock.clearTimer(handle);
    this.retryTimers.clear();
    this.opts.sink.flush();
  }

  /** Waits for running operations to finish, then stops: a clean shutdown. */
  async drainAndStop(): Promise<void> {
    await this.executor.drain();
    this.stop();
  }

  subscribe(listener: EventListener<W>): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The single way state changes: append, fold, tell listeners, plan soon. */
  append(event: NewEvent): Seq {
    assert(this.running, `engine stopped: cannot append ${event.type}`);
    const seq = this.opts.sink.push(event);
    assert(seq === this.world.seq + 1, `sink gave seq ${seq} after ${this.world.seq}`);
    const full = { ...event, seq } as VoleEvent; // NewEvent plus its seq is a VoleEvent
    this.core.fold(this.world, full);
    for (const listener of this.listeners) listener(full, this.world);
    this.scheduleTick();
    return seq;
  }

  private scheduleTick(): void {
    if (this.tickScheduled || !this.running) return;
    this.tickScheduled = true;
    setImmediate(() => {
      this.tickScheduled = false;
      this.tick();
    });
  }

  /** Plans the dirty volumes and starts what the planner returns. */
  tick(): void {
    // A blocked log (disk full) starts nothing: the dirty volumes wait for onWritable.
    if (!this.running || this.opts.sink.writable === false) return;
    this.ticks++;
    const dirty = this.takeDirty();
    if (dirty.size === 0) {
      // Events that dirtied nothing (a call's outcome, an operation's end) are made durable
      // too: a sink that only writes when flushed (etcd's) would hold them back otherwise.
      this.tickOver();
      return;
    }
    const result = this.core.plan(this.world, this.opts.clock.nowMs(), { volumes: dirty });
    if (this.opts.checkIncrementalPlan === true) this.checkAgainstFullPlan(result.operations);
    for (const event of result.events ?? []) this.append(event);
    for (const op of result.operations) {
      if (this.executor.capacity() > 0) this.executor.start(op);
      else this.world.dirty.add(op.volume); // backpressure: plan it again next tick
    }
    for (const volume of result.deferred) this.world.dirty.add(volume);
    for (const retry of result.retries) this.scheduleRetry(retry.volume, retry.atMs);
    this.tickOver();
    this.maybeSnapshot();
    // At capacity, the next operation to finish appends its outcome, which ticks again.
    if (this.world.dirty.size > 0 && this.executor.capacity() > 0) this.scheduleTick();
  }

  /** The sink's group commit point: the SQLite log commits when a wait needs it. */
  private tickOver(): void {
    const { sink } = this.opts;
    if (sink.afterTick === undefined) sink.flush();
    else sink.afterTick();
  }

  /**
   * The dirty volumes this tick plans: the oldest, at most as many as operations may still
   * start (and planOperationsMax); the rest stay dirty for the next tick. A tick thus costs
   * O(what can start), not O(dirty): a whole cluster listed at once, or ten thousand
   * operations waiting on the log, are not planned again on every event.
   */
  private takeDirty(): Set<UniqueVolumeName> {
    const dirty = this.world.dirty;
    const max = Math.min(planOperationsMax, this.executor.capacity());
    if (dirty.size <= max) {
      this.world.dirty = new Set();
      return dirty;
    }
    const taken = new Set<UniqueVolumeName>();
    for (const volume of dirty) {
      if (taken.size >= max) break;
      taken.add(volume);
      dirty.delete(volume);
    }
    return taken;
  }

  /** Snapshots are taken between ticks, after a flush, so they never run ahead of the log. */
  private maybeSnapshot(): void {
    const snapshot = this.opts.snapshot;
    if (snapshot === undefined || this.world.seq - this.lastSnapshotSeq < snapshot.everyEvents)
      return;
    snapshot.save(this.world);
    this.lastSnapshotSeq = this.world.seq;
  }

  private checkAgainstFullPlan(incremental: readonly O[]): void {
    const describe = (ops: readonly O[]) =>
      ops
        .map((op) => this.core.describe(op))
        .sort()
        .join(', ');
    const full = this.core.plan(this.world, this.opts.clock.nowMs(), {}).operations;
    assert(
      describe(full) === describe(incremental),
      () =>
        `incremental plan [${describe(incremental)}] differs from the full plan [${describe(full)}] ` +
        `(seq ${this.world.seq})`,
    );
  }

  private scheduleRetry(volume: UniqueVolumeName, atMs: number): void {
    const existing = this.retryTimers.get(volume);
    if (existing !== undefined && existing.atMs <= atMs) return;
    if (existing !== undefined) this.opts.clock.clearTimer(existing.handle);
    const handle = this.opts.clock.setTimer(atMs, () => {
      this.retryTimers.delete(volume);
      if (!this.running) return;
      this.world.dirty.add(volume);
      this.scheduleTick();
    });
    this.retryTimers.set(volume, { atMs, handle });
  }
}
