import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

const root = join(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'vole-cli-'));
const db = join(dir, 'sim.db');
after(() => rmSync(dir, { recursive: true, force: true }));

function vole(...args: string[]) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
    cwd: root,
    encoding: 'utf8',
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

before(() => {
  const r = vole('simulate', 'test/scenarios/kubelet-attach-mount.yaml', '--db', db);
  assert.equal(r.status, 0, r.stderr);
});

test('cli: replay --at shows the world at that moment, as JSON', () => {
  const r = vole('replay', '--db', db, '--at', '+2s', '--json');
  assert.equal(r.status, 0, r.stderr);
  const view = JSON.parse(r.stdout);
  assert.deepEqual(
    view.attachments.map((a: { volume: string; state: string }) => `${a.volume} ${a.state}`),
    [
      'fake.disk/disk-1 attached.deviceMounting',
      'fake.disk/uid-a-scratch attached.deviceUnmounted', // the inline volume: verified, nothing to mount
    ],
  );
  assert.deepEqual(
    view.operations.map((o: { op: string; call: string }) => `${o.op}:${o.call}`),
    ['mount:mountDevice'],
  );
});

test('cli: verify exits 0 on a log the engine wrote; export then import gives an equal log', () => {
  assert.equal(vole('verify', '--db', db).status, 0);
  const jsonl = join(dir, 'export.jsonl');
  assert.equal(vole('export', '--db', db, '--out', jsonl).status, 0);
  const copy = join(dir, 'copy.db');
  assert.equal(vole('import', jsonl, '--db', copy).status, 0);
  assert.equal(vole('export', '--db', copy).stdout, vole('export', '--db', db).stdout);
  const again = vole('import', jsonl, '--db', copy);
  assert.equal(again.status, 2);
  assert.match(again.stderr, /already|exists/);
});

test('cli: diff and history name what changed', () => {
  const diff = vole('diff', '--db', db, '+0s', '+4s');
  assert.equal(diff.status, 0);
  assert.match(diff.stdout, /changes/);
  const history = vole('history', '--db', db, '--pod', 'uid-a');
  assert.match(history.stdout, /fake\.disk\/disk-1 × pod uid-a {2}unmounted → mounting/);
});

test('cli: a missing, foreign or non-SQLite database gets a clear error and exit 2', () => {
  const missing = vole('replay', '--db', join(dir, 'nope.db'));
  assert.equal(missing.status, 2);
  assert.match(missing.stderr, /does not exist/);
  const text = join(dir, 'notes.txt');
  writeFileSync(text, 'these are my notes, not a database '.repeat(10));
  const notDb = vole('verify', '--db', text);
  assert.equal(notDb.status, 2);
  assert.match(notDb.stderr, /not a vole log/);
  const explainBad = vole('explain', '--db', db, 'twelve');
  assert.equal(explainBad.status, 2);
  assert.match(explainBad.stderr, /takes a seq/);
});
