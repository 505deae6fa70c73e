/**
 * A damaged log on a real host: an orphan pod volume with a real mount on it (tmpfs), which
 * an agent on a sound log unmounts and removes. On a log damaged where the restart does not
 * read, `vole run` finds the damage with the whole-file check before it acts: exit 2 with
 * the advice, the mount and its data where they were, the log's bytes unchanged.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { vole } from '../support/agent-process.js';
import { damageMiddlePage, fingerprint, logWithSnapshot } from '../support/damaged-log.js';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';

const skip = hostTestSkipReason();
const { base } = skip === false ? hostSandbox('damaged') : { base: '' };

const mountPoints = () =>
  spawnSync('findmnt', ['-rn', '-o', 'TARGET'], { encoding: 'utf8' }).stdout.split('\n');

/** An orphan pod volume with a tmpfs mounted on it, holding a file. */
function mountedOrphan(name: string): { root: string; orphan: string } {
  const root = join(base, `${name}-root`);
  const orphan = join(root, 'pods/uid-stray/volumes/kubernetes.io~empty-dir/data');
  mkdirSync(orphan, { recursive: true });
  assert.equal(spawnSync('mount', ['-t', 'tmpfs', 'tmpfs', orphan]).status, 0);
  writeFileSync(join(orphan, 'file'), 'stray');
  return { root, orphan };
}

const run = (db: string, root: string) => {
  const manifests = join(base, 'manifests');
  mkdirSync(manifests, { recursive: true });
  const args = ['--manifests', manifests, '--root', root, '--db', db, '--once'];
  return vole('run', ...args, '--timeout', '30');
};

const title =
  'host: a damaged log leaves a mounted orphan mounted (exit 2, the log unchanged); ' +
  'a sound one cleans it up';
test(title, { skip, timeout: 180_000 }, async () => {
  const sound = await logWithSnapshot(base, 'sound', 3_000);
  const kept = mountedOrphan('sound');
  const cleaned = run(sound, kept.root);
  assert.equal(cleaned.status, 0, `${cleaned.stdout}\n${cleaned.stderr}`);
  assert.match(cleaned.stdout, /orphans: 1 found, 1 removed/);
  assert.ok(!mountPoints().includes(kept.orphan), 'on a sound log the orphan is unmounted');
  assert.equal(existsSync(kept.orphan), false);

  const db = await logWithSnapshot(base, 'damaged', 3_000);
  damageMiddlePage(db);
  const before = fingerprint(db);
  const { root, orphan } = mountedOrphan('damaged');
  const r = run(db, root);
  assert.equal(r.status, 2, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stderr, /is damaged \(SQLite's quick_check.*\); nothing was written to it/s);
  assert.match(r.stderr, /vole export --salvage .*vole import OUT --db NEW.*restore it/s);
  assert.ok(mountPoints().includes(orphan), 'the orphan is still mounted');
  assert.equal(readFileSync(join(orphan, 'file'), 'utf8'), 'stray');
  assert.deepEqual(fingerprint(db), before, 'the log and its WAL keep every byte');
});
