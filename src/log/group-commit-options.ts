/**
 * The group committer's options and reports, apart from the committer itself: the package's
 * declarations name them, and the committer's own module reaches the SQLite driver's types,
 * which a user of the package should not need to install.
 */
import type { LogDamagedError } from './errors.js';

/** What a blocked log reports: to say so, with the file and the free space. */
export interface LogBlockage {
  readonly path: string;
  /** SQLite's code and message, e.g. SQLITE_FULL: database or disk is full. */
  readonly code: string;
  readonly message: string;
  /** Bytes available on the log's filesystem, when statfs answers. */
  readonly freeBytes: number | undefined;
  /** Failed attempts so far (1 on the first failure). */
  readonly attempts: number;
  readonly sinceMs: number;
  readonly retryInMs: number;
  /** Events buffered, not yet durable. */
  readonly pendingCount: number;
}

export interface GroupCommitterOptions {
  /** A write failed, first or again: the log is blocked. */
  readonly onBlocked?: (blockage: LogBlockage) => void;
  /** The log was written again after `blockedMs`. */
  readonly onResumed?: (info: { path: string; blockedMs: number; written: number }) => void;
  /** The store's whole-file check passed: commits held until then are made now. */
  readonly onVerified?: () => void;
  /** Retry backoff: first delay, doubled up to the max (default 100 ms to 5 s). */
  readonly retryMs?: { first: number; max: number };
  /**
   * The store's writer was stopped (the background check found the file damaged): nothing
   * more is written, `writable` stays false and whenDurable() never resolves.
   */
  readonly onHalted?: (error: LogDamagedError) => void;
  /** How long an event nobody waits on may stay buffered (default lazyCommitMsDefault). */
  readonly lazyCommitMs?: number;
  /** When to checkpoint the WAL (default checkpointDefault); false: SQLite's backstop only. */
  readonly checkpoint?: CheckpointPolicy | false;
}

/** A checkpoint is due after this many commits or events, and runs after `idleMs` idle. */
export interface CheckpointPolicy {
  readonly afterCommits: number;
  readonly afterEvents: number;
  readonly idleMs: number;
}
