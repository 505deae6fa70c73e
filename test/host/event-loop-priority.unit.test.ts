/**
 * The event loop thread's priority (src/host/event-loop-priority.ts): set on that thread
 * alone, V8's background threads left at the process's; a refusal said, not thrown.
 * Each case runs in a child process of its own, so the test runner keeps its priority.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseNice } from '../../src/host/event-loop-priority.js';

const moduleUrl = new URL('../../src/host/event-loop-priority.ts', import.meta.url).href;
const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Sets `nice` in a child (as `uid` when given) and answers the outcome and its threads' nice. */
function inChild(nice: number, uid?: number) {
  const script = `
    import { readdirSync, readFileSync } from 'node:fs';
    const { setEventLoopNice } = await import(${JSON.stringify(moduleUrl)});
    const outcome = setEventLoopNice(${nice});
    const threads = readdirSync('/proc/self/task').map((tid) => {
      const stat = readFileSync('/proc/self/task/' + tid + '/stat', 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return { tid: Number(tid), nice: Number(fields[16]) };
    });
    console.log(JSON.stringify({ outcome, pid: process.pid, threads }));
  `;
  const child = spawnSync(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', script],
    {
      cwd: repo,
      encoding: 'utf8',
      ...(uid === undefined ? {} : { uid, gid: uid }),
    },
  );
  assert.equal(child.status, 0, child.stderr);
  return JSON.parse(child.stdout) as {
    outcome: { nice: number; refused?: string };
    pid: number;
    threads: { tid: number; nice: number }[];
  };
}

const linux = process.platform === 'linux';
const root = process.getuid?.() === 0;

describe('the event loop thread priority', () => {
  it('is set on the event loop thread alone', { skip: !linux && 'Linux only' }, () => {
    const { outcome, pid, threads } = inChild(7);
    assert.deepEqual(outcome, { nice: 7 });
    const main = threads.find((t) => t.tid === pid);
    assert.equal(main?.nice, 7);
    const others = threads.filter((t) => t.tid !== pid);
    assert.ok(others.length >= 4, `V8 and libuv threads: ${JSON.stringify(threads)}`);
    assert.ok(
      others.every((t) => t.nice === 0),
      `the other threads keep the process's priority: ${JSON.stringify(threads)}`,
    );
  });

  it('is raised as root', { skip: (!linux || !root) && 'needs root on Linux' }, () => {
    const { outcome, pid, threads } = inChild(-10);
    assert.deepEqual(outcome, { nice: -10 });
    assert.equal(threads.find((t) => t.tid === pid)?.nice, -10);
  });

  it(
    'says why when the process may not raise it',
    { skip: (!linux || !root) && 'needs root to run as another user' },
    () => {
      const { outcome } = inChild(-10, 65534);
      assert.equal(outcome.nice, 0);
      assert.match(
        outcome.refused ?? '',
        /^EACCES: .*needs root or CAP_SYS_NICE.*--event-loop-nice 0/,
      );
    },
  );

  it('takes an integer from -20 to 19 on the command line', () => {
    assert.equal(parseNice('-10'), -10);
    assert.equal(parseNice('19'), 19);
    for (const bad of ['-21', '20', '1.5', 'high', ''])
      assert.throws(() => parseNice(bad), /--event-loop-nice .*: say an integer from -20/);
  });
});
