/**
 * The CLI's readers on a controller log, and on a log whose mode this version does not
 * know: each command folds with the core the log's EngineStarted names, or refuses.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { eventCodec, type VoleEvent } from '../../src/events/index.js';
import { openLog } from '../../src/log/store.js';
import { vole } from '../support/agent-process.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-modes-'));
const db = join(dir, 'controller.db');
after(() => rmSync(dir, { recursive: true, force: true }));

before(() => {
  const r = vole('simulate', 'test/scenarios/controller-multi-attach.yaml', '--db', db);
  assert.equal(r.status, 0, r.stderr);
});

test('cli: verify, status and replay read a controller log with the controller core', () => {
  const verified = vole('verify', '--db', db);
  assert.equal(verified.status, 0, verified.stdout);
  assert.match(verified.stdout, /^ok: 23 events, 3 decisions re-planned, .* 0 divergences$/m);
  const status = vole('status', '--db', db);
  assert.equal(status.status, 0, status.stderr);
  assert.match(status.stdout, /the attach\/detach controller/);
  assert.match(status.stdout, /fake\.disk\/disk-1@node-2 {2}attached\.deviceUnmounted/);
  assert.doesNotMatch(status.stdout, /disk-1@node-1/);
  assert.match(status.stdout, /node-2 {2}ready {2}volumesAttached \[fake\.disk\/disk-1\]/);
  const early = JSON.parse(vole('replay', '--db', db, '--at', '10', '--json').stdout);
  assert.equal(early.mode, 'controller');
  assert.deepEqual(
    early.nodes.map((n: { node: string; volumesAttached: { name: string }[] }) => [
      n.node,
      n.volumesAttached.map((v) => v.name),
    ]),
    [
      ['node-1', ['fake.disk/disk-1']],
      ['node-2', []],
    ],
  );
});

test('cli: a log whose mode this version does not know is refused by readers and by import', () => {
  const jsonl = join(dir, 'export.jsonl');
  assert.equal(vole('export', '--db', db, '--out', jsonl).status, 0);
  const lines = readFileSync(jsonl, 'utf8').split('\n');
  const first = JSON.parse(lines[0]!) as VoleEvent;
  assert.equal(first.type, 'EngineStarted');
  lines[0] = JSON.stringify({ ...first, mode: 'scheduler' });
  const foreign = join(dir, 'foreign.jsonl');
  writeFileSync(foreign, lines.join('\n'));
  const imported = vole('import', foreign, '--db', join(dir, 'imported.db'));
  assert.equal(imported.status, 2);
  assert.match(imported.stderr, /mode "scheduler", which this version of vole does not know/);
  // A log another program wrote with such a mode: every reader refuses it, no stack trace.
  const other = join(dir, 'other.db');
  const store = openLog<VoleEvent>(other, { codec: eventCodec, mode: 'create' });
  const { seq: _seq, ...event } = { ...first, mode: 'scheduler' };
  store.append([event], { expectedSeq: 0 });
  store.close();
  for (const command of ['status', 'verify', 'history', 'export']) {
    const r = vole(command, '--db', other);
    assert.equal(r.status, 2, command);
    assert.match(r.stderr, /^vole: .*other\.db: this log was written in mode "scheduler"/, command);
    assert.doesNotMatch(r.stderr, /\n\s+at /, command);
  }
  const inspect = vole('inspect', '--db', other, '--port', '0');
  assert.equal(inspect.status, 2);
  assert.match(inspect.stderr, /^vole: .*other\.db: this log was written in mode "scheduler"/);
});
