/**
 * The log file's schema, its migrations, and how a file is recognised as a vole log
 * (PRAGMA application_id) of a known version (PRAGMA user_version).
 */
import type { Database as Db } from 'better-sqlite3';
import { assert } from '../assert.js';
import { logApplicationId, logSchemaVersion } from '../constants.js';
import { LogOpenError } from './errors.js';

/**
 * Migrations by the version they produce; index 0 is the empty file. A migration may add
 * tables or columns but never rewrites an existing event: the log is the record (docs/design.md),
 * so an old event must read back as it was written.
 *
 * Version 1: the events table has no secondary index on purpose. Every index costs append
 * throughput (docs/performance.md: 61 k vs 228 k events/s) and no query needs one: reads go by seq, the
 * primary key, and timestamps never decrease with seq, so time lookups bisect on seq.
 *
 * Version 2: a `meta` table of facts about the log itself (the schema version that created
 * it; which versions migrated it), so a post-mortem on a copied file can tell its history.
 *
 * Version 3: a `crc` column on events and snapshots (checksum.ts), so a restart checks what
 * it reads instead of the whole file first. Adding a column rewrites nothing: the rows an
 * older vole wrote keep a NULL crc and read as unchecked (the background quick_check covers
 * them). meta `checksumsFromSeq` is the first seq written with one; a NULL crc from there
 * on is damage.
 */
const migrations: readonly ((db: Db) => void)[] = [
  () => {},
  (db) => {
    db.exec(`
      CREATE TABLE events (
        seq INTEGER PRIMARY KEY,
        ts_ms INTEGER NOT NULL,
        type TEXT NOT NULL,
        data TEXT NOT NULL
      );
      CREATE TABLE snapshots (
        seq INTEGER PRIMARY KEY,
        ts_ms INTEGER NOT NULL,
        format INTEGER NOT NULL,
        data BLOB NOT NULL
      );
    `);
  },
  (db) => {
    const hadEvents = (db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n > 0;
    db.exec('CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID');
    const put = db.prepare('INSERT INTO meta (key, value) VALUES (?, ?)');
    put.run('createdBySchema', hadEvents ? '1' : '2');
    if (hadEvents) put.run('migratedToSchema2', 'yes');
  },
  (db) => {
    db.exec('ALTER TABLE events ADD COLUMN crc INTEGER');
    db.exec('ALTER TABLE snapshots ADD COLUMN crc INTEGER');
    const head = db.prepare('SELECT COALESCE(MAX(seq), 0) FROM events').pluck().get() as number;
    db.prepare("INSERT INTO meta (key, value) VALUES ('checksumsFromSeq', ?)").run(`${head + 1}`);
  },
];
assert(migrations.length === logSchemaVersion + 1, 'one migration per log schema version');

/** What the file holds: nothing yet (version 0), or a vole log of a version this code reads. */
export type Identity = { kind: 'empty' } | { kind: 'vole'; version: number };

/** What identifies a file, from PRAGMAs (readIdentity) or from its header bytes (header.ts). */
export interface IdentityFacts {
  applicationId: number;
  version: number;
  /** Whether the schema holds anything (tables, indexes, views). */
  hasSchema: boolean;
}

/** Refuses files that are not ours or are newer than this code; says what the file is. */
export function classify(facts: IdentityFacts, path: string): Identity {
  const { applicationId, version, hasSchema } = facts;
  if (applicationId !== logApplicationId) {
    // An SQLite file with nothing in it (or a 0-byte file) is ours to initialise. Anything
    // else, including an empty database another program has marked as its own, is not.
    if (applicationId === 0 && version === 0 && !hasSchema) return { kind: 'empty' };
    throw new LogOpenError({
      code: 'foreign',
      path,
      message:
        `${path} is an SQLite database but not a vole log (application_id ${applicationId}` +
        `${hasSchema ? ', with tables' : ''}); it was left untouched. Check the path, or ` +
        `give a new file.`,
    });
  }
  if (version > logSchemaVersion) {
    throw new LogOpenError({
      code: 'newerSchema',
      path,
      message:
        `${path} was written by a newer vole (log schema ${version}; this vole reads up to ` +
        `${logSchemaVersion}). It was not opened for writing and is unchanged; upgrade vole ` +
        `to use it.`,
    });
  }
  if (version === 0) {
    // application_id and user_version are set in one transaction, so this is not ours.
    throw new LogOpenError({
      code: 'corrupt',
      path,
      message:
        `${path} is marked as a vole log but has no schema version; it is damaged. ` +
        `Restore it from a backup.`,
    });
  }
  return { kind: 'vole', version };
}

/**
 * The first seq whose row carries a checksum: 1 for a log created at schema 3 or later, the
 * head + 1 of the migration for an older one, and never (infinity) before schema 3.
 */
export function checksumsFromSeq(db: Db, version: number): number {
  if (version < 3) return Number.POSITIVE_INFINITY;
  const value = db
    .prepare("SELECT value FROM meta WHERE key = 'checksumsFromSeq'")
    .pluck()
    .get() as string | undefined;
  assert(value !== undefined, 'a schema 3 log records checksumsFromSeq in meta');
  return Number(value);
}

/** classify() on what SQLite reports. Only reads: safe on a read-only connection. */
export function readIdentity(db: Db, path: string): Identity {
  const schemaCount = db.prepare('SELECT COUNT(*) FROM sqlite_master').pluck().get() as number;
  return classify(
    {
      applicationId: db.pragma('application_id', { simple: true }) as number,
      version: db.pragma('user_version', { simple: true }) as number,
      hasSchema: schemaCount > 0,
    },
    path,
  );
}

/**
 * Brings a writer's file to `logSchemaVersion` in one IMMEDIATE transaction: the identity
 * is read again under the write lock, so two processes opening one new file cannot both
 * initialise it. A no-op for a current file.
 */
export function migrate(db: Db, path: string): void {
  db.transaction(() => {
    const identity = readIdentity(db, path);
    const from = identity.kind === 'empty' ? 0 : identity.version;
    if (from === logSchemaVersion) return;
    for (let version = from + 1; version <= logSchemaVersion; version++) {
      migrations[version]!(db);
    }
    db.pragma(`application_id = ${logApplicationId}`);
    db.pragma(`user_version = ${logSchemaVersion}`);
  }).immediate();
  assert(!db.inTransaction, 'migrate: the migration transaction is still open');
}
