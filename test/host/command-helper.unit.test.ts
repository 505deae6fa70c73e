/**
 * The command helpers (src/host/command-helper.ts): long-lived `sh` processes that run host
 * commands for the agent. Hostile words stay text, exit status and stderr come back byte for
 * byte, a dead or stuck helper fails its one command and is replaced, several commands run
 * at once, and every helper ends by its PID or at the end of its input.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CommandHelpers, type HelperResult } from '../../src/host/command-helper.js';
import { resultOf, run } from '../../src/host/exec.js';
import { HostError } from '../../src/host/errors.js';
import { until } from '../support/host.js';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const scratch = mkdtempSync(join(tmpdir(), 'vole-helper-'));
const pools: CommandHelpers[] = [];
after(async () => {
  await Promise.all(pools.map((p) => p.stop()));
  rmSync(scratch, { recursive: true, force: true });
});

function pool(size: number, outputBytesMax = 1024 * 1024): CommandHelpers {
  const made = new CommandHelpers({ size, outputBytesMax });
  pools.push(made);
  return made;
}

/** Whether a process is gone (or a zombie waiting for whoever adopted it). */
function gone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

/** The PIDs of a process's children (it runs a command when it has one). */
function childrenOf(pid: number): number[] {
  const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  return text === '' ? [] : text.split(' ').map(Number);
}

function exited(result: HelperResult) {
  assert.equal(result.kind, 'exited', JSON.stringify(result));
  return result as Extract<HelperResult, { kind: 'exited' }>;
}

