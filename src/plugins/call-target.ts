/**
 * The CallTarget runCall hands a plugin (src/execute/context.ts). Its AbortSignal is made
 * only when the plugin asks for it: the built-in plugins never do, and an AbortController
 * with its listener on the engine's signal cost more per call than folding the call's
 * events (and each one's EventTarget machinery was among the code V8 dropped and compiled
 * again while pods ran: docs/performance-notes.md, "A slow pod's time"). Asked before or after,
 * the signal says the same: aborted once the engine stopped or the call timed out.
 */
import type { RpcRecord } from '../events/index.js';
import type { CallTarget } from './types.js';

export class EngineCallTarget implements CallTarget {
  rpc?: RpcRecord;
  private controller: AbortController | undefined;
  private onEngineStop: (() => void) | undefined;
  private timedOut = false;
  private ended = false;

  constructor(
    readonly node: string,
    readonly pod: string | null,
    private readonly engineSignal: AbortSignal,
  ) {}

  get signal(): AbortSignal {
    if (this.controller !== undefined) return this.controller.signal;
    const controller = new AbortController();
    this.controller = controller;
    if (this.cutOff) controller.abort();
    else if (!this.ended) {
      // One listener while the call runs, removed when it ends (AbortSignal.any costs more).
      this.onEngineStop = () => controller.abort();
      this.engineSignal.addEventListener('abort', this.onEngineStop, { once: true });
    }
    return controller.signal;
  }

  /** The engine stopped or the call timed out: what `signal.aborted` answers, without a signal. */
  get cutOff(): boolean {
    return this.timedOut || this.engineSignal.aborted;
  }

  /** The call timed out: its signal, made or not yet, is aborted. */
  timeOut(): void {
    this.timedOut = true;
    this.controller?.abort();
  }

  /** The call returned: the engine's signal forgets it (a signal made later stays as it is then). */
  end(): void {
    this.ended = true;
    if (this.onEngineStop !== undefined)
      this.engineSignal.removeEventListener('abort', this.onEngineStop);
    this.onEngineStop = undefined;
  }
}

/**
 * Whether the call was cut off (the engine stopped, or the call timed out): what
 * `target.signal.aborted` answers, without making the signal of a target the engine made.
 */
export function callCutOff(target: Pick<CallTarget, 'signal'>): boolean {
  return target instanceof EngineCallTarget ? target.cutOff : target.signal.aborted;
}
