/**
 * The AtomicWriter on a temporary directory: the `..data` symlink names a timestamped
 * directory, user-visible names are symlinks through it, the same payload twice writes
 * nothing, a new one swaps `..data` once and removes the old directory and the names no
 * longer there, and paths that would leave the volume are refused before anything is written.
 */
import assert from 'node:assert/strict';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { type Payload, writeAtomically } from '../../src/host/atomic-writer.js';

const payload = (files: Record<string, string>, mode = 0o644): Payload =>
  new Map(Object.entries(files).map(([path, text]) => [path, { data: Buffer.from(text), mode }]));
const opts = { nowMs: Date.UTC(2026, 10, 25, 10, 0, 0), fsGroup: null };

test('atomic writer: write, no-op on the same payload, swap on a new one', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'vole-atomic-'));
  try {
    assert.equal(await writeAtomically(dir, payload({ a: '1', 'sub/b': '2' }, 0o600), opts), true);
    const first = readlinkSync(join(dir, '..data'));
    assert.match(first, /^\.\.2026_11_25_10_00_00\.\d{1,10}$/); // os.MkdirTemp's name
    assert.equal(readlinkSync(join(dir, 'a')), '..data/a');
    assert.equal(readlinkSync(join(dir, 'sub')), '..data/sub');
    assert.equal(readFileSync(join(dir, 'sub/b'), 'utf8'), '2');
    assert.equal(statSync(join(dir, 'a')).mode & 0o777, 0o600);
    assert.equal(await writeAtomically(dir, payload({ a: '1', 'sub/b': '2' }, 0o600), opts), false);
    assert.equal(readlinkSync(join(dir, '..data')), first, 'the same payload: nothing swapped');
    assert.equal(await writeAtomically(dir, payload({ a: 'one', c: '3' }), opts), true);
    assert.notEqual(readlinkSync(join(dir, '..data')), first);
    assert.equal(existsSync(join(dir, first)), false, 'the old directory is removed');
    assert.equal(existsSync(join(dir, 'sub')), false, 'a name no longer there is removed');
    assert.equal(readFileSync(join(dir, 'a'), 'utf8'), 'one');
    assert.deepEqual(
      readdirSync(dir)
        .filter((n) => !n.startsWith('..'))
        .sort(),
      ['a', 'c'],
    );
    assert.equal(readdirSync(dir).filter((n) => n.startsWith('..2026')).length, 1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('atomic writer: paths that would leave the volume are refused, nothing written', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'vole-atomic-'));
  try {
    for (const bad of ['../escape', '/etc/passwd', 'a/../../b', '..hidden', 'a//b', '']) {
      await assert.rejects(writeAtomically(dir, payload({ [bad]: 'x' }), opts), /file path/, bad);
    }
    assert.deepEqual(readdirSync(dir), []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
