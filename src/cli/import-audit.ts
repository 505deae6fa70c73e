/**
 * `vole import --audit-log FILE --db FILE`: an API server's audit log as a new recorded
 * log (src/kube/audit-log.ts), with what could not be read counted and reported.
 */
import { existsSync, readFileSync } from 'node:fs';
import { eventCodec } from '../events/index.js';
import { openLog } from '../log/store.js';
import { type AuditImportCounts, auditLogEvents } from '../kube/audit-log.js';
import { UsageError } from './postmortem.js';

export function importAuditLogCommand(file: string, db: string): number {
  if (existsSync(db))
    throw new UsageError(`${db} exists; import writes a new log only (choose another --db path)`);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(`--audit-log ${file}: ${(error as Error).message}`);
  }
  const counts: AuditImportCounts = {
    lines: 0,
    used: 0,
    skipped: 0,
    unreadable: 0,
    foreign: 0,
    refused: 0,
    problems: [],
  };
  const events = auditLogEvents(text.split('\n'), file, counts);
  const store = openLog(db, { codec: eventCodec, mode: 'create' });
  try {
    for (let i = 0; i < events.length; i += 4096)
      store.append(events.slice(i, i + 4096), { expectedSeq: store.head().seq });
  } finally {
    store.close();
  }
  const say = (line: string) => process.stderr.write(`${line}\n`);
  say(
    `imported ${events.length} events into ${db} from ${counts.lines} audit line(s): ` +
      `${counts.used} change(s) used, ${counts.skipped} skipped (reads, other stages or ` +
      `resources, failed requests), ${counts.unreadable} unreadable, ${counts.foreign} not ` +
      `audit events, ${counts.refused} not recordable`,
  );
  for (const problem of counts.problems) say(`  not recordable: ${problem}`);
  return 0;
}
