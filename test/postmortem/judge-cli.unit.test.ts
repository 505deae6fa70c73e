/**
 * `vole judge --db` and `vole why POD --db` on a cluster's log imported from JSON Lines:
 * exit 0 on a clean history, 1 on a planted violation, 2 on a kubelet's log; `vole why`
 * names the Multi-Attach that held the moved pod, with the events that prove it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { toJsonLines } from '../../src/postmortem/index.js';
import type { Verdict } from '../../src/postmortem/index.js';
import { vole } from '../support/agent-process.js';
import { at, Log, nodeKilled } from '../support/recorded-log.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-judge-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** The log as a database, through vole import. */
function imported(name: string, log: Log): string {
  const file = join(dir, `${name}.jsonl`);
  writeFileSync(file, [...toJsonLines(log.events)].join(''));
  const db = join(dir, `${name}.db`);
  const result = vole('import', file, '--db', db);
  assert.equal(result.status, 0, result.stderr);
  return db;
}

test('vole judge: a clean history exits 0, and vole why names the Multi-Attach that held the pod', () => {
  const log = new Log();
  const seqs = nodeKilled(log);
  const db = imported('clean', log);
  const text = vole('judge', '--db', db);
  assert.equal(text.status, 0, text.stderr);
  assert.match(text.stdout, /^ok: no safety rule broken$/m);
  const json = vole('judge', '--db', db, '--json');
  const verdict = JSON.parse(json.stdout) as Verdict;
  assert.deepEqual(verdict.violations, []);
  assert.deepEqual(
    verdict.forcedDetaches.map((f) => [f.volume, f.node, f.atSeq]),
    [['pvc-1', 'node-a', seqs.forced]],
  );

  const why = vole('why', 'default/web-2', '--db', db, '--json');
  assert.equal(why.status, 0, why.stderr);
  const answer = JSON.parse(why.stdout) as { waits: Verdict['pods'] };
  assert.equal(answer.waits.length, 1);
  assert.equal(answer.waits[0]!.held.kind, 'multiAttach');
  assert.deepEqual(answer.waits[0]!.held.proofSeqs, [seqs.attached, seqs.notReady, seqs.evicted]);
  assert.equal(answer.waits[0]!.held.clearsAtMs, at('12:08:40'));
  // At a moment of the wait, the answer is the wait so far: still open.
  const during = vole('why', 'web-2', '--db', db, '--at', String(seqs.moved + 1), '--json');
  const open = JSON.parse(during.stdout) as { waits: Verdict['pods'] };
  assert.equal(open.waits[0]!.endedBy, null);
  assert.equal(open.waits[0]!.held.kind, 'multiAttach');
  const words = vole('why', 'web-2', '--db', db);
  assert.match(
    words.stdout,
    /held by multiAttach \(data\): Multi-Attach: pvc-1 is attached to node-a/,
  );
});

test('vole judge: a VolumeAttachment patched onto a second node exits 1 and names it', () => {
  const log = new Log();
  nodeKilled(log);
  const planted = log.va(at('12:09:00'), 'csi-planted', 'pvc-1', 'node-a', { attached: true });
  const db = imported('planted', log);
  const result = vole('judge', '--db', db, '--json');
  assert.equal(result.status, 1, result.stderr);
  const verdict = JSON.parse(result.stdout) as Verdict;
  assert.deepEqual(
    verdict.violations.map((v) => [v.rule, v.nodes, v.atSeq]),
    [['multiAttach', ['node-b', 'node-a'], planted]],
  );
  assert.match(vole('judge', '--db', db).stdout, /^BROKEN: 1 safety violation/m);
});

test("vole judge: a kubelet's log is refused with what to run instead", () => {
  const log = new Log();
  log.add(0, {
    type: 'EngineStarted',
    node: 'node-1',
    controllerAttachDetach: true,
    plugins: [],
    version: 'test',
  });
  const result = vole('judge', '--db', imported('kubelet', log));
  assert.equal(result.status, 2);
  assert.match(result.stderr, /kubelet's log.*vole verify/s);
});

test('the walk-through log examples/recorded/node-killed.jsonl is the node-killed history built here', () => {
  const shipped = readFileSync(
    join(import.meta.dirname, '../../examples/recorded/node-killed.jsonl'),
    'utf8',
  );
  const log = new Log();
  nodeKilled(log);
  assert.equal(shipped, [...toJsonLines(log.events)].join(''));
});
