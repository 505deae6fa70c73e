/**
 * Running host commands: argument arrays, never a shell; a failure becomes a HostError
 * whose kind tells the engine what it may have left behind (spec §0.5 classes).
 */
import { execFile } from 'node:child_process';

export type HostErrorKind = 'transient' | 'uncertain' | 'final';

export class HostError extends Error {
  override name = 'HostError';
  constructor(
    readonly kind: HostErrorKind,
    message: string,
    readonly command: string = '',
    readonly stderr: string = '',
  ) {
    super(message);
  }
}

export interface ExecResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly code: number;
}

/** Output a command may print at most; more is a sign of a wrong command (limit on everything). */
const outputBytesMax = 16 * 1024 * 1024;

/** Runs a command; resolves with its exit code (never rejects for a non-zero exit). */
export function run(cmd: string, args: readonly string[], opts: { timeoutMs?: number } = {}): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: opts.timeoutMs ?? 60_000, maxBuffer: outputBytesMax, encoding: 'utf8' }, (error, stdout, stderr) => {
      const e = error as (NodeJS.ErrnoException & { code?: number | string; killed?: boolean }) | null;
      if (e !== null && typeof e.code === 'string') {
        const hint = e.code === 'ENOENT' ? ` (is ${cmd} installed?)` : '';
        reject(new HostError('final', `${cmd}: ${e.message}${hint}`, `${cmd} ${args.join(' ')}`));
        return;
      }
      if (e?.killed === true) {
        reject(new HostError('uncertain', `${cmd} ${args.join(' ')} timed out and was killed; it may have taken effect`, cmd, stderr));
        return;
      }
      resolve({ stdout, stderr, code: e === null ? 0 : Number(e.code ?? 1) });
    });
  });
}

/** Runs a command that must succeed; a non-zero exit is a HostError of `kind`. */
export async function runOk(cmd: string, args: readonly string[], opts: { kind?: HostErrorKind; timeoutMs?: number } = {}): Promise<string> {
  const r = await run(cmd, args, opts);
  if (r.code !== 0) {
    const what = `${cmd} ${args.join(' ')}`;
    throw new HostError(opts.kind ?? 'final', `${what} failed (exit ${r.code}): ${r.stderr.trim() || r.stdout.trim()}`, what, r.stderr);
  }
  return r.stdout;
}
