#!/usr/bin/env node
// Runs every test file in one node:test run (one summary for CI). As root with unshare,
// the whole run happens inside a private mount namespace, so host tests (*.host.test.ts)
// mount for real without touching the machine's mount table; elsewhere they skip.
import { spawnSync } from 'node:child_process';
import { readdirSync, readlinkSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const tiers = (process.env.VOLE_TEST_TIERS ?? 'unit,scenario,cluster,host,browser').split(',');

function collect(dir, out = []) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) collect(path, out);
    else if (/\.test\.ts$/.test(name)) out.push(relative(root, path));
  }
  return out;
}

const files = collect(join(root, 'test'))
  .filter((f) => tiers.some((tier) => f.endsWith(`.${tier}.test.ts`)))
  .sort();
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}

const nodeArgs = ['--import', 'tsx', '--test', '--test-concurrency=2', ...files];
const isRoot = process.getuid?.() === 0;
const hasUnshare = spawnSync('unshare', ['--help'], { stdio: 'ignore' }).status === 0;
const [cmd, args] =
  isRoot && hasUnshare
    ? ['unshare', ['-m', '--propagation', 'private', process.execPath, ...nodeArgs]]
    : [process.execPath, nodeArgs];
if (!(isRoot && hasUnshare)) console.error('not root or no unshare: host tests will skip');
const result = spawnSync(cmd, args, {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, VOLE_OUTER_MOUNT_NS: readlinkSync('/proc/self/ns/mnt') },
});
process.exit(result.status ?? 1);
