/**
 * The injected clock (docs/style.md rule 10): the only source of time outside the log. The real
 * clock for agents; the virtual clock for `vole simulate` and tests, which never sleep.
 */
import { assert } from './assert.js';

export interface TimerHandle {
  readonly id: number;
}

export interface Clock {
  nowMs(): number;
  /** Calls `fn` once at `atMs` (or as soon as possible if that has passed). */
  setTimer(atMs: number, fn: () => void): TimerHandle;
  clearTimer(handle: TimerHandle): void;
}

/** A promise resolved after `delayMs` on the given clock. */
export function sleep(clock: Clock, delayMs: number): Promise<void> {
  return new Promise((resolve) => clock.setTimer(clock.nowMs() + delayMs, resolve));
}

export class RealClock implements Clock {
  private nextId = 1;
  private readonly timers = new Map<number, NodeJS.Timeout>();

  /**
   * `holdsProcess`: its timers keep the process alive, as plain setTimeout does (a client
   * of the API server waiting to retry has nothing else that would); by default they do not.
   */
  constructor(private readonly opts: { readonly holdsProcess?: boolean } = {}) {}

  nowMs(): number {
    return Date.now();
  }

  setTimer(atMs: number, fn: () => void): TimerHandle {
    const id = this.nextId++;
    const timeout = setTimeout(
      () => {
        this.timers.delete(id);
        fn();
      },
      Math.max(0, atMs - Date.now()),
    );
    if (this.opts.holdsProcess !== true) timeout.unref?.();
    this.timers.set(id, timeout);
    return { id };
  }

  clearTimer(handle: TimerHandle): void {
    clearTimeout(this.timers.get(handle.id));
    this.timers.delete(handle.id);
  }
}

interface VirtualTimer {
  readonly id: number;
  readonly atMs: number;
  readonly fn: () => void;
}

/**
 * Virtual time: `nowMs()` moves only when the owner fires timers. Timers due at the same
 * moment fire in the order they were set, so a run is deterministic.
 */
export class VirtualClock implements Clock {
  private current: number;
  private nextId = 1;
  private timers: VirtualTimer[] = [];

  constructor(startMs = 0) {
    this.current = startMs;
  }

  nowMs(): number {
    return this.current;
  }

  setTimer(atMs: number, fn: () => void): TimerHandle {
    const timer = { id: this.nextId++, atMs: Math.max(atMs, this.current), fn };
    this.timers.push(timer);
    return { id: timer.id };
  }

  clearTimer(handle: TimerHandle): void {
    this.timers = this.timers.filter((t) => t.id !== handle.id);
  }

  /** The time of the earliest timer, or undefined when none is set. */
  nextTimerAtMs(): number | undefined {
    let earliest: number | undefined;
    for (const t of this.timers) if (earliest === undefined || t.atMs < earliest) earliest = t.atMs;
    return earliest;
  }

  /**
   * Moves time to the earliest timer at or before `limitMs` and fires every timer due
   * then. Returns false (and moves nothing) when no timer is due by `limitMs`.
   */
  fireNext(limitMs: number): boolean {
    const atMs = this.nextTimerAtMs();
    if (atMs === undefined || atMs > limitMs) return false;
    assert(atMs >= this.current, 'virtual time never goes back');
    this.current = atMs;
    const due = this.timers.filter((t) => t.atMs === atMs).sort((a, b) => a.id - b.id);
    this.timers = this.timers.filter((t) => t.atMs !== atMs);
    for (const t of due) t.fn();
    return true;
  }

  /** Sets the time without firing anything; only forward. */
  moveTo(atMs: number): void {
    assert(atMs >= this.current, `virtual time never goes back (${atMs} < ${this.current})`);
    this.current = atMs;
  }
}