describe('command helpers', () => {
  it('pass hostile words as text: no injection, the same bytes back', async () => {
    const words = [
      'a b',
      `'; touch ${scratch}/quote; '`,
      `$(touch ${scratch}/subst)`,
      `\`touch ${scratch}/tick\``,
      '../../etc/passwd',
      'line one\nline two',
      '"double" and \\backslash',
      '-n',
      '',
    ];
    const r = exited(await pool(1).run('printf', ['%s|', ...words], 10_000));
    assert.equal(r.stdout, words.map((w) => `${w}|`).join(''));
    assert.equal(r.code, 0);
    for (const planted of ['quote', 'subst', 'tick'])
      assert.equal(existsSync(join(scratch, planted)), false, `${planted} was not created`);
  });

  it('report the exit status, stderr and stdout exactly, a forged report line as text', async () => {
    const script = 'printf "out\\n0 0\\nno newline"; printf "err one\\nerr two" >&2; exit 7';
    const r = exited(await pool(1).run('sh', ['-c', script], 10_000));
    assert.deepEqual(r, {
      kind: 'exited',
      code: 7,
      stdout: 'out\n0 0\nno newline',
      stderr: 'err one\nerr two',
    });
  });

  it('say a command is not installed, and run() makes that a final HostError', async () => {
    assert.deepEqual(await pool(1).run('vole-no-such-command', ['x'], 10_000), {
      kind: 'notFound',
    });
    await assert.rejects(run('vole-no-such-command', ['--', '/x']), (error: unknown) => {
      assert.ok(error instanceof HostError);
      assert.equal(error.kind, 'final');
      assert.match(error.message, /^vole-no-such-command -- \/x could not run .*; install /);
      return true;
    });
  });

  it('say a command that cannot be executed could not run: a final HostError', async () => {
    // There and executable, but its interpreter is missing: the shell's exec fails (127).
    const shim = join(scratch, 'no-interpreter');
    writeFileSync(shim, '#!/nonexistent/interpreter\n');
    chmodSync(shim, 0o755);
    const result = await pool(1).run(shim, [], 10_000);
    assert.equal(result.kind, 'cannotRun');
    await assert.rejects(run(shim, ['x']), (error: unknown) => {
      assert.ok(error instanceof HostError);
      assert.equal(error.kind, 'final');
      assert.match(error.message, /could not run \(.*exec: .*no-interpreter: not found\)/);
      return true;
    });
    // A command's own 127, with its own words, stays its exit status.
    const own = await run('sh', ['-c', 'echo "helper: nothing to do" >&2; exit 127']);
    assert.deepEqual(own, { stdout: '', stderr: 'helper: nothing to do\n', code: 127 });
  });

  it('run() keeps the non-zero exit a value and its stderr for the caller', async () => {
    const r = await run('sh', ['-c', 'echo "mount: /x: target is busy." >&2; exit 32']);
    assert.deepEqual(r, { stdout: '', stderr: 'mount: /x: target is busy.\n', code: 32 });
    await assert.rejects(run('printf', ['a\0b']), /NUL byte/);
  });

  it('fail the one command whose helper dies, and start a new helper for the next', async () => {
    const helpers = pool(1);
    const running = helpers.run('sleep', ['30'], 60_000);
    await until(() => helpers.pids().length === 1, 'the helper to start', 10_000);
    const [pid] = helpers.pids() as [number];
    await until(() => childrenOf(pid).length > 0, 'the helper to run sleep', 10_000);
    process.kill(pid, 'SIGKILL');
    const result = await running;
    assert.equal(result.kind, 'lost');
    assert.match(
      (result as { why: string }).why,
      new RegExp(`^the command helper /bin/sh \\(pid ${pid}\\) was killed by SIGKILL$`),
    );
    process.kill(-pid, 'SIGKILL'); // the orphaned sleep, in the dead helper's group
    const next = exited(await helpers.run('printf', ['again'], 10_000));
    assert.equal(next.stdout, 'again');
    assert.notDeepEqual(helpers.pids(), [pid]);
    assert.throws(
      () => resultOf('umount', 'umount -- /x', 1000, result),
      (error: unknown) =>
        error instanceof HostError &&
        error.kind === 'uncertain' &&
        /^umount -- \/x did not finish: the command helper .* it may have taken effect/.test(
          error.message,
        ),
    );
  });

  it('kill a command past its timeout with its helper, by the group PID', async () => {
    const helpers = pool(1);
    const started = Date.now();
    const running = helpers.run('sleep', ['30'], 300);
    await until(() => helpers.pids().length === 1, 'the helper to start', 10_000);
    const [pid] = helpers.pids() as [number];
    assert.equal((await running).kind, 'timedOut');
    assert.ok(Date.now() - started < 20_000, 'the timeout, not sleep, ended it');
    await until(() => gone(pid), 'the timed-out helper to end', 10_000);
    assert.equal(exited(await helpers.run('true', [], 10_000)).code, 0);
  });

  it('run commands at once: one waits for what another writes', async () => {
    const fifo = join(scratch, 'fifo');
    assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
    const helpers = pool(2);
    // In one helper this would wait for good: the reader holds it, the writer never runs.
    const [reader, writer] = await Promise.all([
      helpers.run('cat', [fifo], 20_000),
      helpers.run('sh', ['-c', `echo through > "$1"`, 'sh', fifo], 20_000),
    ]);
    assert.equal(exited(reader).stdout, 'through\n');
    assert.equal(exited(writer).code, 0);
    assert.equal(helpers.pids().length, 2);
  });

  it('queue commands beyond the pool size on the same helpers', async () => {
    const helpers = pool(2);
    const results = await Promise.all(
      Array.from({ length: 9 }, (_, i) => helpers.run('printf', [String(i)], 10_000)),
    );
    assert.deepEqual(
      results.map((r) => exited(r).stdout),
      Array.from({ length: 9 }, (_, i) => String(i)),
    );
    assert.equal(helpers.pids().length, 2);
  });

  it('kill a command that prints more than its limit', async () => {
    const result = await pool(1, 4096).run('head', ['-c', '100000', '/dev/zero'], 10_000);
    assert.equal(result.kind, 'lost');
    assert.match((result as { why: string }).why, /printed more than 4096 bytes/);
  });

  it('end every helper by its PID on stop', async () => {
    const helpers = new CommandHelpers({ size: 3, outputBytesMax: 1024 });
    await Promise.all([1, 2, 3].map(() => helpers.run('true', [], 10_000)));
    const pids = helpers.pids();
    assert.equal(pids.length, 3);
    await helpers.stop();
    assert.ok(pids.every(gone), `helpers ${pids} ended`);
    assert.equal((await helpers.run('true', [], 1000)).kind, 'unstarted');
  });

  it('end by themselves when the agent is SIGKILLed (end of their input)', async () => {
    const moduleUrl = new URL('../../src/host/command-helper.ts', import.meta.url).href;
    const script = `
      const { CommandHelpers } = await import(${JSON.stringify(moduleUrl)});
      const helpers = new CommandHelpers({ size: 1, outputBytesMax: 1024 });
      await helpers.run('true', [], 10000);
      console.log(helpers.pids()[0]);
      setInterval(() => {}, 1000);
    `;
    const agent = spawn(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      {
        cwd: repo,
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let out = '';
    agent.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    await until(() => /^\d+\n/.test(out), 'the agent to name its helper', 30_000);
    const helperPid = Number(out.trim());
    assert.equal(gone(helperPid), false);
    const agentExited = new Promise((resolve) => agent.once('exit', resolve));
    agent.kill('SIGKILL');
    await agentExited;
    await until(() => gone(helperPid), 'the orphaned helper to end', 10_000);
  });
});
