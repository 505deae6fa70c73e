/**
 * One writer per log (docs/design.md "The next shape"): a writer holds an exclusive lock on a
 * sidecar file, `<log>-lock`, for as long as its store is open. The lock is SQLite's own
 * (fcntl, through its unix VFS): the sidecar is a tiny SQLite database kept in
 * `locking_mode = EXCLUSIVE` after one write, so the kernel drops the lock when the holder
 * exits, however it exits (SIGKILL included), and SQLite also refuses a second writer
 * inside the same process. Node has no flock of its own; this needs nothing beyond
 * better-sqlite3.
 *
 * The holder writes who it is (pid, host, since when, its command) into the sidecar. A
 * refused writer cannot read the sidecar through SQLite while the lock is held, so it
 * copies the file's bytes (fcntl locks are advisory: plain reads pass) and reads the copy.
 *
 * The sidecar is never deleted: unlinking a lock file lets two processes hold locks on two
 * different inodes of one path. Readers never touch it, so status, replay, history and the
 * inspector keep working beside a running writer.
 */
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import Database, { type Database as Db, SqliteError } from 'better-sqlite3';
import { LogOpenError } from './errors.js';

/** Who holds a log's writer lock. */
export interface LogHolder {
  readonly pid: number;
  readonly host: string;
  readonly sinceMs: number;
  /** The holder's command line, shortened (`vole run --manifests …`). */
  readonly command: string;
}

export class WriterLock {
  private constructor(
    private readonly db: Db,
    readonly path: string,
    readonly holder: LogHolder,
  ) {}

  /** The sidecar's path for a log. */
  static pathFor(logPath: string): string {
    return `${logPath}-lock`;
  }

  /**
   * Takes the lock at once or throws LogOpenError 'inUse' naming the holder; never waits
   * (a second agent must be told now, not after a timeout).
   */
  static acquire(logPath: string): WriterLock {
    const path = WriterLock.pathFor(logPath);
    let db: Db | undefined;
    try {
      db = new Database(path, { timeout: 0 });
      db.pragma('locking_mode = EXCLUSIVE');
      // Who holds the lock is a hint for a message, not a record: no fsync for it.
      db.pragma('synchronous = OFF');
      const holder = me();
      db.transaction(() => {
        db!.exec(
          'CREATE TABLE IF NOT EXISTS holder ' +
            '(pid INTEGER, host TEXT, since_ms INTEGER, command TEXT)',
        );
        db!.exec('DELETE FROM holder');
        db!
          .prepare('INSERT INTO holder VALUES (?, ?, ?, ?)')
          .run(holder.pid, holder.host, holder.sinceMs, holder.command);
      }).immediate();
      return new WriterLock(db, path, holder);
    } catch (error) {
      if (db?.open === true) db.close();
      throw refusal(error, logPath, path);
    }
  }

  /** Releases the lock (closing the sidecar connection); a second call is a no-op. */
  release(): void {
    if (this.db.open) this.db.close();
  }
}

function me(): LogHolder {
  const command = ['vole', ...process.argv.slice(2)].join(' ');
  return {
    pid: process.pid,
    host: hostname(),
    sinceMs: Date.now(),
    command: command.length > 200 ? `${command.slice(0, 199)}…` : command,
  };
}

function refusal(error: unknown, logPath: string, lockPath: string): LogOpenError {
  if (!(error instanceof SqliteError)) throw error;
  if (error.code.startsWith('SQLITE_BUSY') || error.code.startsWith('SQLITE_LOCKED')) {
    return new LogOpenError({
      code: 'inUse',
      path: logPath,
      cause: error,
      message: inUseMessage(logPath, readHolder(lockPath)),
    });
  }
  return new LogOpenError({
    code: error.code.startsWith('SQLITE_READONLY') ? 'notWritable' : 'io',
    path: logPath,
    cause: error,
    message:
      `cannot take the writer lock ${lockPath} of ${logPath} (${error.message}); check the ` +
      `directory's permissions and free space. If the lock file is damaged and no vole ` +
      `process writes this log, remove ${lockPath}.`,
  });
}

export function inUseMessage(logPath: string, holder: LogHolder | undefined): string {
  const who =
    holder === undefined
      ? 'another process (it is starting, so it has not said who it is yet)'
      : `pid ${holder.pid} on ${holder.host} since ${new Date(holder.sinceMs).toISOString()} ` +
        `(${holder.command})`;
  return (
    `${logPath} is being written by ${who}. A log has one writer: stop that process ` +
    `first. Readers (vole status, replay, history, inspect) work beside it.`
  );
}

/**
 * Who holds the lock, from a copy of the sidecar's bytes (the holder's lock keeps SQLite
 * itself from reading it); undefined when it has not written itself down yet.
 */
export function readHolder(lockPath: string): LogHolder | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'vole-lock-'));
  try {
    const copy = join(dir, 'lock.db');
    copyFileSync(lockPath, copy);
    const db = new Database(copy, { readonly: true });
    try {
      const row = db.prepare('SELECT pid, host, since_ms, command FROM holder').get() as
        { pid: number; host: string; since_ms: number; command: string } | undefined;
      if (row === undefined) return undefined;
      return { pid: row.pid, host: row.host, sinceMs: row.since_ms, command: row.command };
    } finally {
      db.close();
    }
  } catch {
    return undefined;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
