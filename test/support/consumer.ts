/**
 * The package as a user gets it: `npm pack` of this repository (its `prepare` builds
 * dist/), and an empty TypeScript project (strict, module NodeNext) that installs the
 * tarball and compiles examples/csi-agent.ts against it. The install takes vole's
 * dependencies from npm's cache first (`--prefer-offline`) and runs no install scripts:
 * the example keeps its log in memory, so better-sqlite3's native part is never loaded.
 * No skipLibCheck: vole's declarations must compile with what the package depends on.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const repo = join(import.meta.dirname, '..', '..');

export interface Packed {
  /** The tarball's path. */
  readonly tarball: string;
  /** Every file in it, by its path inside the package. */
  readonly files: readonly string[];
}

/** Packs the repository into `dir`. */
/**
 * Held while a test rebuilds dist/ (npm pack's `prepare`, scripts/demo.sh's build): two
 * builders writing the same files at once could hand a reader a half-written module.
 */
export const distLock = join(repo, 'node_modules', '.vole-dist.lock');

export function pack(dir: string): Packed {
  // npm pack's `prepare` rebuilds dist/, as the demo does: one builder at a time.
  const out = execFileSync(
    'flock',
    [distLock, 'npm', 'pack', '--json', '--pack-destination', dir],
    {
      cwd: repo,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  // `prepare` prints the build's lines before npm's JSON.
  const [packed] = JSON.parse(out.slice(out.indexOf('[\n'))) as {
    filename: string;
    files: { path: string }[];
  }[];
  assert.ok(packed, `npm pack printed no package: ${out}`);
  return { tarball: join(dir, packed.filename), files: packed.files.map((f) => f.path) };
}

/** Runs a program of the repository's node_modules/.bin with node, from `cwd`. */
export function runBin(bin: string, args: string[], cwd: string): string {
  return execFileSync(process.execPath, [join(repo, 'node_modules', bin), ...args], {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/**
 * An empty project in `dir` with the tarball installed and examples/csi-agent.ts compiled
 * to `dir/agent.js` under strict NodeNext rules; returns the compiler's output.
 */
export function consumerProject(dir: string, tarball: string): { tsc: string } {
  // The Node.js types the repository builds with: an agent has its own.
  const manifest = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as {
    devDependencies: Record<string, string>;
  };
  const typesNode = `@types/node@${manifest.devDependencies['@types/node']}`;
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: 'vole-consumer', private: true, type: 'module' }, null, 2),
  );
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify(
      {
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noUncheckedIndexedAccess: true,
          skipLibCheck: false,
          types: ['node'],
          lib: ['ES2022'],
          outDir: '.',
        },
        files: ['agent.ts', 'entries.ts'],
      },
      null,
      2,
    ),
  );
  copyFileSync(join(repo, 'examples', 'csi-agent.ts'), join(dir, 'agent.ts'));
  // Every entry's declarations, checked whole (skipLibCheck off): a declaration that names a
  // dependency's types the package does not depend on fails here.
  writeFileSync(
    join(dir, 'entries.ts'),
    [
      "import * as root from 'vole';",
      "import * as csi from 'vole/csi';",
      "import * as testing from 'vole/testing';",
      "import * as core from 'vole/core';",
      "import * as metrics from 'vole/metrics';",
      'export const entries = [root, csi, testing, core, metrics];',
      '',
    ].join('\n'),
  );
  execFileSync(
    'npm',
    [
      'install',
      '--prefer-offline',
      '--ignore-scripts',
      '--no-audit',
      '--no-fund',
      tarball,
      typesNode,
    ],
    { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const tsc = execFileSync(
    process.execPath,
    [join(repo, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.', '--listEmittedFiles'],
    { cwd: dir, encoding: 'utf8' },
  );
  return { tsc };
}
