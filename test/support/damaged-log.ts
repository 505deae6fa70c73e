/**
 * Logs damaged where a restart does not read: a snapshot at the head (so a restart reads
 * it and an empty tail), then a page of the events table overwritten. The pages are found
 * from the file itself: SQLite's dbstat table and a walk of the b-tree.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  closeSync,
  existsSync,
  openSync,
  readFileSync,
  readSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { openSqliteLog } from '../../src/agent/sqlite-log.js';
import type { Core, CoreOperation, CoreWorld } from '../../src/engine/core.js';
import { controllerCore, kubeletCore } from '../../src/engine/cores.js';
import { vole } from './agent-process.js';

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
/** The log's bytes and its WAL's (absent: ''). */
export const fingerprint = (db: string) => ({
  db: sha256(db),
  wal: existsSync(`${db}-wal`) ? sha256(`${db}-wal`) : '',
});

/** A log's core: node-1's agent (kubelet) or the attach/detach controller. */
export type LogMode = 'kubelet' | 'controller';

/** The EngineStarted a log of `mode` begins with. */
function engineStarted(mode: LogMode): Record<string, unknown> {
  const started = { seq: 1, tsMs: 1_000, type: 'EngineStarted', plugins: [], version: '0.1.0' };
  if (mode === 'kubelet') return { ...started, node: 'node-1', controllerAttachDetach: false };
  const controller = { maxWaitForUnmountMs: 360_000, disableForceDetachOnTimeout: false };
  return { ...started, mode: 'controller', controller };
}

/**
 * A log of `objects` + 1 events (EngineStarted, then PersistentVolumes with `spec(i)`),
 * written by `vole import` into `dir`/`name`.db: its path.
 */
export function importedPvLog(
  dir: string,
  name: string,
  objects: number,
  spec: (i: number) => Record<string, unknown>,
  mode: LogMode = 'kubelet',
): string {
  const lines = [JSON.stringify(engineStarted(mode))];
  for (let i = 0; i < objects; i++) {
    const object = {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: `pv-${i}`, labels: { note: 'x'.repeat(200) } },
      spec: { accessModes: ['ReadWriteOnce'], ...spec(i) },
    };
    lines.push(JSON.stringify({ seq: i + 2, tsMs: 1_000 + i, type: 'ObjectUpserted', object }));
  }
  const jsonl = join(dir, `${name}.jsonl`);
  writeFileSync(jsonl, `${lines.join('\n')}\n`);
  const db = join(dir, `${name}.db`);
  const r = vole('import', jsonl, '--db', db);
  assert.equal(r.status, 0, r.stderr);
  return db;
}

/**
 * A log of `objects` + 1 events (EngineStarted, then PersistentVolumes, via `vole import`)
 * with a snapshot at its head, saved as the agent saves it: a restart reads the snapshot
 * and an empty tail, no other page of the events table.
 */
export async function logWithSnapshot(
  dir: string,
  name: string,
  objects: number,
  mode: LogMode = 'kubelet',
): Promise<string> {
  const spec = (i: number) => ({ hostPath: { path: `/srv/pv-${i}` } });
  const db = importedPvLog(dir, name, objects, spec, mode);
  if (mode === 'kubelet') await snapshotAtHead(db, kubeletCore, objects + 1);
  else await snapshotAtHead(db, controllerCore, objects + 1);
  return db;
}

/** Saves a snapshot of the world at the head of `db`, as the agent or controller saves it. */
async function snapshotAtHead<W extends CoreWorld, O extends CoreOperation>(
  db: string,
  core: Core<W, O>,
  head: number,
): Promise<void> {
  const log = openSqliteLog(db, core, { durability: 'normal' });
  const world = log.loadWorld();
  // Written once the background whole-file check passed: no write before it.
  await log.store.checkInBackground();
  log.saveSnapshot(world);
  assert.equal(log.store.latestSnapshot()?.seq, head, 'a snapshot at the head');
  log.sink.close();
}

