/**
 * The whole-file corruption check off the way to the first plan: PRAGMA quick_check (every
 * page's structure; it grows with the file, ~0.1–0.3 s per million events) on a worker
 * thread with its own read-only connection, started at the open, so a restart folds and
 * plans without waiting for it. What the restart itself reads is checked as it is read
 * (checksum.ts); this finds damage anywhere else. It is on the way to the first write and
 * the first act on the host: nothing is committed before it passes (EventStore.writer,
 * GroupCommitter), and the store stops its writer when it finds damage (EventStore.halt).
 *
 * The worker is plain JavaScript evaluated from a string: it needs no build step and runs
 * the same under tsx and from dist/. A WAL reader never blocks the writer.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

export type IntegrityResult =
  | { kind: 'ok'; durationMs: number }
  /** quick_check (or SQLite, opening the file) says it is damaged. */
  | { kind: 'damaged'; problems: readonly string[]; durationMs: number }
  /** The check could not run (an I/O error, the worker failed): the file is unchecked. */
  | { kind: 'failed'; message: string; durationMs: number };

const workerSource = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const started = performance.now();
let db;
let result;
try {
  db = new Database(workerData.path, { readonly: true, timeout: workerData.timeoutMs });
  const rows = db.pragma('quick_check(5)');
  const problems = rows.map((row) => row.quick_check).filter((text) => text !== 'ok');
  result = problems.length === 0 ? { kind: 'ok' } : { kind: 'damaged', problems };
} catch (error) {
  const code = String(error && error.code);
  const message = String(error && error.message);
  result = code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB'
    ? { kind: 'damaged', problems: [code + ': ' + message] }
    : { kind: 'failed', message: code + ': ' + message };
} finally {
  if (db !== undefined) db.close();
}
parentPort.postMessage({ ...result, durationMs: performance.now() - started });
`;

const driver = createRequire(import.meta.url).resolve('better-sqlite3');

export interface BackgroundCheck {
  readonly done: Promise<IntegrityResult>;
  /** Stops waiting; `done` then never settles. */
  cancel(): void;
}

/**
 * Starts quick_check of `path` on a worker thread. It keeps the process alive until it
 * ends (at most one quick_check) unless cancelled; the store cancels it when it closes.
 */
export function quickCheckInBackground(path: string, timeoutMs: number): BackgroundCheck {
  const worker = new Worker(workerSource, {
    eval: true,
    workerData: { path, timeoutMs, driver },
  });
  let cancelled = false;
  const done = new Promise<IntegrityResult>((resolve) => {
    worker.once('message', (result: IntegrityResult) => {
      if (!cancelled) resolve(result);
    });
    worker.once('error', (error) => {
      if (!cancelled) resolve({ kind: 'failed', message: error.message, durationMs: 0 });
    });
  });
  return {
    done,
    cancel() {
      // Not terminate(): a worker inside SQLite's quick_check cannot be interrupted, and
      // terminating it held the process's exit for seconds. Unreferenced, it no longer
      // keeps the process alive, and ends with it.
      cancelled = true;
      worker.unref();
    },
  };
}
