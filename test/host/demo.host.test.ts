/**
 * The README's first command, `scripts/demo.sh`, as a new user meets it:
 * - on a machine without xfsprogs (removed with dpkg in a private mount namespace whose
 *   /usr, /etc and /var are overlays, so the machine keeps its own), the demo installs it
 *   itself and runs to the end;
 * - when the driver cannot run mkfs.xfs (a program whose interpreter is missing bound over
 *   it: the shell's exec of it fails), the demo stops at once with the agent's explanation, not
 *   after a time-out, and leaves no loop device, mount or process behind.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repo } from '../support/agent-process.js';
import { distLock } from '../support/consumer.js';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';

const skip =
  hostTestSkipReason() ||
  (spawnSync('apt-get', ['--version']).status !== 0 && 'the demo installs with apt-get') ||
  (!readFileSync('/proc/filesystems', 'utf8').includes('overlay') && 'no overlayfs');
const mkfsXfs = '/usr/sbin/mkfs.xfs';
const { base } = skip === false ? hostSandbox('demo') : { base: '' };

/** Loop devices whose backing file lies under `dir` (the machine's, not the namespace's). */
function loopsUnder(dir: string): string[] {
  const out = spawnSync('losetup', ['--list', '--noheadings', '-O', 'NAME,BACK-FILE'], {
    encoding: 'utf8',
  }).stdout;
  return out
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter(([, file]) => file !== undefined && file.startsWith(`${dir}/`))
    .map(([name]) => name!);
}

/** Processes whose command line names `dir` (an agent or driver the demo left running). */
function processesNaming(dir: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (cmdline.includes(dir)) found.push(`${pid}: ${cmdline}`);
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** Runs the demo with its root and log under `dir`, inside `prelude` (a shell script). */
function runDemo(dir: string, prelude: string, env: Record<string, string> = {}) {
  const script = `set -e\n${prelude}\nexec bash scripts/demo.sh`;
  // The demo rebuilds dist/ first: under the lock the package tests' `npm pack` takes too.
  const unshare = ['unshare', '-m', '--propagation', 'private', 'bash', '-c', script];
  const run = spawnSync('flock', [distLock, ...unshare], {
    cwd: repo,
    encoding: 'utf8',
    timeout: 600_000,
    env: {
      ...process.env,
      ...env,
      VOLE_DEMO_ROOT: join(dir, 'root'),
      VOLE_DEMO_DB: join(dir, 'demo.db'),
    },
  });
  return { ...run, output: `${run.stdout}\n${run.stderr}` };
}

test('demo: on a machine without xfsprogs it installs it and runs to the end', { skip }, () => {
  const dir = join(base, 'no-xfsprogs');
  const layers = join(dir, 'layers');
  // /usr, /etc and /var as overlays: dpkg's removal and apt-get's install stay in them.
  const prelude = [
    `for d in usr etc var; do`,
    `  mkdir -p ${layers}/$d/upper ${layers}/$d/work`,
    `  mount -t overlay overlay -o lowerdir=/$d,upperdir=${layers}/$d/upper,workdir=${layers}/$d/work /$d`,
    `done`,
    `dpkg -r xfsprogs > /dev/null 2>&1 || true`,
    `if command -v mkfs.xfs; then echo "mkfs.xfs still there" >&2; exit 90; fi`,
  ].join('\n');
  const hadXfsprogs = existsSync(mkfsXfs);
  const run = runDemo(dir, prelude);
  assert.equal(run.status, 0, run.output);
  assert.match(run.stdout, /== installing xfsprogs \(apt-get\)/);
  assert.match(run.stdout, /pod report: every volume mounted/);
  assert.match(run.stdout, /grown: \d+ -> \d+ bytes/);
  assert.match(run.stdout, /0 divergences|no divergence/i);
  assert.deepEqual(loopsUnder(dir), []);
  assert.deepEqual(processesNaming(dir), []);
  assert.equal(existsSync(mkfsXfs), hadXfsprogs, "the machine's own xfsprogs untouched");
});

test(
  'demo: a wait the agent has explained ends with the explanation, and nothing is left',
  { skip: skip || (!existsSync(mkfsXfs) && `no ${mkfsXfs} to stand in for`) },
  () => {
    const dir = join(base, 'mkfs-cannot-run');
    mkdirSync(dir, { recursive: true });
    // Over the real mkfs.xfs (in the demo's namespace only): a program that is there, so the
    // demo's check passes, whose interpreter is missing, so the shell's exec of it fails
    // (127, `exec: mkfs.xfs: not found`): a final error, as for a program not installed.
    const shim = join(dir, 'mkfs.xfs');
    writeFileSync(shim, '#!/nonexistent/interpreter\n');
    chmodSync(shim, 0o755);
    const run = runDemo(dir, `mount --bind ${shim} ${mkfsXfs}`);
    assert.equal(run.status, 1, run.output);
    assert.match(run.output, /mkfs\.xfs .*could not run \(.*exec: mkfs\.xfs: not found\)/);
    assert.match(run.stdout, /nothing left that vole can do without a change outside it/);
    assert.doesNotMatch(run.output, /timed out after|gave up waiting/);
    assert.match(run.stderr, /The demo failed \(exit 1\); it released [1-9]\d* mount\(s\)/);
    assert.deepEqual(loopsUnder(dir), [], 'no loop device left over the demo images');
    assert.deepEqual(processesNaming(dir), [], 'no agent or driver left running');
  },
);
