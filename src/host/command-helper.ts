/**
 * Host commands run by a few long-lived `sh` processes instead of one spawn of the agent
 * per command. Spawning from Node forks the whole agent (a large address space) on the
 * event loop's thread: about 80 ms a `mount` under load, during which no other pod moves.
 * A helper forks itself instead (a few hundred kilobytes), off the event loop, and several
 * helpers run commands at once.
 *
 * The protocol is plain sh: each command is one line on the helper's stdin, every word
 * single-quoted (so `../`, spaces, quotes, `;` and `$(...)` in a name are only text), its
 * stdin /dev/null (it cannot read the next line as its own input). After the command the
 * helper prints a line with a token and the exit status on stdout, and the token alone on
 * stderr; the command's own output is everything before them, byte for byte. A command
 * cannot forge the token: it is a secret the helper drew at its start (never in a command
 * line, and the command's stdin is not the helper's) and the command's sequence number.
 *
 * A helper that dies (killed, out of memory) fails its one command `lost` and is replaced
 * by the next command that needs one. Helpers are ended by their PID when the pool stops
 * and when the process exits, and end by themselves at end of input when the agent dies
 * unannounced (SIGKILL): no orphan outlives the agent by more than its running command.
 * They are forked from the agent, so they share its mount namespace.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';

/** How a command run by a helper ended. */
export type HelperResult =
  | {
      readonly kind: 'exited';
      /** sh's `$?`: the exit code, or 128 + the signal for a command killed by one. */
      readonly code: number;
      readonly stdout: string;
      readonly stderr: string;
    }
  /** No such command on the helper's PATH; nothing ran. */
  | { readonly kind: 'notFound' }
  /**
   * The command is there but could not be executed (its interpreter missing, no exec
   * permission: the shell's `exec` failed, 127 or 126); nothing ran. `why` is the shell's
   * own line.
   */
  | { readonly kind: 'cannotRun'; readonly why: string }
  /** Still running after its timeout: the helper and the command were killed. */
  | { readonly kind: 'timedOut'; readonly stderr: string }
  /** The helper died or misbehaved while the command ran; it may have taken effect. */
  | { readonly kind: 'lost'; readonly why: string }
  /** No helper could be started; nothing ran. */
  | { readonly kind: 'unstarted'; readonly why: string };

export interface CommandHelperOptions {
  /** Helpers running commands at once; more commands wait for one to be free. */
  readonly size: number;
  /** Output (stdout + stderr) a command may print; more kills it (`lost`). */
  readonly outputBytesMax: number;
  /** The helpers' environment (read when each starts). */
  readonly env?: () => NodeJS.ProcessEnv;
}