/** The page size and the events table's root page, from the file's own schema. */
function layout(db: string): { pageBytes: number; root: number; leaves: number[] } {
  const raw = new Database(db, { readonly: true });
  const pageBytes = Number(raw.pragma('page_size', { simple: true }));
  const root = Number(
    raw.prepare("SELECT rootpage FROM sqlite_schema WHERE name = 'events'").pluck().get(),
  );
  // dbstat (compiled into better-sqlite3's SQLite) lists the table's pages; its leaves in
  // key order are its paths in order.
  const leaves = raw
    .prepare("SELECT pageno FROM dbstat WHERE name = 'events' AND pagetype = 'leaf' ORDER BY path")
    .pluck()
    .all() as number[];
  raw.close();
  return { pageBytes, root, leaves };
}

function readPage(db: string, page: number, pageBytes: number): Buffer {
  const bytes = Buffer.alloc(pageBytes);
  const fd = openSync(db, 'r');
  readSync(fd, bytes, 0, pageBytes, (page - 1) * pageBytes);
  closeSync(fd);
  return bytes;
}

function writeAt(db: string, bytes: Buffer, at: number): void {
  const fd = openSync(db, 'r+');
  writeSync(fd, bytes, 0, bytes.length, at);
  closeSync(fd);
}

/**
 * The events table's rightmost leaf, found by walking its b-tree from the root: an interior
 * table page (type 5) keeps its rightmost child at header offset 8; a leaf is type 13.
 */
function rightmostLeaf(db: string): number {
  const { pageBytes, root } = layout(db);
  let page = root;
  for (;;) {
    const bytes = readPage(db, page, pageBytes);
    const header = page === 1 ? 100 : 0; // page 1 starts with the file header
    const type = bytes[header];
    if (type === 13) return page;
    assert.equal(type, 5, `page ${page}: an interior table page`);
    page = bytes.readUInt32BE(header + 8);
  }
}

/** quick_check's answer; SQLite may also refuse outright (SQLITE_CORRUPT). */
function quickCheck(db: string): string {
  const raw = new Database(db, { readonly: true });
  try {
    return (raw.pragma('quick_check') as { quick_check: string }[])
      .map((row) => row.quick_check)
      .join('; ');
  } catch (error) {
    return (error as Error).message;
  } finally {
    raw.close();
  }
}

/** 4 KiB (a page) of zeros over a leaf in the middle of the events table. */
export function damageMiddlePage(db: string): void {
  const { pageBytes, leaves } = layout(db);
  assert.ok(leaves.length > 100, `${leaves.length} leaves`);
  const middle = leaves[Math.floor(leaves.length / 2)]!;
  writeAt(db, Buffer.alloc(pageBytes), (middle - 1) * pageBytes);
  assert.notEqual(quickCheck(db), 'ok', 'quick_check finds the damage');
}

/**
 * The events table's rightmost leaf damaged below its last row, where appends land: its
 * first cell overwritten.
 */
export function damageRightmostLeaf(db: string): void {
  const { pageBytes, leaves } = layout(db);
  const leaf = rightmostLeaf(db);
  assert.equal(leaf, leaves.at(-1), 'the b-tree walk and dbstat agree');
  const page = readPage(db, leaf, pageBytes);
  const cells = page.readUInt16BE(3);
  // MAX(seq) reads the leaf's last cell, and the seek past the head (the empty tail) its
  // last ones: damage its first cell, which neither reads, so the start gets past them.
  assert.ok(cells >= 3, `the rightmost leaf holds ${cells} cells`);
  const firstCell = page.readUInt16BE(8); // the cell pointer array follows the 8-byte header
  writeAt(db, Buffer.alloc(40, 0xff), (leaf - 1) * pageBytes + firstCell);
  assert.notEqual(quickCheck(db), 'ok', 'quick_check finds the damage');
  const raw = new Database(db, { readonly: true });
  assert.equal(raw.prepare('SELECT MAX(seq) FROM events').pluck().get(), 3_001, 'head readable');
  raw.close();
}
