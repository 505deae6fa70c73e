/**
 * The whole tree is formatted as the project's Prettier settings say (.prettierrc.json:
 * printWidth 100, single quotes, trailing commas). `npm run format` writes it; this test runs
 * `prettier --check` over the same files and lists the ones that differ.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

const root = join(import.meta.dirname, '..');
const prettier = join(root, 'node_modules/prettier/bin/prettier.cjs');

/** The file patterns of `npm run format`: the quoted arguments of its script. */
function formatPatterns(): string[] {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const script = pkg.scripts['format'];
  assert.ok(
    script !== undefined && script.startsWith('prettier --write '),
    'package.json has a format script',
  );
  return [...script.matchAll(/"([^"]+)"/g)].map((m) => m[1]!);
}

function check(args: string[], input?: string) {
  assert.ok(existsSync(prettier), `${prettier} is installed (npm ci)`);
  return spawnSync(process.execPath, [prettier, '--check', ...args], {
    cwd: root,
    encoding: 'utf8',
    input,
  });
}

test('format: npm run format covers src, test, scripts, machines, examples and root json', () => {
  const patterns = formatPatterns();
  const tree = patterns.find((p) => p.startsWith('{'));
  assert.ok(tree, `a pattern over the folders: ${patterns.join(' ')}`);
  for (const folder of ['src', 'test', 'scripts', 'machines', 'examples']) {
    assert.ok(
      tree.startsWith('{') && tree.split('}')[0]!.includes(folder),
      `${tree} has ${folder}`,
    );
  }
  for (const ext of ['ts', 'js', 'mjs', 'json']) {
    assert.match(tree, new RegExp(`[{,]${ext}[,}]`), `${tree} has .${ext} files`);
  }
  assert.ok(patterns.includes('*.json'), 'the root json files (package.json, tsconfig*.json)');
});

test('format: prettier reads the project settings: 100 columns, single quotes', () => {
  const fits = `export const x = ['${'a'.repeat(34)}', '${'b'.repeat(34)}'];\n`;
  assert.equal(fits.length, 95);
  assert.equal(check(['--stdin-filepath', 'src/control.ts'], fits).status, 0, 'fits in 100');
  const tooWide = fits.replace("'a", "'aaaaaaaaaa");
  assert.equal(check(['--stdin-filepath', 'src/control.ts'], tooWide).status, 1, 'over 100');
  const doubleQuoted = fits.replaceAll("'", '"');
  assert.equal(check(['--stdin-filepath', 'src/control.ts'], doubleQuoted).status, 1, 'quotes');
});

test('format: every file of the tree is formatted (npm run format writes them)', () => {
  const result = check(formatPatterns());
  const said = `${result.stdout}\n${result.stderr}`.split('\n');
  const unformatted = said
    .filter((l) => l.startsWith('[warn] ') && !l.includes('Code style issues'))
    .map((l) => l.slice('[warn] '.length));
  const errors = said.filter((l) => l.startsWith('[error]'));
  assert.deepEqual(errors, [], 'prettier reads every file');
  assert.deepEqual(
    unformatted,
    [],
    `${unformatted.length} file(s) not formatted as .prettierrc.json says; run npm run format`,
  );
  assert.equal(result.status, 0, result.stderr);
});
