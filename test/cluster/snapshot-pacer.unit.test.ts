/** The leader's snapshots into etcd, paced by size: never more bytes of snapshots than of log. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SnapshotPacer } from '../../src/cluster/snapshot-pacer.js';

test("a snapshot is due once the log has grown by the previous snapshot's size since it", () => {
  const pacer = new SnapshotPacer(0);
  assert.equal(
    pacer.due(0),
    true,
    "no snapshot yet: the first one is due at the engine's interval",
  );
  pacer.saved(1_000, 200);
  assert.equal(pacer.due(1_199), false);
  assert.equal(pacer.due(1_200), true);
  pacer.saved(50_000, 1_200);
  assert.equal(pacer.due(40_000), false, 'a larger world waits for more log');
  assert.equal(pacer.due(51_200), true);
});

test('a new leader counts from the snapshot it loaded', () => {
  const pacer = new SnapshotPacer(85 * 2 ** 20);
  assert.equal(
    pacer.due(2.5 * 2 ** 20),
    false,
    '10,000 events of log are not worth an 85 MiB snapshot',
  );
  assert.equal(pacer.due(85 * 2 ** 20), true);
});
