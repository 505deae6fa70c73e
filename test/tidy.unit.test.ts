/**
 * A ratchet on the rules DESIGN.md and STYLE.md state (in the spirit of TigerBeetle's
 * tidy.zig): the pure core does no I/O, reads no clock and draws no randomness; modules
 * import only downward (machines, events → world and the controller's core (with the
 * operation book and call table) → plan → engine → execute → plugins/host →
 * agent/controller → cli/inspect) and never in a circle; no function is over 70 lines, no
 * file in src/ over 600 and no class there over 20 public methods; nothing in src/ is cast
 * to never; every declared dependency is used.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import {
  classSurfaces,
  functionLengths,
  importCycles,
  importGraph,
  neverCasts,
  packageImports,
  tsFiles,
} from './support/source-tree.js';

const root = join(import.meta.dirname, '..');

function files(dir: string): string[] {
  return tsFiles(root, dir);
}

const pure = [
  'machines',
  'src/events',
  'src/world',
  'src/plan',
  'src/controller/fold.ts',
  'src/controller/plan.ts',
  'src/controller/operator.ts',
  'src/controller/types.ts',
  'src/controller/invariants.ts',
  'src/operations',
];
const pureFiles = pure.flatMap((p) => (p.endsWith('.ts') ? [p] : files(p)));

test('tidy: the pure core does no I/O, reads no clock and draws no randomness', () => {
  const offences: string[] = [];
  for (const file of pureFiles) {
    const code = readFileSync(join(root, file), 'utf8')
      .split('\n')
      .filter((l) => !/^\s*(\*|\/\/)/.test(l))
      .join('\n');
    for (const pattern of [
      /Date\.now\(/,
      /new Date\(/,
      /Math\.random\(/,
      /from 'node:/,
      /setTimeout\(|setImmediate\(|setInterval\(/,
      /process\./,
      // immer's frozen results would make the fold's property reads polymorphic (bench: replay).
      /from 'immer'/,
    ]) {
      if (pattern.test(code)) offences.push(`${file}: ${pattern}`);
    }
  }
  assert.deepEqual(offences, []);
  assert.ok(pureFiles.length > 15, 'the pure core was found');
});

/** Layers from the bottom; a file may import from its own layer or lower ones. */
const layers: [string, number][] = [
  ['machines/', 0],
  ['src/ids.ts', 0],
  ['src/assert.ts', 0],
  ['src/constants.ts', 0],
  ['src/events/', 0],
  // The operation book, the call table and the pending operations both folds share.
  ['src/operations/', 0.5],
  ['src/world/', 1],
  // The controller's core.
  ['src/controller/types.ts', 1],
  ['src/controller/fold.ts', 1],
  ['src/controller/invariants.ts', 1],
  ['src/controller/provisioning.ts', 1],
  ['src/plan/', 2],
  ['src/controller/plan.ts', 2],
  ['src/controller/operator.ts', 2],
  ['src/controller/plan-provision.ts', 2],
  // The engine (Engine, Core, the cores by mode) sits on the cores, under the executors.
  ['src/engine/', 2.5],
  ['src/execute/', 3],
  ['src/clock.ts', 3],
  ['src/log/', 3],
  ['src/plugins/', 4],
  ['src/host/', 4],
  ['src/csi/', 4],
  ['src/sources/', 4],
  ['src/postmortem/', 4],
  ['src/metrics/', 5],
  ['src/agent/', 5],
  ['src/controller/', 5],
  ['src/sim/', 6],
  ['src/cli/', 7],
  ['src/inspect/', 7],
  ['src/index.ts', 7],
];

function layerOf(path: string): number | undefined {
  return layers.find(([prefix]) => path.startsWith(prefix))?.[1];
}

test('tidy: the core modules import only downward', () => {
  const offences: string[] = [];
  for (const file of [...files('machines'), ...files('src')]) {
    const own = layerOf(file);
    if (own === undefined || own > 2) continue; // the rule that matters most: the core stays pure
    const code = readFileSync(join(root, file), 'utf8');
    for (const match of code.matchAll(/from '(\.[^']+)'/g)) {
      const target = relative(root, join(root, file, '..', match[1]!)).replace(/\.js$/, '.ts');
      const theirs = layerOf(target);
      if (theirs !== undefined && theirs > own) offences.push(`${file} imports ${target}`);
    }
  }
  assert.deepEqual(offences, []);
});

