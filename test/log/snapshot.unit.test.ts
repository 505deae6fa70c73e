import { kubeletCore } from '../../src/engine/cores.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { readFileSync } from 'node:fs';
import { openSqliteLog } from '../../src/agent/sqlite-log.js';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';
import { decodeWorldSnapshot, encodeWorldSnapshot, worldSnapshotFormat } from '../../src/log/world-snapshot.js';
import { foldAll } from '../../src/world/index.js';
import { assertSameWorld } from '../support/world-equal.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-snap-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const scenario = parseScenario(
  readFileSync(join(import.meta.dirname, '../scenarios/kubelet-attach-mount.yaml'), 'utf8'),
);

test('snapshot: a world encodes and decodes to an equal world at every seq', async () => {
  const log = openSqliteLog(join(dir, 'a.db'), kubeletCore);
  await simulate(scenario, { log });
  const events = [...log.readAll()];
  for (let seq = 0; seq <= events.length; seq += 7) {
    const world = foldAll(events.slice(0, seq));
    const decoded = decodeWorldSnapshot(encodeWorldSnapshot(world), worldSnapshotFormat);
    assert.ok(decoded);
    assertSameWorld(decoded, world, `seq ${seq}`);
    assertSameWorld(
      foldAll(events.slice(seq), decoded),
      foldAll(events),
      `snapshot at ${seq} + tail`,
    );
  }
  log.sink.close();
});

test('snapshot: loading uses the latest snapshot plus the tail, and ignores an unknown format', async () => {
  const path = join(dir, 'b.db');
  const log = openSqliteLog(path, kubeletCore);
  await simulate(scenario, { log });
  const events = [...log.readAll()];
  log.saveSnapshot(foldAll(events.slice(0, 20)));
  log.sink.close();
  const reopened = openSqliteLog(path, kubeletCore);
  assert.equal(reopened.lastSnapshotSeq, 20);
  assertSameWorld(reopened.loadWorld(), foldAll(events), 'snapshot + tail = full fold');
  reopened.store.saveSnapshot({ seq: 30, tsMs: 0, format: 999, data: 'garbage' });
  reopened.sink.close();
  const third = openSqliteLog(path, kubeletCore);
  assertSameWorld(third.loadWorld(), foldAll(events), 'an unusable snapshot is skipped');
  assert.equal(decodeWorldSnapshot(Buffer.from('{not v8'), worldSnapshotFormat), undefined);
  third.sink.close();
});
