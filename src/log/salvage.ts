/**
 * Salvage: every event of a damaged log that can still be read, from seq 1 in seq order,
 * up to the first one that cannot (SQLite reports the page damaged, the row does not match
 * its checksum or does not decode, or a seq is missing). A log has no gaps, so what
 * follows the first gap could not be imported anyway. The file is opened read-only,
 * without the integrity check that refuses it elsewhere, and never written.
 */
import { existsSync } from 'node:fs';
import Database, { type Database as Db, SqliteError } from 'better-sqlite3';
import { decodeRow, type EventCodec, type EventEnvelope } from './codec.js';
import { LogOpenError } from './errors.js';
import { eventChecksum } from './checksum.js';
import type { StoredRow } from './statements.js';

/** How far a salvage got; filled in while its events are read. */
export interface SalvageReport {
  /** The last event read (0: none). */
  lastSeq: number;
  /** The head SQLite reports, when it can still read it. */
  headSeq: number | undefined;
  /** Why reading stopped before the head; undefined when every event was read. */
  stop: { seq: number; reason: string } | undefined;
}

/**
 * Streams the readable events and fills `report`. Throws LogOpenError when nothing can be
 * read at all (a missing file, or a first page so damaged that SQLite cannot open it).
 */
export function* salvageEvents<E extends EventEnvelope>(
  path: string,
  codec: EventCodec<E>,
  report: SalvageReport,
): Generator<E> {
  const db = openDamaged(path);
  try {
    report.headSeq = headOf(db);
    const crc = hasChecksums(db) ? 'crc' : 'NULL AS crc';
    const rows = db
      .prepare<[], StoredRow>(`SELECT seq, ts_ms, type, data, ${crc} FROM events ORDER BY seq`)
      .raw();
    let expected = 1;
    try {
      for (const row of rows.iterate()) {
        if (row[0] !== expected) {
          report.stop = { seq: expected, reason: `seq ${expected} is missing (next: ${row[0]})` };
          return;
        }
        const event = decodeOrStop(codec, row, report);
        if (event === undefined) return;
        report.lastSeq = expected++;
        yield event;
      }
    } catch (error) {
      if (!(error instanceof SqliteError)) throw error;
      report.stop = { seq: expected, reason: `SQLite cannot read it: ${error.message}` };
      return;
    }
    if (report.headSeq !== undefined && report.lastSeq < report.headSeq) {
      report.stop = { seq: expected, reason: `seq ${expected} is missing` };
    }
  } finally {
    db.close();
  }
}

function decodeOrStop<E extends EventEnvelope>(
  codec: EventCodec<E>,
  row: StoredRow,
  report: SalvageReport,
): E | undefined {
  const [seq, tsMs, type, data, crc] = row;
  if (crc !== null && crc !== eventChecksum(seq, tsMs, type, data)) {
    report.stop = { seq, reason: 'it does not match the checksum written with it' };
    return undefined;
  }
  try {
    return decodeRow(codec, row);
  } catch (error) {
    const reason = `its ${row[2]} event does not decode: ${(error as Error).message}`;
    report.stop = { seq: row[0], reason: reason.slice(0, 300) };
    return undefined;
  }
}

function openDamaged(path: string): Db {
  if (!existsSync(path)) {
    throw new LogOpenError({ code: 'notFound', path, message: `${path} does not exist.` });
  }
  let db: Db | undefined;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
    db.prepare('SELECT 1 FROM events LIMIT 1').get();
    return db;
  } catch (error) {
    if (db?.open === true) db.close();
    if (!(error instanceof SqliteError)) throw error;
    throw new LogOpenError({
      code: 'corrupt',
      path,
      cause: error,
      message:
        `nothing in ${path} can be salvaged: SQLite cannot read its events table ` +
        `(${error.message}). Restore the log from a backup.`,
    });
  }
}

/** Whether the events table has schema 3's crc column (an older log has none). */
function hasChecksums(db: Db): boolean {
  const columns = db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all('events');
  return columns.includes('crc');
}

function headOf(db: Db): number | undefined {
  try {
    return db.prepare<[], number>('SELECT COALESCE(MAX(seq), 0) FROM events').pluck().get();
  } catch {
    return undefined;
  }
}
