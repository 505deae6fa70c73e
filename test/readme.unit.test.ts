/** Docs that compile (STYLE.md §15): the README's code is the tested example's region. */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { snapshotEveryEvents } from '../src/constants.js';

const root = join(import.meta.dirname, '..');

function region(text: string, name: string): string {
  const match = new RegExp(`// #region ${name}\\n([\\s\\S]*?)// #endregion`).exec(text);
  assert.ok(match, `region ${name} in the example`);
  return match[1]!.trim();
}

test('readme: the library example in the README is the region of examples/library.ts', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const block =
    /<!-- #region library[^>]*-->\n```ts\n([\s\S]*?)```\n<!-- #endregion library -->/.exec(readme);
  assert.ok(block, 'library region in the README');
  assert.equal(
    block[1]!.trim(),
    region(readFileSync(join(root, 'examples/library.ts'), 'utf8'), 'library'),
  );
});

test('readme: the library example runs and prints what the README says', () => {
  const out = execFileSync(process.execPath, ['--import', 'tsx', 'examples/library.ts'], {
    cwd: root,
    encoding: 'utf8',
  });
  assert.match(out, /mounted: \[ 'cache' \]/);
  assert.match(out, /still mounted: \[\]/);
});

test('readme: the simulate example prints what the README shows', () => {
  const out = execFileSync(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', 'simulate', 'examples/scenarios/attach-mount.yaml'],
    { cwd: root, encoding: 'utf8' },
  );
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const shown = /```\n(ok  mount an attachable volume[\s\S]*?)```/.exec(readme);
  assert.ok(shown);
  assert.equal(out, shown[1]);
});

test('readme: the snapshot interval is stated once, and it is the one the agent uses', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const stated = [...readme.matchAll(/([0-9][0-9,]*) events\s+\(`snapshotEveryEvents`\)/g)];
  assert.equal(stated.length, 1, 'the README names snapshotEveryEvents with its value once');
  assert.equal(Number(stated[0]![1]!.replaceAll(',', '')), snapshotEveryEvents);
  const others = [...readme.matchAll(/snapshots?[^.|]*?every [0-9][0-9,]* events/gi)];
  assert.deepEqual(
    others.map((m) => m[0]),
    [],
    'no other sentence gives snapshots an interval',
  );
});

test('readme: the controller example is the region of examples/controller-library.ts and runs', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const block =
    /<!-- #region controller-library[^>]*-->\n```ts\n([\s\S]*?)```\n<!-- #endregion controller-library -->/.exec(
      readme,
    );
  assert.ok(block, 'controller-library region in the README');
  const example = readFileSync(join(root, 'examples/controller-library.ts'), 'utf8');
  assert.equal(block[1]!.trim(), region(example, 'controller-library'));
  const out = execFileSync(process.execPath, ['--import', 'tsx', 'examples/controller-library.ts'], {
    cwd: root,
    encoding: 'utf8',
  });
  assert.match(out, /name: 'example\.com\/disk\/disk-1'/);
  assert.match(out, /attached: \[\]/);
});

test('readme: the CSI simulate example prints what the README shows', () => {
  const out = execFileSync(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', 'simulate', 'examples/scenarios/csi-driver.yaml'],
    { cwd: root, encoding: 'utf8' },
  );
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const shown = /```\n(ok  a CSI driver answering[\s\S]*?)```/.exec(readme);
  assert.ok(shown);
  assert.equal(out, shown[1]);
});
