/**
 * The disk's floor under the durable pod-ready figure (scripts/bench/commit-floor.ts): a run's
 * commits, as the log reported them (how long, how many events), are written again alone
 * to a fresh log grouped the same way, and the floor is a quantile of every pod + commit sum.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import {
  type CommitRecord,
  floorQuantile,
  recordCommits,
  replayCommitsMs,
} from '../../scripts/bench/commit-floor.js';
import { eventCodec, type NewEvent, type VoleEvent } from '../../src/events/index.js';
import { GroupCommitter } from '../../src/log/group-commit.js';
import { openLog } from '../../src/log/store.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-commit-floor-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const ready = (tsMs: number): NewEvent => ({ type: 'SourcesReady', tsMs });

test('the floor is the quantile of every pod + commit sum', () => {
  assert.equal(floorQuantile([1, 2], [10, 20], 0.5), 12, 'sums 11, 12, 21, 22');
  assert.equal(floorQuantile([1, 2], [10, 20], 0.99), 22);
  assert.equal(floorQuantile([1, 2, 3, 4], [0], 0.75), 3);
  assert.ok(Number.isNaN(floorQuantile([], [1], 0.99)), 'no pods: no floor');
});

test("a run's commits are replayed with the events each wrote, after the skipped ones", async () => {
  const path = join(dir, 'run.db');
  const store = openLog<VoleEvent>(path, { codec: eventCodec, mode: 'create' });
  const committer = new GroupCommitter<VoleEvent>(store, { checkpoint: false });
  const commits: CommitRecord[] = [];
  committer.onCommitted(recordCommits(commits));
  const groups = [3, 1, 2, 4];
  let tsMs = 0;
  for (const size of groups) {
    for (let i = 0; i < size; i++) committer.push(ready(++tsMs));
    await committer.whenDurable();
  }
  committer.close();
  store.close();
  assert.deepEqual(
    commits.map((commit) => commit.events),
    groups,
    'each commit reports how many events it wrote',
  );
  assert.ok(commits.every((commit) => commit.ms > 0));

  const replayedMs = await replayCommitsMs(path, commits, { skip: 1, gapMs: 1, dir, max: 2 });
  assert.equal(replayedMs.length, 2, 'at most `max` commits, after the skipped one');
  assert.ok(replayedMs.every((ms) => ms > 0));
  await assert.rejects(
    replayCommitsMs(path, [...commits, { ms: 1, events: 5 }], { skip: 0, gapMs: 1, dir, max: 9 }),
    /fewer events than its commits wrote/,
  );
});