test('tidy: the inspector imports nothing from the command line', () => {
  const offences = [...importGraph(root, files('src/inspect'))].flatMap(([file, targets]) =>
    targets.filter((t) => t.startsWith('src/cli/')).map((t) => `${file} imports ${t}`),
  );
  assert.deepEqual(offences, []);
});

test('tidy: no module of src/ or machines/ imports itself through a circle of imports', () => {
  const cycles = importCycles(importGraph(root, [...files('machines'), ...files('src')]));
  assert.deepEqual(cycles, [], `break each circle by moving what both sides need below them`);
});

test('tidy: the cycle finder finds a circle of three and ignores a diamond', () => {
  const circle = new Map([
    ['a.ts', ['b.ts']],
    ['b.ts', ['c.ts']],
    ['c.ts', ['a.ts', 'd.ts']],
    ['d.ts', []],
  ]);
  assert.deepEqual(importCycles(circle), [['a.ts', 'b.ts', 'c.ts']]);
  const diamond = new Map([
    ['a.ts', ['b.ts', 'c.ts']],
    ['b.ts', ['d.ts']],
    ['c.ts', ['d.ts']],
    ['d.ts', []],
  ]);
  assert.deepEqual(importCycles(diamond), []);
});

/** The longest a function may be, in lines of code (STYLE.md). */
const functionLinesMax = 70;
test('tidy: no function in src/ or machines/ is over 70 lines of code', () => {
  const measured = functionLengths(
    root,
    (path) => path.startsWith('src/') || path.startsWith('machines/'),
  );
  assert.ok(measured.length > 500, `the functions were found (${measured.length})`);
  const over = measured
    .filter((f) => f.lines > functionLinesMax)
    .map((f) => `${f.where}: ${f.lines} lines`);
  assert.deepEqual(over, [], `split these into functions of at most ${functionLinesMax} lines`);
});

test('tidy: a function counts its lines of code, not its blank lines or comments', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vole-tidy-'));
  try {
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ include: ['*.ts'] }));
    const body = [
      '  // a comment line',
      '',
      '  /* a block',
      '     comment */',
      "  const url = 'http://example.com'; // code with a trailing comment counts",
      '  const text = `',
      '// inside a template: code',
      '`;',
      '  const re = /\\/\\//;',
    ];
    const code = Array.from({ length: 60 }, (_, i) => `  total += ${i};`);
    writeFileSync(
      join(dir, 'sample.ts'),
      [
        'export function sample(): number {',
        '  let total = 0;',
        ...body,
        ...code,
        '  const inner = () => {',
        '    return total;',
        '  };',
        '  return inner() + url.length + text.length + String(re).length;',
        '}',
        'export class Box {',
        '  get size(): number {',
        '    // only a comment',
        '    return 1;',
        '  }',
        '}',
      ].join('\n'),
    );
    const lengths = functionLengths(dir, () => true);
    const byName = new Map(lengths.map((f) => [f.name, f.lines]));
    // 1 + 1 + 1 (url) + 3 (template) + 1 (regex) + 60 + 3 (inner) + 1 + 1 = 72
    assert.equal(byName.get('sample'), 72);
    assert.equal(byName.get('inner'), 3);
    assert.equal(byName.get('size'), 3);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** The longest a file in src/ may be, in lines (STYLE.md: a file does one job). */
const fileLinesMax = 600;
/** The most public methods and accessors a class in src/ may have (split it by its seams). */
const classPublicMembersMax = 20;

/** The files of `paths` (relative to `dir`) over `fileLinesMax` lines, with their length. */
function longFiles(dir: string, paths: readonly string[]): string[] {
  return paths.flatMap((path) => {
    const lines = readFileSync(join(dir, path), 'utf8').replace(/\n$/, '').split('\n').length;
    return lines > fileLinesMax ? [`${path}: ${lines} lines`] : [];
  });
}

/** The classes under `dir/<under>` with over `classPublicMembersMax` public members. */
function wideClasses(dir: string, under: string): string[] {
  return classSurfaces(dir, (path) => path.startsWith(under))
    .filter((c) => c.publicMembers.length > classPublicMembersMax)
    .map((c) => `${c.where}: ${c.publicMembers.length} public methods and accessors`);
}

