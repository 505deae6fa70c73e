/**
 * Errors of the event store. Each carries a code to branch on and a message that ends with
 * what to do (STYLE.md §14). They are failures of the file or of its user, not of vole's
 * logic: invariant violations stay `InvariantError`.
 */

/** Why a log could not be opened. */
export type LogOpenErrorCode =
  | 'notFound' // the file (or its directory) does not exist
  | 'notSqlite' // not an SQLite file, or an empty one opened read-only
  | 'foreign' // an SQLite database that belongs to another program
  | 'newerSchema' // a vole log written by a newer vole
  | 'inUse' // another vole process writes this log (its writer lock is held)
  | 'locked' // another process holds the lock for longer than the timeout
  | 'corrupt' // SQLite reports the file damaged (truncated, overwritten)
  | 'notWritable' // a writer was asked for but the file or directory is read-only
  | 'otherMode' // a log another core (EngineStarted.mode) wrote
  | 'io'; // anything else SQLite reports (disk full, I/O error), with its message

export class LogOpenError extends Error {
  override name = 'LogOpenError';
  readonly code: LogOpenErrorCode;
  readonly path: string;

  constructor(opts: { code: LogOpenErrorCode; path: string; message: string; cause?: unknown }) {
    super(opts.message, { cause: opts.cause });
    this.code = opts.code;
    this.path = opts.path;
  }
}

/** Why an event (or the file under it) could not be read back. */
export type LogReadErrorCode =
  | 'invalidEvent' // the row is there but the codec (or JSON) rejects it
  | 'corrupt' // SQLite reports the file damaged while reading
  | 'locked'
  | 'io';

export class LogReadError extends Error {
  override name = 'LogReadError';
  readonly code: LogReadErrorCode;
  readonly path: string;
  /** The event concerned; for a damaged file, the first seq that could not be read. */
  readonly seq: number;

  constructor(opts: {
    code: LogReadErrorCode;
    path: string;
    seq: number;
    message: string;
    cause?: unknown;
  }) {
    super(opts.message, { cause: opts.cause });
    this.code = opts.code;
    this.path = opts.path;
    this.seq = opts.seq;
  }
}

/**
 * `append` was told the log ends at `expectedSeq`, but it ends at `actualSeq`: someone else
 * appended (or the caller lost track). Nothing of the refused transaction was written.
 */
export class ExpectedSeqConflictError extends Error {
  override name = 'ExpectedSeqConflictError';
  readonly expectedSeq: number;
  readonly actualSeq: number;

  constructor(opts: { path: string; expectedSeq: number; actualSeq: number }) {
    super(
      `${opts.path}: append expected the log to end at seq ${opts.expectedSeq} but it ends ` +
        `at seq ${opts.actualSeq}; another writer appended. Re-read the log from seq ` +
        `${opts.expectedSeq + 1} and decide again before appending.`,
    );
    this.expectedSeq = opts.expectedSeq;
    this.actualSeq = opts.actualSeq;
  }
}

/** A write (append, snapshot) on a store opened with mode 'readonly': a programming error. */
export class LogReadonlyError extends Error {
  override name = 'LogReadonlyError';
  readonly path: string;

  constructor(opts: { path: string; operation: string }) {
    super(
      `${opts.path} is open read-only, so ${opts.operation} is refused; ` +
        `open it with mode 'readwrite' (or 'create') to write.`,
    );
    this.path = opts.path;
  }
}

/**
 * The log was found damaged after it opened (the whole-file quick_check, integrity.ts):
 * its writer is stopped, and every write throws this. Nothing was written before the check
 * answered (EventStore.writer, GroupCommitter's gate), so nothing ever was.
 */
export class LogDamagedError extends Error {
  override name = 'LogDamagedError';
  readonly code = 'corrupt';
  readonly path: string;
  readonly problems: readonly string[];

  constructor(opts: { path: string; problems: readonly string[] }) {
    super(
      `${opts.path} is damaged (SQLite's quick_check, run in the background after the ` +
        `start: ${opts.problems.join('; ')}); nothing was written to it and nothing was ` +
        `done on the host since it was opened, and its writer is stopped. Save what is ` +
        `still readable with \`vole export --salvage --db ${opts.path} --out OUT\`, then ` +
        `\`vole import OUT --db NEW\`, or restore it from a backup.`,
    );
    this.path = opts.path;
    this.problems = opts.problems;
  }
}
