/**
 * The event loop thread's scheduling priority (docs/performance-notes.md, "Where the one commit's
 * tail comes from"). On Linux a nice value belongs to a thread, and `setpriority` of the
 * calling "process" sets the calling thread's only: the event loop's, where vole folds,
 * plans and commits its log. V8's garbage-collector and compiler threads, and the libuv
 * threads started before, keep the process's priority.
 *
 * Why: with two CPUs, a commit's `fsync` returns and the event loop is woken, then waits
 * (up to 4 ms measured) while V8's own background threads run their time slice on both
 * CPUs. Ahead of them, the commit's p99 halves. Threads the event loop starts afterwards
 * (libuv's pool on its first use) inherit its priority: they do its work.
 */
import { getPriority, setPriority } from 'node:os';

/** The agent's and the controller's default where the process may raise it (root). */
export const eventLoopNiceDefault = -10;

export interface EventLoopNiceOutcome {
  /** The event loop thread's nice value now. */
  readonly nice: number;
  /** Why it was left as it was: not Linux, or the process may not raise it. */
  readonly refused?: string;
}

/** Parses a nice value given on the command line: an integer from -20 to 19. */
export function parseNice(text: string): number {
  const nice = Number(text);
  if (!/^-?\d+$/.test(text.trim()) || nice < -20 || nice > 19)
    throw new Error(`--event-loop-nice ${text}: say an integer from -20 (first) to 19 (last)`);
  return nice;
}

/**
 * Sets the calling thread's nice value (call it from the event loop). Never throws for a
 * refusal: the engine works at any priority, so the outcome says why it was not changed.
 */
export function setEventLoopNice(nice: number): EventLoopNiceOutcome {
  if (process.platform !== 'linux')
    return { nice: getPriority(0), refused: 'a thread of its own priority is Linux only' };
  try {
    setPriority(0, nice);
  } catch (error) {
    // Node's SystemError: its own code is ERR_SYSTEM_ERROR, the errno's name is in `info`.
    const system = error as { code?: string; info?: { code?: string } };
    const code = system.info?.code ?? system.code ?? String(error);
    return {
      nice: getPriority(0),
      refused:
        `${code}: a nice value below the current one needs root or CAP_SYS_NICE ` +
        `(--event-loop-nice 0 leaves it)`,
    };
  }
  return { nice: getPriority(0) };
}

/** The nice value to set when none is asked: the default as root, none otherwise. */
export function defaultEventLoopNice(): number | undefined {
  return process.getuid?.() === 0 ? eventLoopNiceDefault : undefined;
}
