/**
 * WAL checkpoints off the commit path: the writer's SQLite autocheckpoint is only a large
 * backstop, so no commit some operation waits on also copies the WAL into the database
 * file; the group committer checkpoints once one is due and nothing has been pushed for
 * its idle time, and leaves buffered events alone.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { GroupCommitter } from '../../src/log/group-commit.js';
import { openLog } from '../../src/log/store.js';
import { type TestEvent, testEventCodec } from '../support/test-events.js';

const codec = testEventCodec;
// About 1 KiB each, so that a few thousand fill more WAL pages than SQLite's default.
const added = (i: number): Omit<TestEvent, 'seq'> => ({
  type: 'PodAdded',
  tsMs: 0,
  uid: `pod-${i}-${'x'.repeat(1_000)}`,
});

const dir = mkdtempSync(join(tmpdir(), 'vole-checkpoint-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const sleepMs = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The WAL's frames, read without checkpointing (a second connection's wal_checkpoint would). */
function walBytes(path: string): number {
  return statSync(`${path}-wal`).size;
}

test('a writer leaves the WAL to the group committer: SQLite checkpoints only past 10,000 pages', () => {
  const path = join(dir, 'backstop.db');
  const store = openLog<TestEvent>(path, { codec, mode: 'create' });
  const committer = new GroupCommitter(store, { checkpoint: false });
  // 3,000 commits of ~1 KiB: well over SQLite's default 1,000 pages, under the backstop.
  for (let i = 0; i < 3_000; i++) {
    committer.push(added(i));
    committer.flush();
  }
  const pageBytes = 4_096;
  assert.ok(
    walBytes(path) > 1_000 * pageBytes,
    `the WAL (${walBytes(path)} bytes) was checkpointed inside a commit`,
  );
  const db = new Database(path, { readonly: true });
  assert.equal(
    db.pragma('wal_autocheckpoint', { simple: true }),
    1_000,
    'a reader keeps the default',
  );
  db.close();
  const { walFrames, checkpointedFrames } = store.checkpoint();
  assert.ok(walFrames > 1_000, `${walFrames} frames`);
  assert.equal(checkpointedFrames, walFrames, 'a checkpoint with no reader copies every frame');
  assert.equal(committer.close(), 0);
});

test('group commit: a due checkpoint waits for the writer to be idle, then restarts the WAL', async () => {
  const path = join(dir, 'idle.db');
  const store = openLog<TestEvent>(path, { codec, mode: 'create' });
  const policy = { afterCommits: 10, afterEvents: 1_000_000, idleMs: 100 };
  const committer = new GroupCommitter(store, { checkpoint: policy });
  let seq = 0;
  for (let i = 0; i < 9; i++) {
    committer.push(added(seq++));
    committer.flush();
  }
  await sleepMs(150);
  assert.equal(committer.checkpointCount, 0, 'not due after 9 commits');
  committer.push(added(seq++));
  committer.flush();
  // Due now, but pushes every 5 ms keep the writer busy: no checkpoint among them.
  for (let i = 0; i < 12; i++) {
    await sleepMs(5);
    committer.push(added(seq++));
  }
  assert.equal(committer.checkpointCount, 0, 'checkpointed while events kept arriving');
  const buffered = committer.pendingCount;
  await sleepMs(300);
  assert.equal(committer.checkpointCount, 1, 'idle for longer than idleMs: one checkpoint');
  // The buffered events were not committed by it (their lazy commit did that, or not yet).
  assert.ok(buffered > 0);
  const { walFrames, checkpointedFrames } = store.checkpoint();
  assert.equal(checkpointedFrames, walFrames);
  // After the checkpoint the next commit starts the WAL over: it does not grow.
  const before = walBytes(path);
  for (let i = 0; i < 5; i++) {
    committer.push(added(seq++));
    committer.flush();
  }
  assert.equal(walBytes(path), before, 'the WAL was restarted, not appended to');
  assert.equal(committer.close(), 0);
  const reopened = openLog<TestEvent>(path, { codec, mode: 'readonly' });
  assert.equal(reopened.head().seq, seq, 'every event is in the log');
  reopened.close();
});

test('group commit: closing cancels a due checkpoint', async () => {
  const path = join(dir, 'closed.db');
  const store = openLog<TestEvent>(path, { codec, mode: 'create' });
  const committer = new GroupCommitter(store, {
    checkpoint: { afterCommits: 1, afterEvents: 1, idleMs: 20 },
  });
  committer.push(added(0));
  committer.flush();
  committer.close();
  await sleepMs(40);
  assert.equal(committer.checkpointCount, 0);
});
