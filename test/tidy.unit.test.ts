/**
 * A ratchet on the rules docs/design.md and docs/style.md state (in the spirit of TigerBeetle's
 * tidy.zig): the pure core does no I/O, reads no clock and draws no randomness; every
 * folder has a layer and modules import only downward (machines, events → operations →
 * world → plan and the controller's core → plugins → engine → execute, log → agent →
 * cluster, kube → sim → cli, inspect: docs/layout.md), never in a circle of modules or of
 * folders; no function is over 70 lines, no
 * file in src/ over 600 and no class there over 20 public methods; nothing in src/ is cast
 * to never; every declared dependency is used.
 */
import assert from 'node:assert/strict';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import {
  classSurfaces,
  folderGraph,
  functionLengths,
  importCycles,
  importGraph,
  neverCasts,
  packageImports,
  tsFiles,
} from './support/source-tree.js';
import { coreLayerMax, layerOf, layers } from './support/layers.js';

const root = join(import.meta.dirname, '..');

function files(dir: string): string[] {
  return tsFiles(root, dir);
}

const pure = [
  'machines',
  'src/events',
  'src/kubelet',
  'src/operations',
  'src/binding',
  'src/desired',
  // Only the controller's pure core: its executor is in src/execute, its harness in src/sim.
  'src/controller',
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

/** The imports of `graph` that go up a layer, and the files no layer holds. */
function layerOffences(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const offences: string[] = [];
  for (const [file, targets] of graph) {
    const own = layerOf(file);
    if (own === undefined) offences.push(`${file} is in no layer`);
    for (const target of targets) {
      const theirs = layerOf(target);
      if (theirs === undefined) offences.push(`${file} imports ${target}, in no layer`);
      else if (own !== undefined && theirs > own) {
        offences.push(`${file} (layer ${own}) imports ${target} (layer ${theirs})`);
      }
    }
  }
  return offences;
}

const sourceGraph = () => importGraph(root, [...files('machines'), ...files('src')]);

test('tidy: every folder of src/ has a layer', () => {
  const folders = [...folderGraph(sourceGraph()).keys()];
  assert.ok(folders.length > 20, `the folders were found (${folders.length})`);
  const prefixes = new Set(layers.map(([prefix]) => prefix));
  const missing = folders.filter((f) => !prefixes.has(f.endsWith('.ts') ? f : `${f}/`));
  assert.deepEqual(missing, [], 'give each of these a layer (and a line in docs/layout.md)');
});

test('tidy: every entry of the layer table names a folder or file that exists', () => {
  const stale = layers.filter(([prefix]) => !existsSync(join(root, prefix)));
  assert.deepEqual(stale, [], 'drop these from test/support/layers.ts (and docs/layout.md)');
});

test('tidy: the core modules import only downward', () => {
  const graph = sourceGraph();
  const core = new Map([...graph].filter(([file]) => (layerOf(file) ?? 99) <= coreLayerMax));
  assert.ok(core.size > 40, `the core's files were found (${core.size})`);
  assert.deepEqual(layerOffences(core), []);
});

test('tidy: every module of src/ imports only from its own layer or lower ones', () => {
  assert.deepEqual(layerOffences(sourceGraph()), []);
});

/** The two cores: each a home of its own, what both need kept in the shared layers below. */
const cores = ['src/kubelet/', 'src/controller/'] as const;

/** The imports of `graph` from one core's folder into the other's. */
function crossCoreImports(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const coreOf = (path: string) => cores.find((core) => path.startsWith(core));
  return [...graph].flatMap(([file, targets]) => {
    const own = coreOf(file);
    if (own === undefined) return [];
    return targets
      .filter((target) => coreOf(target) !== undefined && coreOf(target) !== own)
      .map((target) => `${file} imports ${target}`);
  });
}

test('tidy: neither core imports the other (what both need is in operations/, binding/, desired/)', () => {
  assert.deepEqual(
    crossCoreImports(sourceGraph()),
    [],
    'move what both cores need to src/operations, src/binding or src/desired',
  );
  const planted = new Map([
    ['src/controller/operator.ts', ['src/kubelet/plan-operator.ts', 'src/operations/types.ts']],
    ['src/kubelet/fold.ts', ['src/kubelet/types.ts', 'src/binding/claims.ts']],
  ]);
  assert.deepEqual(crossCoreImports(planted), [
    'src/controller/operator.ts imports src/kubelet/plan-operator.ts',
  ]);
});

test('tidy: no folder of src/ imports itself through a circle of folders', () => {
  const cycles = importCycles(folderGraph(sourceGraph()));
  assert.deepEqual(cycles, [], 'break each circle by moving what both sides need below them');
});

test('tidy: the folder and layer checks each fail on a planted circle', () => {
  // No file imports itself through a circle, but kubelet/ and engine/ import each other.
  const planted = new Map([
    ['src/kubelet/fold.ts', ['src/engine/book.ts', 'src/ids.ts']],
    ['src/engine/engine.ts', ['src/kubelet/fold.ts']],
    ['src/engine/book.ts', []],
    ['src/ids.ts', []],
  ]);
  assert.deepEqual(importCycles(planted), []);
  assert.deepEqual(folderGraph(planted).get('src/kubelet'), ['src/engine', 'src/ids.ts']);
  assert.deepEqual(importCycles(folderGraph(planted)), [['src/engine', 'src/kubelet']]);
  assert.deepEqual(layerOffences(planted), [
    'src/kubelet/fold.ts (layer 2) imports src/engine/book.ts (layer 5)',
  ]);
  const strays = new Map([['src/nowhere/x.ts', ['src/elsewhere/y.ts']]]);
  assert.deepEqual(layerOffences(strays), [
    'src/nowhere/x.ts is in no layer',
    'src/nowhere/x.ts imports src/elsewhere/y.ts, in no layer',
  ]);
});

test('tidy: the inspector imports nothing from the command line', () => {
  const offences = [...importGraph(root, files('src/inspect'))].flatMap(([file, targets]) =>
    targets.filter((t) => t.startsWith('src/cli/')).map((t) => `${file} imports ${t}`),
  );
  assert.deepEqual(offences, []);
});

test('tidy: no module of src/ or machines/ imports itself through a circle of imports', () => {
  const cycles = importCycles(sourceGraph());
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

/** The longest a function may be, in lines of code (docs/style.md). */
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

/** The longest a file in src/ may be, in lines (docs/style.md: a file does one job). */
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

/** The serializer port's V8 adapter (src/operations/snapshot-codec.ts is the port). */
const serializerAdapter = 'src/engine/snapshot.ts';
/** Each core's snapshot codec, beside its world. */
const coreCodecs = ['src/kubelet/snapshot-codec.ts', 'src/controller/snapshot-codec.ts'];
/** A snapshot codec built: on the port (`serializer.whole(`, `.sliced(`) or on V8 directly. */
const buildsCodec =
  /\.(whole|sliced)\s*(<[^>()]*>)?\(|\b(structuredCloneCodec|slicedCloneCodec)\s*(<[^>()]*>)?\(/;

/** The files of `paths` that build a core's codec away from its core, or import node:v8. */
function codecOffences(dir: string, paths: readonly string[]): string[] {
  return paths.flatMap((path) => {
    if (path === serializerAdapter) return [];
    const code = readFileSync(join(dir, path), 'utf8')
      .split('\n')
      .filter((l) => !/^\s*(\*|\/\/)/.test(l))
      .join('\n');
    const offences: string[] = [];
    if (/from 'node:v8'/.test(code)) offences.push(`${path} imports node:v8`);
    if (!coreCodecs.includes(path) && buildsCodec.test(code))
      offences.push(`${path} builds a snapshot codec`);
    return offences;
  });
}

test("tidy: each core's snapshot codec sits beside its core, and only the adapter uses V8", () => {
  const paths = files('src');
  assert.deepEqual(
    coreCodecs.filter((path) => !paths.includes(path)),
    [],
    'the cores keep their codecs here (or update coreCodecs and docs/layout.md)',
  );
  assert.deepEqual(
    codecOffences(root, paths),
    [],
    `build a core's codec in ${coreCodecs.join(' or ')} on the WorldSerializer port; only ${serializerAdapter} imports node:v8`,
  );
});

test('tidy: the codec check fails on a planted codec outside its core', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vole-tidy-'));
  try {
    mkdirSync(join(dir, 'src/engine'), { recursive: true });
    mkdirSync(join(dir, 'src/kubelet'), { recursive: true });
    const stray = [
      "import { serialize } from 'node:v8';",
      'export const codec = serializer.whole<World>(8, revive);',
      'export const sliced = slicedCloneCodec(6, fields, revive);',
    ];
    writeFileSync(join(dir, 'src/engine/cores.ts'), stray.join('\n') + '\n');
    writeFileSync(join(dir, coreCodecs[0]!), stray.slice(1, 2).join('\n') + '\n');
    writeFileSync(join(dir, serializerAdapter), stray.join('\n') + '\n');
    assert.deepEqual(
      codecOffences(dir, ['src/engine/cores.ts', coreCodecs[0]!, serializerAdapter]),
      ['src/engine/cores.ts imports node:v8', 'src/engine/cores.ts builds a snapshot codec'],
    );
    writeFileSync(join(dir, 'src/engine/cores.ts'), stray[2]! + '\n');
    assert.deepEqual(codecOffences(dir, ['src/engine/cores.ts']), [
      'src/engine/cores.ts builds a snapshot codec',
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Provisioning's policy: one room, which the folds and planners of both cores call. */
const provisioningRoom = 'src/binding/';
/**
 * A provisioning decision: a binding mode tested, a class's or PV's policy defaulted or
 * tested (a view that shows them copies them: no decision), its allowed topologies read,
 * provisioning's annotations named, a driver's CREATE_DELETE_VOLUME asked, or a
 * provisioned volume told by its name.
 */
const provisioningDecision = new RegExp(
  [
    String.raw`[!=]==\s*'(WaitForFirstConsumer|Immediate)'`,
    String.raw`'(WaitForFirstConsumer|Immediate)'\s*[!=]==`,
    String.raw`\.(volumeBindingMode|persistentVolumeReclaimPolicy)\s*(\?\?|[!=]==)`,
    String.raw`\.allowedTopologies\b`,
    String.raw`'volume\.(beta\.)?kubernetes\.io/(storage-provisioner|selected-node)'`,
    String.raw`'pv\.kubernetes\.io/provisioned-by'`,
    String.raw`csi\?\.createDelete\b`,
    String.raw`\^pvc-`,
  ].join('|'),
);

/** The lines of `paths` outside provisioning's room that decide provisioning. */
function provisioningOffences(dir: string, paths: readonly string[]): string[] {
  return paths
    .filter((path) => !path.startsWith(provisioningRoom))
    .flatMap((path) =>
      readFileSync(join(dir, path), 'utf8')
        .split('\n')
        .flatMap((line, i) =>
          !/^\s*(\*|\/\/)/.test(line) && provisioningDecision.test(line)
            ? [`${path}:${i + 1} ${line.trim()}`]
            : [],
        ),
    );
}

test("tidy: provisioning's policy is decided in its room only (src/binding/)", () => {
  const paths = files('src');
  const room = paths.filter((path) => path.startsWith(provisioningRoom));
  assert.ok(
    room.some((path) => provisioningDecision.test(readFileSync(join(root, path), 'utf8'))),
    'the room holds the decisions the check looks for',
  );
  assert.deepEqual(
    provisioningOffences(root, paths),
    [],
    `decide these in ${provisioningRoom} (provisioning.ts, storage-class.ts, external-provisioning.ts) and call it`,
  );
});

test('tidy: the provisioning check fails on a planted decision outside its room', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vole-tidy-'));
  try {
    mkdirSync(join(dir, 'src/controller'), { recursive: true });
    mkdirSync(join(dir, 'src/binding'), { recursive: true });
    const planted = [
      "if (sc.volumeBindingMode === 'WaitForFirstConsumer') wait();",
      "const policy = pv.spec.persistentVolumeReclaimPolicy ?? 'Delete';",
      "const node = pvc.metadata.annotations?.['volume.kubernetes.io/selected-node'];",
      'if (world.plugins.get(driver)?.csi?.createDelete !== true) return;',
      "if (volume.includes('^pvc-')) look();",
      "// a comment naming 'volume.kubernetes.io/selected-node' decides nothing",
      "const reason = 'WaitForFirstConsumer';",
      'cell(view.volumeBindingMode);',
    ];
    for (const file of ['src/controller/plan.ts', 'src/binding/policy.ts'])
      writeFileSync(join(dir, file), planted.join('\n') + '\n');
    assert.deepEqual(
      provisioningOffences(dir, ['src/controller/plan.ts', 'src/binding/policy.ts']),
      planted.slice(0, 5).map((line, i) => `src/controller/plan.ts:${i + 1} ${line}`),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Where a reader tests the engine's mode or the world's shape instead of asking its core. */
const modeTest =
  /\bmode\s*[!=]==?\s*'(kubelet|controller)'|'(kubelet|controller)'\s*[!=]==?\s*[\w.]*\bmode\b|\bmodeOf\b|'nodes' in\b/;
/** The cores themselves, which know their mode. */
const coreFolders = ['src/engine/', 'src/kubelet/', 'src/controller/'];
function modeTests(dir: string, paths: readonly string[]): string[] {
  return paths.flatMap((path) =>
    readFileSync(join(dir, path), 'utf8')
      .split('\n')
      .flatMap((line, i) => (modeTest.test(line) ? [`${path}:${i + 1} ${line.trim()}`] : [])),
  );
}

test("tidy: no reader outside the cores tests the mode or the world's shape", () => {
  const readers = files('src').filter(
    (path) => !coreFolders.some((folder) => path.startsWith(folder)),
  );
  assert.ok(readers.length > 100, `the files were found (${readers.length})`);
  assert.deepEqual(
    modeTests(root, readers),
    [],
    'ask the core (CoreReader, src/operations/reader.ts)',
  );
});

test('tidy: the mode check fails on a planted reader that tests the mode', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vole-tidy-'));
  try {
    const planted = [
      "if (view.mode === 'controller') printNodes(view);",
      "const where = mode !== 'kubelet' ? '@node' : '';",
      "if ('controller' === logCore.mode) return;",
      "if ('nodes' in world) return world.nodes;",
      "if (opts.mode === 'readonly') open();",
      'const nodes = view.nodes ?? [];',
    ];
    writeFileSync(join(dir, 'reader.ts'), planted.join('\n') + '\n');
    assert.deepEqual(modeTests(dir, ['reader.ts']), [
      `reader.ts:1 ${planted[0]}`,
      `reader.ts:2 ${planted[1]}`,
      `reader.ts:3 ${planted[2]}`,
      `reader.ts:4 ${planted[3]}`,
    ]);
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
  // Tools the tests and scripts run by path (API Extractor, publint, attw) rather than import.
  const toolSources = [
    ...files('test').map((file) => readFileSync(join(root, file), 'utf8')),
    ...readdirSync(join(root, 'scripts'))
      .filter((f) => f.endsWith('.mjs'))
      .map((f) => readFileSync(join(root, 'scripts', f), 'utf8')),
  ].join('\n');
  const runByPath = (name: string) =>
    toolSources.includes(`'${name}/`) || toolSources.includes(`'${name}'`);
  const unused = [
    ...Object.keys(pkg.dependencies).filter((name) => {
      if (bySrc.has(name)) return false;
      // The types of a dependency that vole's own declarations name: its users compile them.
      const typed = name.match(/^@types\/(.+)$/)?.[1];
      return typed === undefined || !(typed in pkg.dependencies);
    }),
    ...Object.keys(pkg.devDependencies).filter((name) => {
      if (byAny.has(name) || runByPath(name)) return false;
      if (name === 'prettier') return !/^prettier /m.test(Object.values(pkg.scripts).join('\n'));
      if (name === 'typescript') return !/\btsc\b/.test(runners);
      if (name === 'tsx') return !/--import', 'tsx'|--import tsx/.test(runners);
      const typed = name.match(/^@types\/(.+)$/)?.[1];
      return typed === undefined || !(typed === 'node' || typed in pkg.dependencies);
    }),
  ];
  assert.deepEqual(unused, [], 'import each of these where it is needed, or remove it');
});
