/**
 * Opening vole's SQLite event log: the entry point of src/log. A file is refused, untouched,
 * unless it is missing (create), empty, or a vole log (PRAGMA application_id) of a schema
 * version this code knows (PRAGMA user_version); see `openLog`.
 */
import { existsSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import Database, { type Database as Db } from 'better-sqlite3';
import { assert } from '../assert.js';
import { appendBatchEventsMax, logBusyTimeoutMsDefault } from '../constants.js';
import type { EventCodec, EventEnvelope } from './codec.js';
import { type LogDamagedError, LogOpenError } from './errors.js';
import { EventStore } from './event-store.js';
import { readHeader } from './header.js';
import { checksumsFromSeq, classify, type Identity, migrate, readIdentity } from './schema.js';
import { logSchemaVersion } from '../constants.js';
import { toOpenError } from './sqlite-errors.js';
import { WriterLock } from './writer-lock.js';

export type { EventCodec } from './codec.js';
export { EventStore } from './event-store.js';
export * from './errors.js';
export { readHolder, WriterLock } from './writer-lock.js';

export interface OpenLogOptions<E extends EventEnvelope> {
  readonly codec: EventCodec<E>;
  /**
   * create: open the log, creating and initialising the file when it is missing or empty.
   * readwrite: the file must exist (a 0-byte or empty SQLite file is initialised).
   * readonly: the file must be a vole log; nothing is ever written to it (SQLite may still
   * create the -wal and -shm files beside a WAL-mode log, as for any reader).
   */
  readonly mode: 'create' | 'readwrite' | 'readonly';
  /**
   * full (default): SQLite fsyncs the WAL at every commit, so an appended event survives a
   * power cut. vole promises that OperationStarted is durable before the host is touched
   * (DESIGN.md, STYLE.md §12); better-sqlite3's WAL default, NORMAL, may lose the last commits on power
   * loss. normal: for simulations and tests, whose logs nobody recovers after a crash.
   */
  readonly durability?: 'full' | 'normal';
  /** Lock wait, see logBusyTimeoutMsDefault. */
  readonly timeoutMs?: number;
  /** Events per append transaction (default: appendBatchEventsMax); lower it for tests. */
  readonly appendBatchEventsMax?: number;
  /**
   * quick: run PRAGMA quick_check before anything else reads or writes (every page of the
   * file; 0.1–0.3 s per million events), and refuse a damaged file, untouched.
   * background (writers only; their default): the same check on a worker thread right
   * after the start (integrity.ts), so the open does not grow with the log. Nothing is
   * written before it passes: a write meanwhile runs it first, and the group committer
   * holds its commits until it answers (an older schema's file, which the open migrates,
   * is checked in the open). Damage found stops the writer (LogDamagedError on every
   * write, `onDamaged` told). What a restart reads before then, the snapshot and the
   * events after it, is checked against the checksums written with it (schema 3), and a
   * mismatch is LogReadError 'corrupt'.
   * Readers default to none (the CLI's readers ask for quick; a library reader following
   * a live log does not pay it). none: salvage, or a caller that checked already.
   */
  readonly integrityCheck?: 'quick' | 'background' | 'none';
  /** The background check found damage; default: the error's message on stderr. */
  readonly onDamaged?: (error: LogDamagedError) => void;
}

/**
 * Opens a log, or throws LogOpenError with a code and a message saying what to do:
 * notFound (missing file in readwrite/readonly; a missing directory), notSqlite (not an
 * SQLite file; an empty one opened read-only), foreign (another program's database),
 * newerSchema (written by a newer vole), locked, corrupt, notWritable, io.
 *
 * An existing file's header bytes are checked first, then it is probed on a read-only
 * connection: a refused file is never opened for writing, and one refused on its header is
 * not opened by SQLite at all. The probe reads the last event's page, so a truncated file
 * is refused here; damage elsewhere surfaces when that part is read (LogReadError
 * 'corrupt'). Writers then reopen in WAL mode with the chosen durability and migrate an
 * older schema in one transaction. Read-only opens work on any version up to the current.
 */
export function openLog<E extends EventEnvelope>(
  path: string,
  opts: OpenLogOptions<E>,
): EventStore<E> {
  const timeoutMs = opts.timeoutMs ?? logBusyTimeoutMsDefault;
  assert(Number.isSafeInteger(timeoutMs) && timeoutMs >= 0, `openLog: timeoutMs ${timeoutMs}`);
  assert(path !== '' && path !== ':memory:', 'openLog: the log is a file; give its path');
  const exists = checkPath(path, opts.mode);
  if (exists) checkHeader(path);
  const store = (db: Db, version: number, onClose?: () => void) =>
    new EventStore<E>({
      db,
      path,
      codec: opts.codec,
      appendBatchEventsMax: opts.appendBatchEventsMax ?? appendBatchEventsMax,
      checksumsFromSeq: checksumsFromSeq(db, version),
      timeoutMs,
      onDamaged: opts.onDamaged ?? ((error) => console.error(`vole: ${error.message}`)),
      ...(onClose === undefined ? {} : { onClose }),
    });
  if (opts.mode === 'readonly') {
    assert(opts.integrityCheck !== 'background', 'openLog: a background check is for writers');
    return guarded(path, connect(path, { readonly: true, timeoutMs }), (db) => {
      const identity = probe(db, path);
      if (identity.kind === 'empty') throw emptyReadonly(path);
      if (opts.integrityCheck === 'quick') quickCheck(db, path);
      return store(db, identity.version);
    });
  }
  const check = opts.integrityCheck ?? 'background';
  // Identity first, read-only: a foreign or newer file must not even get a WAL header (nor
  // a lock file beside it). Then the writer lock, then the check: nothing is written to a
  // damaged file, and no other vole writes while it is checked.
  let lock: WriterLock | undefined;
  try {
    const identity: Identity = exists
      ? guarded(path, connect(path, { readonly: true, timeoutMs }), (db) => {
          const found = probe(db, path);
          lock = WriterLock.acquire(path);
          // A migration writes at the open: an older file is checked whole before it.
          const migrates = found.kind === 'vole' && found.version < logSchemaVersion;
          if (found.kind === 'vole' && (check === 'quick' || migrates)) quickCheck(db, path);
          db.close();
          return found;
        })
      : { kind: 'empty' };
    lock ??= WriterLock.acquire(path);
    const held = lock;
    return guarded(path, connect(path, { readonly: false, timeoutMs }), (db) => {
      enableWal(db, path, opts.durability ?? 'full');
      // Always, even for a current file: its IMMEDIATE transaction takes SQLite's write lock
      // once, so a lock another program holds is reported now (after timeoutMs), not at the
      // first append.
      migrate(db, path);
      const opened = store(db, logSchemaVersion, () => held.release());
      const current = identity.kind === 'vole' && identity.version === logSchemaVersion;
      if (check === 'background' && current) void opened.checkInBackground();
      return opened;
    });
  } catch (error) {
    lock?.release();
    throw error;
  }
}

/**
 * PRAGMA quick_check: every page's structure, without the index cross-checks of
 * integrity_check (the events table has no index). Refuses a damaged file as 'corrupt'.
 */
function quickCheck(db: Db, path: string): void {
  const problems = db.pragma('quick_check(5)', { simple: false }) as { quick_check: string }[];
  const found = problems.map((row) => row.quick_check).filter((text) => text !== 'ok');
  if (found.length === 0) return;
  throw new LogOpenError({
    code: 'corrupt',
    path,
    message:
      `${path} is damaged (SQLite's quick_check: ${found.join('; ')}); it was not written ` +
      `to. Save what is still readable with \`vole export --salvage --db ${path} --out ` +
      `OUT\`, then \`vole import OUT --db NEW\`, or restore it from a backup.`,
  });
}

/** Throws notFound for a missing file or directory, and notSqlite for a directory. */
function checkPath(path: string, mode: OpenLogOptions<EventEnvelope>['mode']): boolean {
  // better-sqlite3 ignores fileMustExist for read-only connections: check here, for all modes.
  const exists = existsSync(path);
  if (!exists && mode !== 'create') {
    throw new LogOpenError({
      code: 'notFound',
      path,
      message:
        `${path} does not exist; give the path of a vole log ` +
        `(vole run and vole simulate --db create one).`,
    });
  }
  if (!exists && !existsSync(dirname(path))) {
    throw new LogOpenError({
      code: 'notFound',
      path,
      message: `cannot create ${path}: the directory ${dirname(path)} does not exist; create it.`,
    });
  }
  if (exists && statSync(path).isDirectory()) {
    throw new LogOpenError({
      code: 'notSqlite',
      path,
      message: `${path} is a directory, not a vole log; give the path of the log file.`,
    });
  }
  return exists;
}

/** Refuses, from the header bytes alone, what is plainly not ours (see header.ts). */
function checkHeader(path: string): void {
  let header: ReturnType<typeof readHeader>;
  try {
    header = readHeader(path);
  } catch (error) {
    throw new LogOpenError({
      code: 'io',
      path,
      cause: error,
      message: `cannot read ${path} (${(error as Error).message}); check its permissions.`,
    });
  }
  if (header.kind === 'notSqlite') {
    throw new LogOpenError({
      code: 'notSqlite',
      path,
      message:
        `${path} is not a vole log (not an SQLite database: it does not start with the ` +
        `SQLite header); check the path.`,
    });
  }
  if (header.kind === 'sqlite') classify(header.facts, path);
}

function connect(path: string, opts: { readonly: boolean; timeoutMs: number }): Db {
  try {
    // fileMustExist only matters for writers of a missing file, which checkPath allowed.
    return new Database(path, { readonly: opts.readonly, timeout: opts.timeoutMs });
  } catch (error) {
    throw toOpenError(error, path);
  }
}

/** Runs `fn` on a fresh connection; on any failure closes it and throws a LogOpenError. */
function guarded<T>(path: string, db: Db, fn: (db: Db) => T): T {
  try {
    return fn(db);
  } catch (error) {
    const leftOpen = db.open && db.inTransaction;
    if (db.open) db.close();
    assert(!leftOpen, `${path}: a failed open left a transaction open`);
    throw toOpenError(error, path);
  }
}

/**
 * Identity, then the head. SQLite compares the header's page count with the file size on
 * its first read (of the schema), so a truncated log fails here with SQLITE_CORRUPT rather
 * than reading back as a shorter log. Reading the head walks the table's rightmost path,
 * where appends land: damage there is reported at open, before a writer builds on it.
 */
function probe(db: Db, path: string): Identity {
  const identity = readIdentity(db, path);
  if (identity.kind === 'vole') db.prepare('SELECT MAX(seq) FROM events').get();
  return identity;
}

function enableWal(db: Db, path: string, durability: 'full' | 'normal'): void {
  const mode = db.pragma('journal_mode = WAL', { simple: true });
  if (mode !== 'wal') {
    throw new LogOpenError({
      code: 'io',
      path,
      message:
        `${path}: SQLite could not switch the log to WAL mode (it stays ${String(mode)}); ` +
        `put the log on a local filesystem.`,
    });
  }
  // See OpenLogOptions.durability: FULL unless a caller decided otherwise.
  db.pragma(`synchronous = ${durability === 'full' ? 'FULL' : 'NORMAL'}`);
  // SQLite's own checkpoint runs inside the commit that crosses its threshold, on some
  // operation's way to the host; the group committer checkpoints when the writer is idle
  // (EventStore.checkpoint), and this larger threshold is only the backstop for a writer
  // that is never idle.
  db.pragma(`wal_autocheckpoint = ${walAutocheckpointPages}`);
}

/**
 * The backstop WAL size, in pages (SQLite's default is 1,000): 10,000 pages of 4 KiB is a
 * 40 MiB WAL, read into the WAL index at the next open in a few milliseconds.
 */
const walAutocheckpointPages = 10_000;

function emptyReadonly(path: string): LogOpenError {
  return new LogOpenError({
    code: 'notSqlite',
    path,
    message: `${path} is empty, not a vole log yet; give the path of a log vole has written.`,
  });
}
