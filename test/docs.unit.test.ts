/**
 * Docs that compile (STYLE.md §15): README.md and every page of docs/. The library examples are
 * the tested examples' regions, and the outputs shown are what the commands print.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { snapshotEveryEvents } from '../src/constants.js';

const root = join(import.meta.dirname, '..');

/** README.md and docs/*.md, by path from the root. */
const pages: ReadonlyMap<string, string> = new Map(
  ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)].map(
    (path) => [path, readFileSync(join(root, path), 'utf8')],
  ),
);

function page(path: string): string {
  const text = pages.get(path);
  assert.ok(text !== undefined, `${path} exists`);
  return text;
}

function region(text: string, name: string): string {
  const match = new RegExp(`// #region ${name}\\n([\\s\\S]*?)// #endregion`).exec(text);
  assert.ok(match, `region ${name} in the example`);
  return match[1]!.trim();
}

function docRegion(path: string, name: string): string {
  const block = new RegExp(
    `<!-- #region ${name}[^>]*-->\\n\`\`\`ts\\n([\\s\\S]*?)\`\`\`\\n<!-- #endregion ${name} -->`,
  ).exec(page(path));
  assert.ok(block, `${name} region in ${path}`);
  return block[1]!.trim();
}

function vole(...args: string[]): string {
  return execFileSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
    cwd: root,
    encoding: 'utf8',
  });
}

test('docs: the library example is the region of examples/library.ts', () => {
  assert.equal(
    docRegion('docs/library.md', 'library'),
    region(readFileSync(join(root, 'examples/library.ts'), 'utf8'), 'library'),
  );
});

test('docs: the library example runs and prints what docs/library.md says', () => {
  const out = execFileSync(process.execPath, ['--import', 'tsx', 'examples/library.ts'], {
    cwd: root,
    encoding: 'utf8',
  });
  assert.match(out, /mounted: \[ 'cache' \]/);
  assert.match(out, /still mounted: \[\]/);
});

test('docs: the simulate example prints what docs/scenarios.md shows', () => {
  const out = vole('simulate', 'examples/scenarios/attach-mount.yaml');
  const shown = /```\n(ok {2}mount an attachable volume[\s\S]*?)```/.exec(page('docs/scenarios.md'));
  assert.ok(shown);
  assert.equal(out, shown[1]);
});

test('docs: the snapshot interval is stated once, and it is the one the agent uses', () => {
  const all = [...pages.values()].join('\n');
  const stated = [...all.matchAll(/([0-9][0-9,]*) events\s+\(`snapshotEveryEvents`\)/g)];
  assert.equal(stated.length, 1, 'the docs name snapshotEveryEvents with its value once');
  assert.equal(Number(stated[0]![1]!.replaceAll(',', '')), snapshotEveryEvents);
  const others = [...all.matchAll(/snapshots?[^.|]*?every [0-9][0-9,]* events/gi)];
  assert.deepEqual(
    others.map((m) => m[0]),
    [],
    'no other sentence gives snapshots an interval',
  );
});

test('docs: the controller example is the region of examples/controller-library.ts and runs', () => {
  const example = readFileSync(join(root, 'examples/controller-library.ts'), 'utf8');
  assert.equal(
    docRegion('docs/library.md', 'controller-library'),
    region(example, 'controller-library'),
  );
  const out = execFileSync(process.execPath, ['--import', 'tsx', 'examples/controller-library.ts'], {
    cwd: root,
    encoding: 'utf8',
  });
  assert.match(out, /name: 'example\.com\/disk\/disk-1'/);
  assert.match(out, /attached: \[\]/);
});

test('docs: the CSI simulate example prints what docs/csi.md shows', () => {
  const out = vole('simulate', 'examples/scenarios/csi-driver.yaml');
  const shown = /```\n(ok {2}a CSI driver answering[\s\S]*?)```/.exec(page('docs/csi.md'));
  assert.ok(shown);
  assert.equal(out, shown[1]);
});

test('docs: the README is a front door of at most 250 lines that links every page of docs/', () => {
  const readme = page('README.md');
  const lineCount = readme.split('\n').length - 1;
  assert.ok(lineCount <= 250, `README.md has ${lineCount} lines, at most 250`);
  for (const path of pages.keys()) {
    if (path === 'README.md') continue;
    assert.ok(readme.includes(`](${path})`), `README.md links ${path}`);
  }
});

test('docs: every relative link between the pages names a file that exists', () => {
  for (const [path, text] of pages) {
    const dir = path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '.';
    for (const [, target] of text.matchAll(/\]\(([^)#:]+)(?:#[^)]*)?\)/g)) {
      const file = join(root, dir, target!);
      assert.doesNotThrow(() => readFileSync(file), `${path} links ${target}, which exists`);
    }
  }
});
