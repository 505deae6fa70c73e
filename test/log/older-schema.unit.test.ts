/**
 * A log written by an older schema version (1, before the meta table) is read as it is
 * by readers and migrated by writers, its events untouched; replay and verify agree.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { MemorySink } from '../../src/engine/sink.js';
import { logApplicationId, logSchemaVersion } from '../../src/constants.js';
import { eventCodec, type VoleEvent } from '../../src/events/index.js';
import { openLog } from '../../src/log/store.js';
import { replayTo, verify } from '../../src/postmortem/index.js';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';
import { readFileSync } from 'node:fs';

const dir = mkdtempSync(join(tmpdir(), 'vole-old-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Writes a log exactly as schema version 1 laid it out. */
function writeVersion1(path: string, events: readonly VoleEvent[]): void {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.exec(`CREATE TABLE events (seq INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL);
           CREATE TABLE snapshots (seq INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL, format INTEGER NOT NULL, data BLOB NOT NULL);`);
  const insert = db.prepare('INSERT INTO events (seq, ts_ms, type, data) VALUES (?, ?, ?, ?)');
  db.transaction(() => {
    for (const { seq, tsMs, type, ...rest } of events)
      insert.run(seq, tsMs, type, JSON.stringify(rest));
  })();
  db.pragma(`application_id = ${logApplicationId}`);
  db.pragma('user_version = 1');
  db.close();
}

test('log: a schema 1 log reads as written, and a writer migrates it to the current schema without touching events', async () => {
  const sink = new MemorySink();
  const scenario = parseScenario(
    readFileSync(join(import.meta.dirname, '../scenarios/kubelet-attach-mount.yaml'), 'utf8'),
  );
  await simulate(scenario, { log: { sink, readAll: () => sink.events } });
  const path = join(dir, 'v1.db');
  writeVersion1(path, sink.events);

  const reader = openLog<VoleEvent>(path, { codec: eventCodec, mode: 'readonly' });
  assert.deepEqual([...reader.read()], sink.events, 'read-only: every event as written');
  assert.deepEqual(verify(reader.read()).divergences, []);
  reader.close();
  const raw = new Database(path, { readonly: true });
  assert.equal(raw.pragma('user_version', { simple: true }), 1, 'a reader does not migrate');
  raw.close();

  const writer = openLog<VoleEvent>(path, { codec: eventCodec, mode: 'readwrite' });
  assert.deepEqual([...writer.read()], sink.events, 'migrated: the events are the same');
  writer.close();
  const migrated = new Database(path, { readonly: true });
  assert.equal(migrated.pragma('user_version', { simple: true }), logSchemaVersion);
  assert.deepEqual(migrated.prepare('SELECT key, value FROM meta ORDER BY key').all(), [
    { key: 'checksumsFromSeq', value: `${sink.events.length + 1}` },
    { key: 'createdBySchema', value: '1' },
    { key: 'migratedToSchema2', value: 'yes' },
  ]);
  assert.equal(
    migrated.prepare('SELECT COUNT(*) FROM events WHERE crc IS NOT NULL').pluck().get(),
    0,
    'the old rows are not rewritten: they stay unchecked',
  );
  migrated.close();
  const world = replayTo(openLog<VoleEvent>(path, { codec: eventCodec, mode: 'readonly' }).read());
  assert.equal(world.seq, sink.events.length);
});
