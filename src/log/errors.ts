/** Errors of the event store, each with a code to branch on and a message that says what to do. */
export type LogOpenErrorCode = 'notFound' | 'notSqlite' | 'foreign' | 'newerSchema' | 'locked' | 'corrupt' | 'readonly';

export class LogOpenError extends Error {
  override name = 'LogOpenError';
  constructor(readonly code: LogOpenErrorCode, readonly path: string, message: string) {
    super(message);
  }
}

export class LogReadError extends Error {
  override name = 'LogReadError';
  constructor(readonly seq: number, message: string) {
    super(message);
  }
}

export class ExpectedSeqConflictError extends Error {
  override name = 'ExpectedSeqConflictError';
  constructor(readonly expectedSeq: number, readonly actualSeq: number) {
    super(`append expected the log to end at seq ${expectedSeq} but it ends at ${actualSeq}: ` +
      'another writer appended; re-read the log before appending');
  }
}
