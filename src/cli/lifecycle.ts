import { withoutResolutionNote } from '../csi/grpc-text.js';
import type { GroupCommitterOptions } from '../log/group-commit-options.js';
import type { LogDamagedError } from '../log/errors.js';
import { readManifestDir } from '../sources/manifests.js';
import type { FeatureGates } from '../sources/feature-gates.js';
import { UsageError } from './postmortem.js';

/**
 * The life of a long-running command (the agent, the controller): it runs until SIGINT or
 * SIGTERM (running operations finish first, within 10 s), or with --once until settled
 * (exit 0), until what is left can only wait for outside change (exit 3), or until
 * --timeout (exit 1).
 */
export interface LifecycleOptions {
  readonly say: (line: string) => void;
  readonly once: boolean;
  /** Seconds, as given on the command line. */
  readonly timeout: string | undefined;
  readonly settled: () => boolean;
  readonly settledMessage: () => string;
  /** Stops watching, lets operations finish, closes the log. */
  readonly shutdown: () => Promise<void>;
  /** When the shutdown outlives its deadline (a blocked log): stop now, close the log. */
  readonly abandon?: () => void;
  /** True while the log cannot be written: a stop then abandons at once (nothing can drain). */
  readonly logBlocked?: () => boolean;
  /**
   * With once: what is left when it can only wait for a change outside vole (printed,
   * then exit 3), undefined while something may still progress. Asked every check; it must
   * hold for stuckMsMin in a row, so a retry or a manifest read in flight gets its turn.
   */
  readonly stuck?: () => string | undefined;
  /** With once, at the timeout: what is still not ready and why (printed before exit 1). */
  readonly leftAtTimeout?: () => string;
  /**
   * Settles when the command cannot go on (its log was found damaged): it stops at once
   * through `abandon` (nothing drains, mounts stay as they are) and the run rejects with it.
   */
  readonly fatal?: Promise<Error>;
}

/** How long `--once` must find every pod left waiting on outside change before it exits. */
const stuckMsMin = 3_000;

/** `--once` without --timeout gives up after this long: a pod that never works ends it. */
export const onceTimeoutSecondsDefault = 120;

/** How long a clean stop waits for running operations. */
const drainMsMax = 10_000;

export function runUntilStopped(opts: LifecycleOptions): Promise<number> {
  const startedMs = Date.now();
  return new Promise<number>((resolve, reject) => {
    let stopping = false;
    const stop = async (code: number, why: string, fatal?: Error) => {
      if (stopping) return;
      stopping = true;
      clearInterval(check);
      if (fatal !== undefined) {
        opts.abandon?.();
        process.removeListener('SIGINT', onSigint);
        process.removeListener('SIGTERM', onSigterm);
        return reject(fatal);
      }
      opts.say(why);
      if (opts.logBlocked?.() === true && opts.abandon !== undefined) {
        opts.say(
          'the log cannot be written: stopping now; what it could not take is lost, ' +
            'as in a crash (the next start resolves it from the host)',
        );
        opts.abandon();
      } else {
        await drainOrAbandon(opts);
      }
      process.removeListener('SIGINT', onSigint);
      process.removeListener('SIGTERM', onSigterm);
      resolve(code);
    };
    const onSigint = () => void stop(130, 'SIGINT: finishing running operations, then stopping');
    const onSigterm = () => void stop(143, 'SIGTERM: finishing running operations, then stopping');
    process.once('SIGINT', onSigint);
    process.once('SIGTERM', onSigterm);
    void opts.fatal?.then((error) => stop(1, error.message, error));
    const timeoutMs =
      opts.timeout === undefined
        ? Number.POSITIVE_INFINITY
        : Number.parseFloat(opts.timeout) * 1000;
    let stuckSinceMs: number | undefined;
    const check = setInterval(() => {
      if (opts.once && opts.settled()) return void stop(0, opts.settledMessage());
      const stuck = opts.once ? opts.stuck?.() : undefined;
      stuckSinceMs = stuck === undefined ? undefined : (stuckSinceMs ?? Date.now());
      if (stuck !== undefined && Date.now() - stuckSinceMs! >= stuckMsMin) {
        const why = 'nothing left that vole can do without a change outside it: exit 3';
        void stop(3, `${stuck}\n${why}`);
      } else if (Date.now() - startedMs > timeoutMs) {
        const left = opts.leftAtTimeout?.();
        const why = left === undefined || left === '' ? '' : `\n${left}`;
        void stop(1, `timed out after ${opts.timeout} s without settling${why}`);
      }
    }, 50);
  });
}

/** Lets operations finish, within drainMsMax; past it, cuts them off (opts.abandon). */
async function drainOrAbandon(opts: LifecycleOptions): Promise<void> {
  // The drain's deadline must not outlive the drain: a pending timer holds the process
  // open after the command has finished (it kept `--once` alive for 10 s).
  let deadline: NodeJS.Timeout | undefined;
  const drained = await Promise.race([
    opts.shutdown().then(() => true),
    new Promise<false>((r) => (deadline = setTimeout(() => r(false), drainMsMax))),
  ]);
  clearTimeout(deadline);
  if (!drained) {
    opts.say(`operations still running after ${drainMsMax / 1000} s: cut off, as in a crash`);
    opts.abandon?.();
  }
}

