/**
 * The packed package, as npm would publish it: it holds what a user runs and nothing else,
 * the package linters of the ecosystem (publint, Are the Types Wrong?) pass on the
 * tarball, and an empty TypeScript project (strict, NodeNext) that installs it compiles and
 * runs the CSI example agent (examples/csi-agent.ts) on `vole/testing`'s scripted driver.
 * consumer.host.test.ts runs the same agent against the installed `vole csi-driver`.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { consumerProject, pack, type Packed, runBin } from '../support/consumer.js';

const base = mkdtempSync(join(tmpdir(), 'vole-consumer-'));
after(() => rmSync(base, { recursive: true, force: true }));
let packed: Packed;
before(() => {
  packed = pack(base);
});

test('the tarball holds the library, the CLI, the machines, the inspector page and the .proto files; no tests, no scripts', (t) => {
  const { files } = packed;
  t.diagnostic(`${files.length} files in ${packed.tarball}`);
  for (const file of [
    'package.json',
    'README.md',
    'dist/src/index.js',
    'dist/src/index.d.ts',
    'dist/src/entry/csi.js',
    'dist/src/cli/main.js',
    'dist/machines/index.js',
    'dist/inspector/app.js',
    'src/csi/csi.proto',
    'src/csi/registration.proto',
  ])
    assert.ok(files.includes(file), `the tarball holds ${file}`);
  const unwanted = files.filter(
    (f) =>
      /\.test\.|\.map$/.test(f) ||
      /^(test|scripts|examples|docs|etc|deploy|dist\/test|dist\/scripts)\//.test(f) ||
      (f.startsWith('src/') && !f.endsWith('.proto')),
  );
  assert.deepEqual(unwanted, [], 'files a user does not run');
});

test('publint and Are the Types Wrong? pass on the tarball', (t) => {
  const publint = runBin('publint/src/cli.js', ['run', packed.tarball, '--strict'], base);
  t.diagnostic(`publint: ${publint.trim()}`);
  // ESM only ("type": "module", no require condition): attw's esm-only profile.
  const attw = runBin(
    '@arethetypeswrong/cli/dist/index.js',
    [
      packed.tarball,
      '--profile',
      'esm-only',
      '--format',
      'table-flipped',
      '--no-color',
      '--no-emoji',
    ],
    base,
  );
  t.diagnostic(`attw:\n${attw.trim()}`);
  // attw exits 1 on a problem (runBin throws then); each entry resolves, with its types,
  // from an ES module under Node's rules and a bundler's.
  for (const entry of ['vole', 'vole/csi', 'vole/testing', 'vole/core', 'vole/metrics'])
    assert.match(attw, new RegExp(`│ "${entry}"\\s+│ OK \\(ESM\\)\\s+│ OK\\s+│`), entry);
});

test('an empty strict NodeNext project installs the tarball, type-checks the CSI agent and every entry, and runs the agent on the scripted driver', (t) => {
  const project = join(base, 'project');
  const { tsc } = consumerProject(project, packed.tarball);
  t.diagnostic(`tsc: ${tsc.trim()}`);
  // The SQLite driver's types are a build tool's: installing the package does not bring
  // them, and every entry's declarations type-check without them.
  assert.ok(!existsSync(join(project, 'node_modules', '@types', 'better-sqlite3')));
  assert.match(tsc, /entries\.js/);
  const out = execFileSync(process.execPath, ['agent.js', 'fake', join(project, 'root')], {
    cwd: project,
    encoding: 'utf8',
    timeout: 60_000,
  });
  t.diagnostic(`agent:\n${out.trim()}`);
  assert.match(out, /mounted: \[ 'data' \]/);
  assert.match(out, /in use: \[\]/);
});
