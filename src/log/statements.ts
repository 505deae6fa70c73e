/**
 * Every statement of the store, prepared once when it opens (docs/style.md rule 12, docs/performance.md: preparing
 * per insert costs a third of the append rate). Reads run in raw or pluck mode, so rows come
 * back as arrays or single values without building an object per row.
 */
import type { Database as Db, Statement, Transaction } from 'better-sqlite3';
import { eventChecksum } from './checksum.js';

/** One events row as stored: seq, ts_ms, type, data (the event's JSON minus the envelope). */
export type EventRow = [seq: number, tsMs: number, type: string, data: string];

/** A row as read back: with its checksum, NULL for a row written before schema 3. */
export type StoredRow = [seq: number, tsMs: number, type: string, data: string, crc: number | null];

export interface SnapshotRow {
  seq: number;
  tsMs: number;
  format: number;
  data: Buffer;
  crc: number | null;
}

export interface ReadStatements {
  /** The last seq, 0 for an empty log. MAX of the rowid is a single b-tree descent. */
  readonly head: Statement<[], number>;
  readonly range: Statement<[fromSeq: number, toSeq: number, limit: number], StoredRow>;
  readonly one: Statement<[seq: number], StoredRow>;
  readonly tsAt: Statement<[seq: number], number>;
  readonly first: Statement<[], { seq: number; tsMs: number }>;
  readonly last: Statement<[], { seq: number; tsMs: number }>;
  readonly snapshot: Statement<[atOrBeforeSeq: number], SnapshotRow>;
}

/** `hasChecksums`: the file is at schema 3 or later (a reader may open an older one). */
export function prepareReads(db: Db, hasChecksums: boolean): ReadStatements {
  const crc = hasChecksums ? 'crc' : 'NULL AS crc';
  return {
    head: db.prepare<[], number>('SELECT COALESCE(MAX(seq), 0) FROM events').pluck(),
    range: db
      .prepare<[number, number, number], StoredRow>(
        `SELECT seq, ts_ms, type, data, ${crc} FROM events ` +
          'WHERE seq >= ? AND seq <= ? ORDER BY seq LIMIT ?',
      )
      .raw(),
    one: db
      .prepare<[number], StoredRow>(
        `SELECT seq, ts_ms, type, data, ${crc} FROM events WHERE seq = ?`,
      )
      .raw(),
    tsAt: db.prepare<[number], number>('SELECT ts_ms FROM events WHERE seq = ?').pluck(),
    first: db.prepare('SELECT seq, ts_ms AS tsMs FROM events ORDER BY seq ASC LIMIT 1'),
    last: db.prepare('SELECT seq, ts_ms AS tsMs FROM events ORDER BY seq DESC LIMIT 1'),
    snapshot: db.prepare<[number], SnapshotRow>(
      `SELECT seq, ts_ms AS tsMs, format, data, ${crc} FROM snapshots WHERE seq <= ? ` +
        'ORDER BY seq DESC LIMIT 1',
    ),
  };
}

export interface WriteStatements {
  /**
   * One batch in one transaction, created once (docs/style.md rule 12) and always invoked with
   * `.immediate(...)`: the write lock is taken before the head is read, so the expected-seq
   * check and the inserts see the same log.
   */
  readonly appendBatch: Transaction<(rows: readonly EventRow[], expectedSeq: number) => void>;
  readonly insertSnapshot: Statement<
    [seq: number, tsMs: number, format: number, data: Buffer, crc: number]
  >;
  readonly deleteSnapshotsAfter: Statement<[seq: number]>;
}

export function prepareWrites(
  db: Db,
  opts: {
    head: Statement<[], number>;
    onConflict: (expectedSeq: number, actualSeq: number) => never;
  },
): WriteStatements {
  const insert = db.prepare<[...EventRow, crc: number]>(
    'INSERT INTO events (seq, ts_ms, type, data, crc) VALUES (?, ?, ?, ?, ?)',
  );
  // Synchronous on purpose: a promise inside commits too early (docs/style.md "avoids" 6).
  const appendBatch = db.transaction((rows: readonly EventRow[], expectedSeq: number): void => {
    const actualSeq = opts.head.get() ?? 0;
    if (actualSeq !== expectedSeq) opts.onConflict(expectedSeq, actualSeq);
    for (const [seq, tsMs, type, data] of rows) {
      insert.run(seq, tsMs, type, data, eventChecksum(seq, tsMs, type, data));
    }
  });
  return {
    appendBatch,
    insertSnapshot: db.prepare(
      'INSERT OR REPLACE INTO snapshots (seq, ts_ms, format, data, crc) VALUES (?, ?, ?, ?, ?)',
    ),
    deleteSnapshotsAfter: db.prepare('DELETE FROM snapshots WHERE seq > ?'),
  };
}
