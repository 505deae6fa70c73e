/**
 * vole processes for cluster tests: controller replicas and node agents, each a real
 * `vole` process whose output is kept, killed (SIGKILL, SIGSTOP/SIGCONT) by its PID, and
 * all ended by PID in teardown. A replica that exits because it lost its leadership is
 * started again as a standby, as a supervisor would.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

const repo = join(import.meta.dirname, '../..');
/** The moment the history's times count from (this module's load). */
export const historyEpochMs = Date.now();

/** `+12.345s` since historyEpochMs: the time stamp of history lines. */
export function stamp(atMs = Date.now()): string {
  return `+${((atMs - historyEpochMs) / 1000).toFixed(3)}s`;
}

export class VoleProcess {
  child: ChildProcess;
  output = '';
  /** Every line the process printed (and its exits), each stamped with when it came. */
  readonly history: string[] = [];
  restarts = 0;
  private ended = false;

  constructor(
    readonly name: string,
    private readonly args: string[],
    private readonly restartOnExit: boolean,
    /** A command prefix, e.g. nsenter into a network namespace (it must exec, not fork). */
    private readonly prefix: readonly string[] = [],
  ) {
    this.child = this.spawn();
  }

  private spawn(): ChildProcess {
    const [cmd, ...rest] = [
      ...this.prefix,
      process.execPath,
      '--import',
      'tsx',
      join(repo, 'src/cli/main.ts'),
      ...this.args,
    ];
    const child = spawn(cmd!, rest, { stdio: ['ignore', 'pipe', 'pipe'] });
    const take = (d: Buffer) => {
      this.output += d.toString();
      const at = stamp();
      for (const line of d.toString().split('\n'))
        if (line !== '') this.history.push(`${at} ${line}`);
    };
    child.stdout!.on('data', take);
    child.stderr!.on('data', take);
    child.on('exit', (code, signal) => {
      this.output += `[${this.name} exited: ${code ?? signal}]\n`;
      this.history.push(`${stamp()} [exited: ${code ?? signal}]`);
      if (this.restartOnExit && !this.ended && this.child === child && signal !== 'SIGKILL') {
        this.restarts++;
        this.child = this.spawn();
      }
    });
    return child;
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** SIGKILL by PID; with `restart`, a new process takes its place (a supervisor). */
  async kill(opts: { restart?: boolean } = {}): Promise<void> {
    const child = this.child;
    if (this.alive) {
      const exited = new Promise((r) => child.once('exit', r));
      process.kill(child.pid!, 'SIGKILL');
      await exited;
    }
    if (opts.restart === true) this.child = this.spawn();
  }

  /** Starts the process again if it is not running (after a kill without restart). */
  start(): void {
    if (!this.alive) this.child = this.spawn();
  }

  pause(): void {
    process.kill(this.pid, 'SIGSTOP');
  }

  resume(): void {
    process.kill(this.pid, 'SIGCONT');
  }

  /** SIGTERM (a clean stop), then SIGKILL after `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    this.ended = true;
    const child = this.child;
    if (!this.alive) return;
    const exited = new Promise((r) => child.once('exit', r));
    process.kill(child.pid!, 'SIGCONT');
    process.kill(child.pid!, 'SIGTERM');
    const timer = setTimeout(() => {
      if (this.alive) process.kill(child.pid!, 'SIGKILL');
    }, graceMs);
    await exited;
    clearTimeout(timer);
  }
}

/** Waits (real time) for `condition`, polling; fails naming `what` after `timeoutMs`. */
export async function eventually(
  condition: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 30_000,
  detail: () => string = () => '',
): Promise<number> {
  const started = Date.now();
  while (!(await condition())) {
    if (Date.now() - started > timeoutMs)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}\n${detail()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return Date.now() - started;
}
