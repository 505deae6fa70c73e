/**
 * `vole import --audit-log FILE [--kubelet-log NODE=FILE...] [--controller-log FILE]
 * --db FILE`: an API server's audit log as a new recorded log (src/kube/audit-log.ts), with
 * the volume operations the kubelets and the kube-controller-manager wrote in their own
 * logs (src/kube/klog.ts) merged in by time; what could not be read is counted and reported.
 */
import { existsSync, readFileSync } from 'node:fs';
import { eventCodec, type NewEvent } from '../events/index.js';
import { openLog } from '../log/store.js';
import { type AuditImportCounts, auditLogEvents } from '../kube/audit-log.js';
import { type KlogImportCounts, type KlogSource, klogEvents, mergeInTime } from '../kube/klog.js';
import { UsageError } from './postmortem.js';

export interface ImportAuditOptions {
  readonly auditLog: string;
  readonly db: string;
  /** `NODE=FILE`: a kubelet's log, and the node it ran on. */
  readonly kubeletLog?: readonly string[];
  readonly controllerLog?: string;
  /** The year of the klog lines (they carry none); else the audit log's. */
  readonly klogYear?: string;
}

function readText(flag: string, file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(`${flag} ${file}: ${(error as Error).message}`);
  }
}

/** The klog files the options name, read. */
function klogSources(opts: ImportAuditOptions): KlogSource[] {
  const sources: KlogSource[] = (opts.kubeletLog ?? []).map((spec) => {
    const eq = spec.indexOf('=');
    if (eq <= 0 || eq === spec.length - 1)
      throw new UsageError(
        `--kubelet-log ${spec}: give the node and its kubelet's log as NODE=FILE ` +
          `(e.g. --kubelet-log node-a=/var/log/kubelet.log)`,
      );
    const file = spec.slice(eq + 1);
    const lines = readText('--kubelet-log', file).split('\n');
    return { component: 'kubelet', node: spec.slice(0, eq), file, lines };
  });
  if (opts.controllerLog !== undefined)
    sources.push({
      component: 'kube-controller-manager',
      file: opts.controllerLog,
      lines: readText('--controller-log', opts.controllerLog).split('\n'),
    });
  return sources;
}

/** The year klog lines are read in: --klog-year, else the year the audit log starts. */
function yearOf(opts: ImportAuditOptions, startMs: number): { year: number; from: string } {
  if (opts.klogYear !== undefined) {
    const year = Number(opts.klogYear);
    if (!Number.isInteger(year) || year < 1970 || year > 9999)
      throw new UsageError(`--klog-year ${opts.klogYear}: give a year such as 2026`);
    return { year, from: '--klog-year' };
  }
  if (startMs <= 0)
    throw new UsageError(
      'klog lines carry no year and the audit log has no change to take it from: give --klog-year YYYY',
    );
  return { year: new Date(startMs).getUTCFullYear(), from: 'the audit log' };
}

export function importAuditLogCommand(opts: ImportAuditOptions): number {
  const { auditLog: file, db } = opts;
  if (existsSync(db))
    throw new UsageError(`${db} exists; import writes a new log only (choose another --db path)`);
  const text = readText('--audit-log', file);
  const sources = klogSources(opts);
  const counts: AuditImportCounts = {
    lines: 0,
    used: 0,
    skipped: 0,
    unreadable: 0,
    foreign: 0,
    refused: 0,
    problems: [],
  };
  const audit = auditLogEvents(text.split('\n'), file, counts);
  const say = (line: string) => process.stderr.write(`${line}\n`);
  const [started, ...changes] = audit;
  const startMs = started?.tsMs ?? 0;
  const runs: NewEvent[][] = [changes];
  const klog: KlogImportCounts = { lines: 0, used: 0, other: 0, unreadable: 0, problems: [] };
  if (sources.length > 0) {
    const { year, from } = yearOf(opts, startMs);
    // An explicit year is taken as given; the audit log's is moved across a New Year.
    const near = opts.klogYear === undefined ? startMs : undefined;
    for (const source of sources) runs.push(klogEvents(source, year, klog, near));
    say(`klog lines carry no year: read as ${year} (from ${from}), their times as UTC`);
  }
  const events = [...(started === undefined ? [] : [started]), ...mergeInTime(runs)];
  const store = openLog(db, { codec: eventCodec, mode: 'create' });
  try {
    for (let i = 0; i < events.length; i += 4096)
      store.append(events.slice(i, i + 4096), { expectedSeq: store.head().seq });
  } finally {
    store.close();
  }
  say(
    `imported ${events.length} events into ${db} from ${counts.lines} audit line(s): ` +
      `${counts.used} change(s) used, ${counts.skipped} skipped (reads, other stages or ` +
      `resources, failed requests), ${counts.unreadable} unreadable, ${counts.foreign} not ` +
      `audit events, ${counts.refused} not recordable`,
  );
  for (const problem of counts.problems) say(`  not recordable: ${problem}`);
  if (sources.length > 0) {
    say(
      `from ${sources.length} klog file(s), ${klog.lines} line(s): ${klog.used} volume ` +
        `operation(s) used, ${klog.other} about something else, ${klog.unreadable} unreadable`,
    );
    for (const problem of klog.problems) say(`  unreadable: ${problem}`);
  }
  return 0;
}