/** Progress lines on stdout, stamped with the seconds since the command started. */
export function progressPrinter(): (line: string) => void {
  const startedMs = Date.now();
  return (line) => {
    const text = withoutResolutionNote(line);
    process.stdout.write(`[+${((Date.now() - startedMs) / 1000).toFixed(2)}s] ${text}\n`);
  };
}

/**
 * Reads the manifest directory before anything is opened or written: an unreadable
 * directory, or any file in it with a problem (a missing required key, bad YAML), refuses
 * the start with every problem named (exit 2). Once running, a file that goes bad is
 * reported and skipped instead, so an editor's half-written save cannot stop the agent.
 */
export function refuseBadManifests(dir: string, gates?: FeatureGates): void {
  let problems;
  try {
    problems = readManifestDir(dir, {}, gates).problems;
  } catch (error) {
    throw new UsageError(`cannot read the manifest directory ${dir}: ${(error as Error).message}`);
  }
  if (problems.length === 0) return;
  const lines = problems.slice(0, 10).map((p) => `  ${p.file}: ${p.message}`);
  if (problems.length > 10) lines.push(`  … and ${problems.length - 10} more`);
  throw new UsageError(
    `the manifest directory ${dir} has ${problems.length} problem(s); ` +
      `fix them and start again:\n${lines.join('\n')}`,
  );
}

/** How often a blocked log is reported again while it stays blocked. */
const blockedReportEveryMs = 30_000;

/**
 * Says when the log cannot be written (the file, SQLite's error, the free space) and when
 * it can again; `blocked()` tells whether it is blocked now (--once is not settled then).
 */
export function logBlockedReporter(say: (line: string) => void): GroupCommitterOptions & {
  blocked: () => boolean;
} {
  let blockedNow = false;
  let lastReportMs = 0;
  return {
    blocked: () => blockedNow,
    onBlocked: (b) => {
      blockedNow = true;
      if (b.attempts > 1 && Date.now() - lastReportMs < blockedReportEveryMs) return;
      lastReportMs = Date.now();
      const free = b.freeBytes === undefined ? 'unknown' : `${b.freeBytes} bytes`;
      say(
        `log ${b.path} cannot be written (${b.code}: ${b.message}; free space on its ` +
          `filesystem: ${free}): starting no operations; ${b.pendingCount} event(s) wait; ` +
          `retrying the append (attempt ${b.attempts}, next in ${b.retryInMs} ms). Free some ` +
          `space there; vole resumes by itself.`,
      );
    },
    onHalted: (error) => {
      // For good: the background check found the file damaged (LogDamagedError says what
      // to do). The agent starts no operation; mounted volumes stay as they are.
      blockedNow = true;
      say(`${error.message} Starting no operations until then.`);
    },
    onResumed: (r) => {
      blockedNow = false;
      say(
        `log ${r.path} written again after ${(r.blockedMs / 1000).toFixed(1)} s ` +
          `(${r.written} event(s)): resuming operations`,
      );
    },
  };
}

/**
 * The log's damage, as a promise: the whole-file check a restart runs in the background
 * (src/log/integrity.ts) found it. Nothing was written to the log or done on the host
 * until then (the group committer holds every commit, and every act waits for one), so
 * the command (`vole run`, with manifests or on an API server; `vole controller
 * --kubeconfig`) stops at once with its message, exit 2, the mounts left as they are: as
 * when the kubelet dies.
 */
export function damageWatch(reporter: ReturnType<typeof logBlockedReporter>): {
  logBlocked: ReturnType<typeof logBlockedReporter>;
  found: Promise<LogDamagedError>;
} {
  let report: (error: LogDamagedError) => void = () => {};
  const found = new Promise<LogDamagedError>((resolve) => (report = resolve));
  let damaged = false;
  return {
    found,
    logBlocked: {
      ...reporter,
      blocked: () => damaged || reporter.blocked(),
      onHalted: (error) => {
        damaged = true;
        report(error);
      },
    },
  };
}

/**
 * `work`, unless the log is found damaged first: then `stop`, and its error is thrown. The
 * orphan pass records each orphan, durable, before it touches it: on a damaged log it waits
 * for good, and the agent stops with the orphans where they are.
 */
export async function stopIfDamaged<T>(
  work: Promise<T>,
  found: Promise<LogDamagedError>,
  stop: () => void,
): Promise<T> {
  const outcome = await Promise.race([
    work.then((value) => ({ value })),
    found.then((error) => ({ error })),
  ]);
  if ('error' in outcome) {
    stop();
    throw outcome.error;
  }
  return outcome.value;
}
