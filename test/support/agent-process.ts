/**
 * A `vole run` (or `vole controller`) child process for black-box tests: its stdout
 * lines, the metrics URL it announces, and a stop that ends it by its PID.
 */
import { type ChildProcess, spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { join } from 'node:path';

export const repo = join(import.meta.dirname, '../..');

export interface AgentProcess {
  readonly child: ChildProcess;
  readonly lines: string[];
  /** Resolves with the first stdout line matching `pattern` (rejects after `timeoutMs`). */
  line(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /**
   * Resolves with the exit code once the process has exited and its stdout and stderr are
   * closed, so `lines` holds everything it said ('exit' may come before the last 'data').
   */
  readonly exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL after 15 s; resolves with the exit code. */
  stop(): Promise<number | null>;
}

export function startVole(
  args: readonly string[],
  opts: {
    env?: Readonly<Record<string, string>>;
    /** A command prefix, e.g. nsenter into a network namespace (it must exec, not fork). */
    prefix?: readonly string[];
  } = {},
): AgentProcess {
  const command = [process.execPath, '--import', 'tsx', join(repo, 'src/cli/main.ts'), ...args];
  const [file, ...rest] = [...(opts.prefix ?? []), ...command];
  const child = spawn(file!, rest, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...opts.env },
  });
  const lines: string[] = [];
  const waiters = new Set<() => void>();
  let buffered = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    lines.push(...parts);
    for (const wake of waiters) wake();
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) =>
    child.once('close', (code) => resolve(code)),
  );
  return {
    child,
    lines,
    exited,
    line: (pattern, timeoutMs = 60_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          for (const l of lines) {
            const m = pattern.exec(l);
            if (m !== null) {
              waiters.delete(check);
              clearTimeout(timer);
              resolve(m);
              return;
            }
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no line matching ${pattern} in:\n${lines.join('\n')}\n${stderr}`));
        }, timeoutMs);
        waiters.add(check);
        check();
        void exited.then(() => {
          if (!waiters.has(check)) return;
          waiters.delete(check);
          clearTimeout(timer);
          reject(new Error(`exited before ${pattern}:\n${lines.join('\n')}\n${stderr}`));
        });
      }),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        process.kill(child.pid!, 'SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        const code = await exited;
        clearTimeout(timer);
        return code;
      }
      return exited;
    },
  };
}

/** Runs one vole command to completion. */
export function vole(...args: string[]): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, ['--import', 'tsx', join(repo, 'src/cli/main.ts'), ...args], {
    cwd: repo,
    encoding: 'utf8',
  });
}
