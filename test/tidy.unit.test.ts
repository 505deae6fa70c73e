/**
 * A ratchet on the rules DESIGN.md states (in the spirit of TigerBeetle's tidy.zig): the
 * pure core does no I/O, reads no clock and draws no randomness, and modules import only
 * downward (machines, events → world and the controller's core (with the operation book
 * and call table) → plan → engine → execute → plugins/host → agent/controller → cli/inspect).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';

const root = join(import.meta.dirname, '..');

function files(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) return files(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

const pure = [
  'machines',
  'src/events',
  'src/world',
  'src/plan',
  'src/controller/fold.ts',
  'src/controller/plan.ts',
  'src/controller/types.ts',
  'src/controller/invariants.ts',
  'src/engine/book.ts',
  'src/engine/calls.ts',
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
  ['src/world/', 1],
  // The operation book and the call table both folds share, and the controller's core.
  ['src/engine/book.ts', 1],
  ['src/engine/calls.ts', 1],
  ['src/controller/types.ts', 1],
  ['src/controller/fold.ts', 1],
  ['src/controller/invariants.ts', 1],
  ['src/plan/', 2],
  ['src/controller/plan.ts', 2],
  // The engine (Engine, Core, the cores by mode) sits on the cores, under the executors.
  ['src/engine/', 2.5],
  ['src/execute/', 3],
  ['src/log/', 3],
  ['src/plugins/', 4],
  ['src/host/', 4],
  ['src/csi/', 4],
  ['src/sources/', 4],
  ['src/postmortem/', 4],
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
