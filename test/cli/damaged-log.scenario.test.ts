/**
 * A log damaged where a restart does not read (the snapshot and its tail are sound), met
 * by `vole run` on a real file: the whole-file check runs in the background, and until it
 * passes nothing is written to the log and nothing is done on the host. So on damage the
 * agent exits 2 with the advice (salvage, import, restore), the file and its WAL keep
 * every byte, and an orphan it would have cleaned up stays where it is. The same start on
 * an undamaged copy removes the orphan: the test can tell the two apart.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { vole } from '../support/agent-process.js';
import {
  damageMiddlePage,
  damageRightmostLeaf,
  fingerprint,
  logWithSnapshot,
} from '../support/damaged-log.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-damaged-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** An orphan as a fresh log leaves it: the volume directory of a pod no log knows. */
function rootWithOrphan(name: string): { root: string; orphan: string } {
  const root = join(dir, `${name}-root`);
  const orphan = join(root, 'pods/uid-stray/volumes/kubernetes.io~empty-dir/data');
  mkdirSync(orphan, { recursive: true });
  writeFileSync(join(orphan, 'file'), 'stray');
  return { root, orphan };
}

const manifests = join(dir, 'manifests');
mkdirSync(manifests, { recursive: true });
const run = (db: string, root: string) =>
  vole('run', '--manifests', manifests, '--root', root, '--db', db, '--once', '--timeout', '30');

/** `vole run` on the damaged `db`: what the tests assert of each kind of damage. */
function assertRefusedUntouched(db: string, name: string): void {
  const before = fingerprint(db);
  const { root, orphan } = rootWithOrphan(name);
  const r = run(db, root);
  assert.equal(r.status, 2, `exit 2: ${r.stdout}\n${r.stderr}`);
  // The damage was found by the whole-file check, after the start read the snapshot.
  assert.match(r.stdout, /vole agent on node-1: .*\(seq \d+\)/, `the agent started: ${r.stderr}`);
  assert.match(r.stderr, /is damaged \(SQLite's quick_check.*\); nothing was written to it/s);
  assert.match(
    r.stderr,
    /vole export --salvage --db .* --out OUT`, then `vole import OUT --db NEW`, or restore it from a backup/,
  );
  assert.doesNotMatch(r.stderr, /\n\s+at .+\(.+:\d+:\d+\)/, 'no stack trace');
  assert.deepEqual(fingerprint(db), before, 'the log and its WAL keep every byte');
  assert.equal(readFileSync(join(orphan, 'file'), 'utf8'), 'stray', 'the orphan is untouched');
  assert.doesNotMatch(r.stdout, /orphans: \d+ found/);
}

const soundTitle = 'run: on a sound log with a snapshot, the agent cleans up the orphan (control)';
test(soundTitle, { timeout: 120_000 }, async () => {
  const db = await logWithSnapshot(dir, 'sound', 3_000);
  const { root, orphan } = rootWithOrphan('sound');
  const r = run(db, root);
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /orphans: 1 found, 1 removed/);
  assert.equal(existsSync(orphan), false);
});

const middleTitle =
  'run: 4 KiB of a middle page of the events table overwritten: exit 2 with the advice, ' +
  'the file unchanged, the orphan left';
test(middleTitle, { timeout: 120_000 }, async () => {
  const db = await logWithSnapshot(dir, 'middle', 3_000);
  damageMiddlePage(db);
  assertRefusedUntouched(db, 'middle');
});

const rightmostTitle =
  'run: the rightmost leaf of the events table damaged below its last row: exit 2 with the ' +
  'advice, the file unchanged, the orphan left';
test(rightmostTitle, { timeout: 120_000 }, async () => {
  const db = await logWithSnapshot(dir, 'rightmost', 3_000);
  damageRightmostLeaf(db);
  assertRefusedUntouched(db, 'rightmost');
});