/** A word for sh that is only ever that text: single quotes, each `'` as `'\''`. */
export function shellQuote(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/** The line that runs `cmd args` and then reports under `token`. */
export function commandScript(cmd: string, args: readonly string[], token: string): string {
  const words = [cmd, ...args].map(shellQuote).join(' ');
  // `exec` in a subshell: always the program on PATH, never a builtin of the same name.
  return (
    `if command -v ${shellQuote(cmd)} >/dev/null 2>&1; ` +
    `then (exec ${words}) </dev/null; s=$?; else s=notfound; fi; ` +
    `printf '\\n%s %s\\n' ${token} "$s"; printf '\\n%s\\n' ${token} >&2\n`
  );
}

/**
 * The shell's line when its `exec` of the command failed (dash: `/bin/sh: 3: exec: X: not
 * found`, 127, for a missing interpreter too; `Permission denied`, 126): then the command
 * never ran. A command's own 126 or 127 prints something else and stays its exit status.
 */
export function execFailure(code: number, stderr: string): string | undefined {
  if (code !== 126 && code !== 127) return undefined;
  const line = stderr.trim();
  return /^\/bin\/sh: (\d+: )?exec: [^\n]*: (not found|Permission denied)$/.test(line)
    ? line
    : undefined;
}

interface Pending {
  readonly token: string;
  readonly resolve: (result: HelperResult) => void;
  readonly timer: NodeJS.Timeout;
}

/** One `sh`, running one command at a time. */
class CommandHelper {
  readonly child: ChildProcess;
  private readonly stdout: Buffer[] = [];
  private readonly stderr: Buffer[] = [];
  private outputBytes = 0;
  private pending: Pending | undefined;
  private startError: string | undefined;
  /** The token's secret part; drawn once, as a draw a command cost 0.7 ms under load. */
  private readonly secret = randomBytes(16).toString('hex');
  private commands = 0;
  dead = false;

  constructor(private readonly opts: CommandHelperOptions) {
    // Its own process group, so a timeout ends the command with it (kill -PID).
    this.child = spawn('/bin/sh', ['-s'], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: opts.env?.() ?? process.env,
      detached: true,
    });
    this.child.on('error', (error) => {
      this.startError ??= error.message;
      this.died(`could not run /bin/sh (${error.message})`);
    });
    this.child.on('exit', (code, signal) =>
      this.died(signal === null ? `exited with status ${code}` : `was killed by ${signal}`),
    );
    this.child.stdin!.on('error', () => undefined); // a dead helper's EPIPE: `exit` says it
    this.collect(this.child.stdout!, this.stdout);
    this.collect(this.child.stderr!, this.stderr);
    // Idle helpers do not hold the process open; a running command's timer does.
    this.child.unref();
    for (const stream of [this.child.stdin, this.child.stdout, this.child.stderr])
      (stream as unknown as { unref?: () => void } | null)?.unref?.();
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  exec(cmd: string, args: readonly string[], timeoutMs: number): Promise<HelperResult> {
    if (this.dead) return Promise.resolve(this.unstartedOrLost('had already ended'));
    this.commands += 1;
    const token = `${this.secret}-${this.commands}`;
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.timeOut(), timeoutMs);
      this.pending = { token, resolve, timer };
      this.stdout.length = 0;
      this.stderr.length = 0;
      this.outputBytes = 0;
      this.child.stdin!.write(commandScript(cmd, args, token));
    });
  }

  /** Ends the helper (and a running command) by its process group's PID. */
  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    // Dead from now on: the pool must not hand it a command before its `exit` arrives.
    this.dead = true;
    if (this.pid === undefined || this.child.exitCode !== null || this.child.signalCode !== null)
      return;
    try {
      process.kill(-this.pid, signal);
    } catch {
      // Already gone between the look and the kill.
    }
  }

  private collect(stream: Readable, into: Buffer[]): void {
    stream.on('data', (chunk: Buffer) => {
      into.push(chunk);
      this.outputBytes += chunk.length;
      if (this.outputBytes > this.opts.outputBytesMax + 256) {
        const why = `printed more than ${this.opts.outputBytesMax} bytes and was killed`;
        this.finish({ kind: 'lost', why });
        this.kill();
        return;
      }
      this.check();
    });
  }

  /** Finishes the command once both of its report lines have arrived. */
  private check(): void {
    const pending = this.pending;
    if (pending === undefined) return;
    const out = Buffer.concat(this.stdout);
    const err = Buffer.concat(this.stderr);
    const outMark = out.lastIndexOf(`\n${pending.token} `);
    const errMark = err.lastIndexOf(`\n${pending.token}\n`);
    if (outMark < 0 || errMark < 0 || out.at(-1) !== 0x0a) return;
    const status = out.subarray(outMark + pending.token.length + 2, out.length - 1).toString();
    if (status === 'notfound') return this.finish({ kind: 'notFound' });
    const stderr = err.subarray(0, errMark).toString('utf8');
    const code = Number(status);
    const why = execFailure(code, stderr);
    if (why !== undefined) return this.finish({ kind: 'cannotRun', why });
    this.finish({
      kind: 'exited',
      code,
      stdout: out.subarray(0, outMark).toString('utf8'),
      stderr,
    });
  }

  private timeOut(): void {
    const stderr = Buffer.concat(this.stderr).toString('utf8');
    this.finish({ kind: 'timedOut', stderr });
    this.kill();
  }

  private died(why: string): void {
    this.dead = true;
    this.finish(this.unstartedOrLost(why));
  }

  private unstartedOrLost(why: string): HelperResult {
    const what = `the command helper /bin/sh (pid ${this.pid ?? 'none'}) ${why}`;
    return this.startError === undefined
      ? { kind: 'lost', why: what }
      : { kind: 'unstarted', why: what };
  }

  private finish(result: HelperResult): void {
    const pending = this.pending;
    if (pending === undefined) return;
    this.pending = undefined;
    clearTimeout(pending.timer);
    pending.resolve(result);
  }
}

/**
 * A pool of helpers: started when first needed, at most `size`, each replaced when it
 * dies. `run` never rejects; what went wrong is in the result.
 */
export class CommandHelpers {
  private readonly idle: CommandHelper[] = [];
  private readonly all = new Set<CommandHelper>();
  private readonly waiting: (() => void)[] = [];
  private readonly onExit = () => this.killAll();
  private stopped = false;

  constructor(private readonly opts: CommandHelperOptions) {
    process.on('exit', this.onExit);
  }

  async run(cmd: string, args: readonly string[], timeoutMs: number): Promise<HelperResult> {
    if (this.stopped) return { kind: 'unstarted', why: 'the command helpers were stopped' };
    const helper = await this.acquire();
    try {
      return await helper.exec(cmd, args, timeoutMs);
    } finally {
      this.release(helper);
    }
  }

  /** The PIDs of the helpers alive now (for tests and for a reader of `ps`). */
  pids(): number[] {
    return [...this.all].flatMap((h) => (h.dead || h.pid === undefined ? [] : [h.pid]));
  }

  /**
   * Ends every helper: end of input first (an idle sh exits at once), then SIGKILL by PID
   * for one that has not exited within `graceMs` (a running command is cut off).
   */
  async stop(graceMs = 1_000): Promise<void> {
    this.stopped = true;
    process.off('exit', this.onExit);
    const exits = [...this.all].map((helper) => {
      if (helper.dead) return Promise.resolve();
      const exited = new Promise<void>((resolve) => helper.child.once('exit', () => resolve()));
      helper.child.stdin!.end();
      const timer = setTimeout(() => helper.kill(), graceMs);
      return exited.finally(() => clearTimeout(timer));
    });
    await Promise.all(exits);
    this.all.clear();
    this.idle.length = 0;
  }

  private async acquire(): Promise<CommandHelper> {
    for (;;) {
      const ready = this.idle.pop();
      if (ready !== undefined && !ready.dead) return ready;
      if (ready !== undefined) {
        this.all.delete(ready);
        continue;
      }
      if (this.all.size < this.opts.size) {
        const helper = new CommandHelper(this.opts);
        this.all.add(helper);
        return helper;
      }
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
  }

  private release(helper: CommandHelper): void {
    if (helper.dead) this.all.delete(helper);
    else this.idle.push(helper);
    this.waiting.shift()?.();
  }

  private killAll(): void {
    for (const helper of this.all) helper.kill();
  }
}
