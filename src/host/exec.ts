/**
 * Running host commands: argument arrays, never a shell, and the C locale so that the
 * messages we classify are the English ones. A failure to run at all, or a timeout,
 * becomes a HostError; a non-zero exit is a value the caller classifies.
 */
import { execFile } from 'node:child_process';
import { commandOutputBytesMax, commandTimeoutMsDefault } from './limits.js';
import { commandLine, HostError, type HostErrorKind } from './errors.js';

export interface ExecResult {
  readonly stdout: string;
  readonly stderr: string;
  /** The exit code; 129 for a command killed by a signal it was not sent by run's timeout. */
  readonly code: number;
}

interface ExecFailure {
  readonly code?: number | string | null;
  readonly killed?: boolean;
  readonly message: string;
}

/**
 * Runs a command and resolves with its exit code, whatever it is. Rejects with a HostError
 * only when the command could not run (`final`: not installed) or was killed for taking
 * longer than `timeoutMs` (`uncertain`: it may have taken effect).
 */
export function run(
  cmd: string,
  args: readonly string[],
  opts: { readonly timeoutMs?: number } = {},
): Promise<ExecResult> {
  const line = commandLine(cmd, args);
  const timeoutMs = opts.timeoutMs ?? commandTimeoutMsDefault;
  const options = {
    timeout: timeoutMs,
    maxBuffer: commandOutputBytesMax,
    encoding: 'utf8' as const,
    env: { ...process.env, LC_ALL: 'C', LANG: 'C' },
  };
  return new Promise((resolve, reject) => {
    execFile(cmd, args, options, (error: ExecFailure | null, stdout: string, stderr: string) => {
      if (error === null) return resolve({ stdout, stderr, code: 0 });
      if (error.killed === true) {
        const message =
          `${line} took longer than ${timeoutMs} ms and was killed; ` +
          'it may have taken effect, so look before retrying';
        return reject(new HostError('uncertain', message, { command: line, stderr }));
      }
      if (typeof error.code === 'string') {
        const fix =
          error.code === 'ENOENT'
            ? `install ${cmd} (util-linux, e2fsprogs or xfsprogs)`
            : 'check the host';
        return reject(
          new HostError('final', `${line} could not run (${error.message}); ${fix}`, {
            command: line,
          }),
        );
      }
      resolve({ stdout, stderr, code: typeof error.code === 'number' ? error.code : 129 });
    });
  });
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
