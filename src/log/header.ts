/**
 * Reads a database file's identity from its first bytes, without SQLite. A read-only SQLite
 * connection to a WAL-mode file creates `-wal` and `-shm` files beside it and leaves them;
 * reading the header first lets openLog refuse another program's file, or a newer vole's,
 * with nothing at all created or changed. SQLite's own answer (schema.ts readIdentity) stays
 * the authority: the main file's header may lag the WAL, which only makes it look older.
 *
 * Layout: https://www.sqlite.org/fileformat2.html §1.3 (database header) and §1.6 (b-tree
 * page header; page 1 holds the root of sqlite_schema right after the 100-byte header).
 */
import { closeSync, openSync, readSync } from 'node:fs';
import type { IdentityFacts } from './schema.js';

export type Header =
  | { kind: 'empty' } // a 0-byte file: SQLite treats it as a new database
  | { kind: 'notSqlite' }
  | { kind: 'sqlite'; facts: IdentityFacts };

const magic = Buffer.from('SQLite format 3\0', 'latin1');
const headerBytes = 108; // database header + page 1's b-tree page header
const userVersionOffset = 60;
const applicationIdOffset = 68;
const schemaPageTypeOffset = 100;
const schemaCellCountOffset = 103;
const interiorTablePage = 0x05;

export function readHeader(path: string): Header {
  const bytes = Buffer.alloc(headerBytes);
  const fd = openSync(path, 'r');
  let length: number;
  try {
    length = readSync(fd, bytes, 0, headerBytes, 0);
  } finally {
    closeSync(fd);
  }
  if (length === 0) return { kind: 'empty' };
  if (length < headerBytes || !bytes.subarray(0, magic.length).equals(magic)) {
    return { kind: 'notSqlite' };
  }
  const pageType = bytes.readUInt8(schemaPageTypeOffset);
  const cellCount = bytes.readUInt16BE(schemaCellCountOffset);
  return {
    kind: 'sqlite',
    facts: {
      // Signed, as PRAGMA application_id and user_version report them.
      applicationId: bytes.readInt32BE(applicationIdOffset),
      version: bytes.readInt32BE(userVersionOffset),
      hasSchema: pageType === interiorTablePage || cellCount > 0,
    },
  };
}
