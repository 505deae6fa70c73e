/**
 * SQLite failures turned into the store's errors, by `SqliteError.code` (docs/style.md rule 12).
 * Anything that is not an SqliteError is a bug or a codec failure and passes through.
 */
import { SqliteError } from 'better-sqlite3';
import {
  LogOpenError,
  type LogOpenErrorCode,
  LogReadError,
  type LogReadErrorCode,
} from './errors.js';

type Kind = 'notSqlite' | 'corrupt' | 'locked' | 'notFound' | 'notWritable' | 'io';

/** Extended codes (SQLITE_CORRUPT_INDEX, SQLITE_BUSY_SNAPSHOT…) share their base's prefix. */
function kindOf(code: string): Kind {
  if (code === 'SQLITE_NOTADB') return 'notSqlite';
  if (code.startsWith('SQLITE_CORRUPT')) return 'corrupt';
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) return 'locked';
  if (code.startsWith('SQLITE_CANTOPEN')) return 'notFound';
  if (code.startsWith('SQLITE_READONLY') || code === 'SQLITE_PERM' || code === 'SQLITE_AUTH') {
    return 'notWritable';
  }
  return 'io';
}

const restore =
  'Save what is still readable with `vole export --salvage --db FILE --out OUT`, then ' +
  '`vole import OUT --db NEW`, or restore it from a backup';

function openMessage(kind: Kind, path: string, detail: string): string {
  switch (kind) {
    case 'notSqlite':
      return `${path} is not a vole log (not an SQLite database: ${detail}); check the path.`;
    case 'corrupt':
      return (
        `${path} is damaged (${detail}); it was not written to. It may be truncated or ` +
        `partly overwritten, so none of it is trusted. ${restore}.`
      );
    case 'locked':
      return (
        `${path} is locked by another program (${detail}), still after the wait for it; ` +
        `find it (fuser ${path}) and end its transaction or stop it, then retry. ` +
        `Readers (vole status, replay) do not need that lock.`
      );
    case 'notFound':
      return `cannot open ${path} (${detail}); check that its directory exists.`;
    case 'notWritable':
      return (
        `cannot write ${path} (${detail}); check the permissions of the file and its ` +
        `directory, or open it read-only.`
      );
    case 'io':
      return `cannot open ${path} (${detail}); check the disk (space, errors) and retry.`;
  }
}

/** Maps an error raised while opening; rethrows what is not an SqliteError. */
export function toOpenError(error: unknown, path: string): LogOpenError {
  if (error instanceof LogOpenError) return error;
  if (!(error instanceof SqliteError)) throw error;
  const kind = kindOf(error.code);
  const code: LogOpenErrorCode = kind;
  const message = openMessage(kind, path, error.message);
  return new LogOpenError({ code, path, message, cause: error });
}

/**
 * Maps an error raised while reading at (or just after) `seq`; rethrows what is not an
 * SqliteError. A read never reports "not a database": the file was one when it opened.
 */
export function toReadError(error: unknown, path: string, seq: number): LogReadError {
  if (error instanceof LogReadError) return error;
  if (!(error instanceof SqliteError)) throw error;
  const kind = kindOf(error.code);
  const code: LogReadErrorCode =
    kind === 'corrupt' || kind === 'notSqlite' ? 'corrupt' : kind === 'locked' ? 'locked' : 'io';
  // A damaged file found while reading (a restart's tail, a replay) is refused as at open:
  // the read wrote nothing, and the salvage is the way out.
  const message =
    code === 'corrupt'
      ? `${path} is damaged (${error.message}, reading at seq ${seq}); it was not written ` +
        `to. It may be truncated or partly overwritten. ${restore.replace('FILE', path)}.`
      : `${path}: cannot read at seq ${seq}: ${error.message}; retry, and check the disk if ` +
        `it persists.`;
  return new LogReadError({ code, path, seq, message, cause: error });
}
