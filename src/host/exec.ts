/**
 * Running host commands: argument arrays, each word quoted for the shell that runs it (a
 * long-lived helper, src/host/command-helper.ts, never a spawn of the agent per command),
 * and the C locale so that the messages we classify are the English ones. A failure to run
 * at all, or a timeout, becomes a HostError; a non-zero exit is a value the caller
 * classifies.
 */
import { CommandHelpers, type HelperResult } from './command-helper.js';
import { commandHelpersMax, commandOutputBytesMax, commandTimeoutMsDefault } from './limits.js';
import { commandLine, HostError, type HostErrorKind } from './errors.js';

export interface ExecResult {
  readonly stdout: string;
  readonly stderr: string;
  /** The exit code; 128 + the signal's number for a command killed by a signal. */
  readonly code: number;
}

/** The agent's helpers, started at its first command. */
const helpers = new CommandHelpers({
  size: commandHelpersMax,
  outputBytesMax: commandOutputBytesMax,
  env: () => ({ ...process.env, LC_ALL: 'C', LANG: 'C' }),
});

/** Ends the command helpers by their PIDs (a running command first finishes, within 1 s). */
export function stopCommandHelpers(): Promise<void> {
  return helpers.stop();
}

/**
 * Runs a command and resolves with its exit code, whatever it is. Rejects with a HostError
 * only when the command could not run (`final`: not installed, or no helper to run it) or
 * did not finish (`uncertain`: killed after `timeoutMs`, or its helper died under it; it
 * may have taken effect).
 */
export async function run(
  cmd: string,
  args: readonly string[],
  opts: { readonly timeoutMs?: number } = {},
): Promise<ExecResult> {
  const line = commandLine(cmd, args);
  const timeoutMs = opts.timeoutMs ?? commandTimeoutMsDefault;
  if ([cmd, ...args].some((word) => word.includes('\0')))
    throw new HostError('final', `${line} has a NUL byte in an argument; pass text without one`);
  return resultOf(cmd, line, timeoutMs, await helpers.run(cmd, args, timeoutMs));
}

/** The ExecResult of an exited command, or the HostError of one that did not exit. */
export function resultOf(
  cmd: string,
  line: string,
  timeoutMs: number,
  result: HelperResult,
): ExecResult {
  switch (result.kind) {
    case 'exited':
      return { stdout: result.stdout, stderr: result.stderr, code: result.code };
    case 'timedOut':
      throw new HostError(
        'uncertain',
        `${line} took longer than ${timeoutMs} ms and was killed; ` +
          'it may have taken effect, so look before retrying',
        { command: line, stderr: result.stderr },
      );
    case 'notFound':
      throw new HostError(
        'final',
        `${line} could not run (${cmd}: not found on PATH); ` +
          `install ${cmd} (util-linux, e2fsprogs or xfsprogs)`,
        { command: line },
      );
    case 'lost':
      throw new HostError(
        'uncertain',
        `${line} did not finish: ${result.why}; ` +
          'it may have taken effect, so look before retrying',
        { command: line },
      );
    case 'cannotRun':
      throw new HostError(
        'final',
        `${line} could not run (${result.why}); ` +
          `check that ${cmd} and the interpreter its first line names are installed`,
        { command: line },
      );
    case 'unstarted':
      throw new HostError('final', `${line} could not run (${result.why}); check the host`, {
        command: line,
      });
  }
}

/**
 * Runs a command that must exit 0 and returns its stdout; any other exit is a HostError of
 * `kind` whose message quotes stderr and ends with `fix`.
 */
export async function runOk(
  cmd: string,
  args: readonly string[],
  opts: { readonly kind?: HostErrorKind; readonly timeoutMs?: number; readonly fix?: string } = {},
): Promise<string> {
  const result = await run(cmd, args, opts);
  if (result.code === 0) return result.stdout;
  throw failed(cmd, args, result, {
    kind: opts.kind ?? 'final',
    fix: opts.fix ?? 'see the message above',
  });
}

/** The HostError for a command that exited non-zero. */
export function failed(
  cmd: string,
  args: readonly string[],
  result: ExecResult,
  failure: { readonly kind: HostErrorKind; readonly fix: string },
): HostError {
  const line = commandLine(cmd, args);
  const said = (result.stderr.trim() || result.stdout.trim())
    .split('\n')
    .map((line) => line.trim().replace(/\.$/, ''))
    .filter((line) => line !== '' && !/^dmesg\(1\) may have more information/.test(line))
    .slice(0, 3)
    .join(' / ');
  const message = `${line} failed (exit ${result.code}): ${said || 'no message'}; ${failure.fix}`;
  return new HostError(failure.kind, message, { command: line, stderr: result.stderr });
}
