/**
 * Opening a log for reading: what the post-mortem commands and the inspector share. Every
 * reader folds with the core the log names, so a log of a mode this version does not know
 * is refused here, before anything is read.
 */
import { UnknownModeError } from '../engine/cores.js';
import { eventCodec } from '../events/index.js';
import { openLog } from '../log/store.js';
import { coreOfStore } from './log-world.js';

/** The log at `path`, read-only: never appended to, never migrated. */
export function openReadonly(path: string) {
  const store = openLog(path, { codec: eventCodec, mode: 'readonly', integrityCheck: 'quick' });
  try {
    coreOfStore(store);
  } catch (error) {
    store.close();
    if (error instanceof UnknownModeError) throw new UnknownModeError(`${path}: ${error.message}`);
    throw error;
  }
  return store;
}

export type ReadonlyLog = ReturnType<typeof openReadonly>;