const inSrc = (path: string) => path.startsWith('src/');

test('tidy: no file in src/ is over 600 lines', () => {
  const paths = files('src');
  assert.ok(paths.length > 100, `the files were found (${paths.length})`);
  assert.deepEqual(longFiles(root, paths), [], `split these by responsibility`);
});

test('tidy: no class in src/ has over 20 public methods and accessors', () => {
  const classes = classSurfaces(root, inSrc);
  assert.ok(classes.length > 30, `the classes were found (${classes.length})`);
  assert.deepEqual(wideClasses(root, 'src/'), [], 'split these by their seams');
});

test('tidy: nothing in src/ is cast to never', () => {
  assert.deepEqual(neverCasts(root, inSrc), [], 'type these (a guard, a brand, a generic)');
});

test('tidy: the file, class and cast checks each fail on a planted violation', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vole-tidy-'));
  try {
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ include: ['*.ts'] }));
    const methods = (count: number, prefix = '') =>
      Array.from({ length: count }, (_, i) => `  ${prefix}m${i}(): void {}`);
    const wide = [
      'export class Wide {',
      ...methods(20),
      '  get size(): number { return 1; }',
      '  set size(_: number) {}',
      '  private hidden(): void {}',
      '  protected inherited(): void {}',
      '  #own(): void {}',
      '  static make(): Wide { return new Wide(); }',
      '}',
      'export class Narrow {',
      ...methods(20),
      '  private hidden(): void {}',
      '  #own(): void {}',
      '}',
      'export const cast = (x: unknown) => [x as never, <never>x, x as string];',
    ];
    const filler = Array.from({ length: fileLinesMax - wide.length + 1 }, (_, i) => `// ${i}`);
    writeFileSync(join(dir, 'long.ts'), [...wide, ...filler].join('\n') + '\n');
    writeFileSync(join(dir, 'short.ts'), filler.slice(1).join('\n'));
    assert.deepEqual(longFiles(dir, ['long.ts', 'short.ts']), [
      `long.ts: ${fileLinesMax + 1} lines`,
    ]);
    // 20 methods, the size accessor pair once and the static one: 22; private ones do not count.
    assert.deepEqual(wideClasses(dir, ''), ['long.ts:1 Wide: 22 public methods and accessors']);
    const narrow = classSurfaces(dir, () => true).find((c) => c.where.endsWith('Narrow'));
    assert.equal(narrow?.publicMembers.length, classPublicMembersMax);
    const casts = neverCasts(dir, () => true);
    assert.deepEqual(
      casts.map((c) => c.replace(/^long\.ts:\d+ /, '')),
      ['x as never', '<never>x'],
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('tidy: every declared dependency is imported (runtime ones by src/)', () => {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
    devDependencies: Record<string, string>;
    scripts: Record<string, string>;
  };
  const importedBy = (dirs: string[]) =>
    new Set(
      dirs.flatMap((dir) =>
        files(dir).flatMap((file) => packageImports(readFileSync(join(root, file), 'utf8'))),
      ),
    );
  const bySrc = importedBy(['src', 'machines']);
  const byAny = importedBy(['src', 'machines', 'test', 'scripts', 'examples']);
  const runners = [
    ...Object.values(pkg.scripts),
    readFileSync(join(root, 'scripts/test.sh'), 'utf8'),
    readFileSync(join(root, 'scripts/run-tests.mjs'), 'utf8'),
  ].join('\n');
  const unused = [
    ...Object.keys(pkg.dependencies).filter((name) => !bySrc.has(name)),
    ...Object.keys(pkg.devDependencies).filter((name) => {
      if (byAny.has(name)) return false;
      if (name === 'prettier') return !/^prettier /m.test(Object.values(pkg.scripts).join('\n'));
      if (name === 'typescript') return !/\btsc\b/.test(runners);
      if (name === 'tsx') return !/--import', 'tsx'|--import tsx/.test(runners);
      const typed = name.match(/^@types\/(.+)$/)?.[1];
      return typed === undefined || !(typed === 'node' || typed in pkg.dependencies);
    }),
  ];
  assert.deepEqual(unused, [], 'import each of these where it is needed, or remove it');
});
