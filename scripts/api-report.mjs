#!/usr/bin/env node
// The package's public surface, entry by entry: API Extractor's report of each entry point
// (etc/*.api.md) and the reference pages api-documenter writes from the doc comments
// (docs/api/). `node scripts/api-report.mjs` writes both; `--check` writes them to a
// temporary folder, compares them with the committed ones, prints the differences and
// exits 1 when there are any (test/package/api-report.unit.test.ts runs it).
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const root = join(import.meta.dirname, '..');
const require = createRequire(import.meta.url);
const { Extractor, ExtractorConfig } = require('@microsoft/api-extractor');
const check = process.argv.includes('--check');

/** Each entry of package.json `exports`, its declarations and its report's name. */
const entries = [
  { subpath: '.', dts: 'src/index.d.ts', name: 'vole' },
  { subpath: './csi', dts: 'src/entry/csi.d.ts', name: 'csi' },
  { subpath: './testing', dts: 'src/entry/testing.d.ts', name: 'testing' },
  { subpath: './core', dts: 'src/entry/core.d.ts', name: 'core' },
  { subpath: './metrics', dts: 'src/entry/metrics.d.ts', name: 'metrics' },
];
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const exported = Object.keys(pkg.exports).filter((k) => k !== './package.json');
const listed = entries.map((e) => e.subpath);
if (exported.join() !== listed.join()) {
  console.error(
    `package.json exports ${exported.join(' ')}; ${import.meta.filename} lists ${listed.join(' ')}: make them the same`,
  );
  process.exit(1);
}

const work = mkdtempSync(join(tmpdir(), 'vole-api-'));
try {
  // Declarations only, from the sources (dist/ may be stale or absent).
  execFileSync(
    process.execPath,
    [
      join(dirname(require.resolve('typescript/package.json')), 'bin', 'tsc'),
      '-p',
      'tsconfig.build.json',
      '--outDir',
      join(work, 'dts'),
      '--emitDeclarationOnly',
      '--sourceMap',
      'false',
    ],
    { cwd: root, stdio: 'inherit' },
  );
  const out = check ? join(work, 'out') : root;
  for (const entry of entries) extract(entry, out);
  writeIndex(out);
  if (!check) process.exit(0);
  const changed = ['etc', 'docs/api'].filter((dir) => {
    const diff = spawnSync('diff', ['-ruN', join(root, dir), join(out, dir)], { encoding: 'utf8' });
    if (diff.status === 0) return false;
    process.stdout.write(diff.stdout.replaceAll(`${out}/`, 'new/').replaceAll(`${root}/`, ''));
    return true;
  });
  if (changed.length > 0) {
    console.error(
      `the public API differs from ${changed.join(' and ')}: if the change is meant, run \`node scripts/api-report.mjs\` and commit ${changed.join(' and ')}`,
    );
    process.exit(1);
  }
  console.log(`the public API matches etc/ and docs/api/ (${entries.length} entry points)`);
} finally {
  rmSync(work, { recursive: true, force: true });
}

/** One entry's report into `out`/etc and its reference pages into `out`/docs/api/<name>. */
function extract(entry, out) {
  const model = join(work, 'model', entry.name);
  mkdirSync(model, { recursive: true });
  mkdirSync(join(out, 'etc'), { recursive: true });
  const config = ExtractorConfig.prepare({
    configObjectFullPath: join(root, 'api-extractor.json'),
    packageJsonFullPath: join(root, 'package.json'),
    configObject: {
      projectFolder: root,
      mainEntryPointFilePath: join(work, 'dts', entry.dts),
      compiler: {
        overrideTsconfig: {
          compilerOptions: {
            target: 'ES2022',
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            strict: true,
            skipLibCheck: true,
            types: ['node'],
            typeRoots: [join(root, 'node_modules/@types')],
            lib: ['ES2022'],
          },
          files: [join(work, 'dts', entry.dts)],
        },
      },
      apiReport: {
        enabled: true,
        reportFileName: `${entry.name}.api.md`,
        reportFolder: join(out, 'etc'),
        reportTempFolder: join(work, 'report'),
      },
      docModel: { enabled: true, apiJsonFilePath: join(model, `${entry.name}.api.json`) },
      dtsRollup: { enabled: false },
      tsdocMetadata: { enabled: false },
      messages: {
        compilerMessageReporting: { default: { logLevel: 'warning' } },
        // Internal types a public signature names stay internal: the report shows the name.
        extractorMessageReporting: {
          default: { logLevel: 'none', addToApiReportFile: false },
        },
        tsdocMessageReporting: { default: { logLevel: 'none', addToApiReportFile: false } },
      },
    },
  });
  const result = Extractor.invoke(config, {
    localBuild: true,
    showVerboseMessages: false,
    // Its notices (the TypeScript it bundles, a report written): the diff says what matters.
    messageCallback: (message) => {
      if (message.messageId.startsWith('console-')) message.handled = true;
    },
  });
  if (!result.succeeded)
    throw new Error(`API Extractor failed on ${entry.dts} (${result.errorCount} errors)`);
  const pages = join(out, 'docs', 'api', entry.name);
  rmSync(pages, { recursive: true, force: true });
  execFileSync(
    process.execPath,
    [
      join(
        dirname(require.resolve('@microsoft/api-documenter/package.json')),
        'bin',
        'api-documenter',
      ),
      'markdown',
      '-i',
      model,
      '-o',
      pages,
    ],
    { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] },
  );
}

/** docs/api/README.md: one line per entry point, linking its page. */
function writeIndex(out) {
  const lines = entries.map((entry) => {
    const specifier = entry.subpath === '.' ? 'vole' : `vole/${entry.subpath.slice(2)}`;
    // The entry module's first paragraph, to its first sentence's end.
    const source = readFileSync(join(root, entry.dts.replace(/\.d\.ts$/, '.ts')), 'utf8');
    const paragraph = source.match(/^\/\*\*\n([\s\S]*?)\n \*\n/)?.[1] ?? '';
    const text = paragraph
      .replace(/^ \* /gm, '')
      .replace(/\n/g, ' ')
      .replace(/^`[^`]+`: /, '');
    return `- [\`${specifier}\`](${entry.name}/vole.md): ${text.split(/(?<=\.) /)[0]}`;
  });
  const text = [
    '# API reference',
    '',
    '<!-- Generated by scripts/api-report.mjs from the doc comments; do not edit. -->',
    '',
    'The entry points of the package (package.json `exports`), each with the names it exports:',
    '',
    ...lines,
    '',
    "etc/ holds API Extractor's report of each: the surface test/package/api-report.unit.test.ts",
    'holds the package to.',
    '',
  ].join('\n');
  writeFileSync(join(out, 'docs', 'api', 'README.md'), text);
}
