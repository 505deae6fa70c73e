/**
 * The group committer encodes events ahead: in a microtask after the turn that pushed
 * them, so a commit a later turn waits on writes rows made already. What is written is
 * what `append` would write, in order; a codec's refusal still throws at the commit, with
 * the buffer kept.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { GroupCommitter } from '../../src/log/group-commit.js';
import { openLog } from '../../src/log/store.js';
import { type TestEvent, testEventCodec } from '../support/test-events.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-encode-ahead-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const added = (uid: string): Omit<TestEvent, 'seq'> => ({ type: 'PodAdded', tsMs: 0, uid });
const microtask = () => new Promise<void>((resolve) => queueMicrotask(resolve));

/** A committer on a new log, counting the store's encodings while a commit runs or not. */
function committerOn(name: string) {
  const store = openLog<TestEvent>(join(dir, `${name}.db`), {
    codec: testEventCodec,
    mode: 'create',
  });
  const counts = { ahead: 0, inCommit: 0 };
  let committing = false;
  const encode = store.encode.bind(store);
  store.encode = (event, seq) => {
    if (committing) counts.inCommit++;
    else counts.ahead++;
    return encode(event, seq);
  };
  const committer = new GroupCommitter(store, { checkpoint: false });
  const flush = () => {
    committing = true;
    try {
      committer.flush();
    } finally {
      committing = false;
    }
  };
  return { store, committer, counts, flush };
}

test('events are encoded after the turn that pushed them, not in the commit a later turn waits on', async () => {
  const { store, committer, counts, flush } = committerOn('ahead');
  committer.push(added('a'));
  committer.push(added('b'));
  assert.deepEqual(counts, { ahead: 0, inCommit: 0 }, 'nothing encoded inside the turn');
  await microtask();
  assert.deepEqual(counts, { ahead: 2, inCommit: 0 }, 'both encoded after it');
  committer.push(added('c'));
  flush(); // a commit in the same turn encodes what the turn pushed
  assert.deepEqual(counts, { ahead: 2, inCommit: 1 });
  assert.deepEqual(
    [...store.read()].map((e) => [e.seq, e.type === 'PodAdded' ? e.uid : e.type]),
    [
      [1, 'a'],
      [2, 'b'],
      [3, 'c'],
    ],
  );
  await microtask();
  assert.deepEqual(counts, { ahead: 2, inCommit: 1 }, 'a committed event is not encoded again');
  committer.close();
});

test("a codec's refusal is thrown by the commit, the buffer kept; events after it are written once it goes", async () => {
  const { store, committer, flush } = committerOn('refused');
  committer.push(added('a'));
  committer.push({ type: 'PodAdded', tsMs: 1.5, uid: 'bad' } as Omit<TestEvent, 'seq'>);
  await microtask(); // encoding ahead stops at the refused event, quietly
  assert.throws(() => flush(), /tsMs 1\.5/);
  assert.equal(committer.pendingCount, 2, 'the buffer is kept');
  assert.equal(store.head().seq, 0, 'nothing written');
  store.close(); // the refused event stays buffered: the committer's close would throw it again
});
