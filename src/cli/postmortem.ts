/**
 * The post-mortem commands: replay, history, explain, verify, diff, export, import, status.
 * They open the log read-only (import writes a new one) and never append.
 */
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import type { VoleEvent } from '../events/index.js';
import { eventCodec } from '../events/index.js';
import { openLog } from '../log/store.js';
import {
  diffWorlds,
  explain,
  explainText,
  fromJsonLines,
  history,
  toJsonLines,
  verify,
  type Transition,
  type WorldView,
  worldOfLogAt,
} from '../postmortem/index.js';
import { coreOfMode, UnknownModeError } from '../engine/cores.js';
import { openReadonly, type ReadonlyLog } from '../postmortem/open.js';
import { parseDurationMs } from '../sim/duration.js';
import { type SalvageReport, salvageEvents } from '../log/salvage.js';
import { withProgress } from './progress.js';
import { style } from './style.js';

export class UsageError extends Error {
  override name = 'UsageError';
}

type Store = ReadonlyLog;

/** `--at` as a seq (`812`), an offset from the first event (`+90s`), or an ISO time. */
export function resolveMoment(store: Store, at: string | undefined): number {
  const head = store.head().seq;
  if (at === undefined) return head;
  if (/^[0-9]+$/.test(at)) return Math.min(Number(at), head);
  const bounds = store.bounds();
  let tsMs: number | undefined;
  if (at.startsWith('+')) {
    const offset = parseDurationMs(at.slice(1));
    if (offset !== undefined) tsMs = bounds.firstTsMs + offset;
  } else if (!Number.isNaN(Date.parse(at))) {
    tsMs = Date.parse(at);
  }
  if (tsMs === undefined)
    throw new UsageError(
      `--at ${at}: give a seq (812), an offset from the start (+90s) or a time (2026-11-24T10:00:00Z)`,
    );
  return store.seqAtOrBeforeTs(tsMs);
}

/** The world at `seq`: from the latest usable snapshot at or before it, plus the events after. */
function worldAt(store: Store, seq: number): WorldView {
  return worldOfLogAt(store, seq, (events, fromSeq) =>
    withProgress(events, { label: 'replaying', fromSeq, toSeq: seq }),
  ).describe();
}

/**
 * The view's times are wall-clock milliseconds (event timestamps): they print as offsets
 * from the log's first event, the form --at and --since take, never as a bare number.
 */
function printHeader(view: WorldView, out: NodeJS.WritableStream, originMs: number): void {
  const s = style(out);
  const head = `${s.bold(`world at seq ${view.seq}`)} (${offset(view.tsMs, originMs)})`;
  out.write(`${head}  ${view.title}\n`);
}

/** The controller's view of each node: health, what it reports in use, what is published. */
function printNodes(nodes: NonNullable<WorldView['nodes']>, out: NodeJS.WritableStream): void {
  const s = style(out);
  out.write(`${s.bold('nodes')}\n`);
  for (const n of nodes) {
    const health = `${n.exists ? '' : 'deleted, '}${n.ready ? 'ready' : 'not ready'}${n.outOfService ? ', out of service' : ''}`;
    const attached = n.volumesAttached.map((v) => v.name).join(' ');
    out.write(
      `  ${n.node}  ${health}  volumesAttached [${attached}]  volumesInUse [${n.volumesInUse.join(' ')}]\n`,
    );
  }
}

function printWorld(view: WorldView, out: NodeJS.WritableStream, originMs: number): void {
  const s = style(out);
  printHeader(view, out, originMs);
  out.write(`${s.bold('pods')}\n`);
  for (const p of view.pods)
    out.write(
      `  ${p.uid}  ${p.namespace}/${p.name}  ${p.volumes.join(' ')}${p.errors.length ? s.red(`  ✗ ${p.errors.join('; ')}`) : ''}\n`,
    );
  out.write(`${s.bold('attachments')}\n`);
  for (const a of view.attachments)
    out.write(
      `  ${a.volume}@${a.node}  ${s.state(a.state)}${a.devicePath ? `  ${a.devicePath}` : ''}\n`,
    );
  if (view.nodes !== undefined) printNodes(view.nodes, out);
  else out.write(`${s.bold('mounts')}\n`);
  for (const m of view.mounts)
    out.write(
      `  ${m.volume} × pod ${m.pod} (${m.outerVolumeSpecName})  ${s.state(m.state)}${m.remountRequired ? '  remount required' : ''}\n`,
    );
  out.write(`${s.bold('operations in flight')}\n`);
  for (const o of view.operations)
    out.write(
      `  ${o.opId}  ${o.op} ${o.volume}${o.pod ? ` pod ${o.pod}` : ''}${o.call ? `  in ${o.call}` : ''}\n`,
    );
  out.write(`${s.bold('backoffs')}\n`);
  for (const b of view.backoffs)
    out.write(
      `  ${b.op} ${b.volume}${b.pod ? ` pod ${b.pod}` : ''}  retry at ${offset(b.retryAtMs, originMs)} (backoff ${b.durationMs} ms)  ${s.red(b.lastError ?? '')}\n`,
    );
  if (view.volumesInUse !== undefined) out.write(`volumesInUse [${view.volumesInUse.join(' ')}]\n`);
  printStorage(view, out, originMs);
}

/** PersistentVolumes with their phase, and claims with their binding or provisioning. */
function printStorage(view: WorldView, out: NodeJS.WritableStream, originMs: number): void {
  const s = style(out);
  if (view.pvs.length > 0) out.write(`${s.bold('persistent volumes')}\n`);
  for (const pv of view.pvs)
    out.write(
      `  ${pv.name}  ${s.state(pv.phase)}${pv.claim === null ? '' : `  claim ${pv.claim}`}` +
        `  ${pv.capacityBytes ?? '?'} bytes` +
        `${pv.reclaimPolicy === null ? '' : `  ${pv.reclaimPolicy}`}` +
        `${pv.zone === null ? '' : `  zone ${pv.zone}`}${pv.provisioned ? '  provisioned' : ''}\n`,
    );
  if (view.claims.length > 0) out.write(`${s.bold('claims')}\n`);
  for (const c of view.claims) {
    const retry =
      c.nextRetryAtMs === null ? '' : `  next retry at ${offset(c.nextRetryAtMs, originMs)}`;
    const running = c.running ? '  (running)' : '';
    out.write(`  ${c.claim}  ${s.state(c.state)}  ${c.detail}${running}${retry}\n`);
    if (c.lastError !== null) out.write(`    ${s.red(`last error: ${c.lastError.message}`)}\n`);
  }
}

export function replayCommand(db: string, opts: { at?: string; json?: boolean }): number {
  const store = openReadonly(db);
  try {
    const view = worldAt(store, resolveMoment(store, opts.at));
    if (opts.json === true) process.stdout.write(`${JSON.stringify(view, null, 2)}\n`);
    else printWorld(view, process.stdout, store.bounds().firstTsMs);
    return 0;
  } finally {
    store.close();
  }
}

export function statusCommand(db: string, opts: { json?: boolean }): number {
  return replayCommand(db, { ...(opts.json === undefined ? {} : { json: opts.json }) });
}

/** Offsets from the log's first event: `+1.25s` (the form --at and --since take). */
function offset(tsMs: number, originMs: number): string {
  return `+${((tsMs - originMs) / 1000).toFixed(3).replace(/\.?0+$/, '')}s`;
}

function printTransition(t: Transition, originMs: number, out: NodeJS.WritableStream): void {
  const s = style(out);
  const pair =
    t.pair === 'attachment'
      ? `${t.volume}@${t.node}`
      : t.pair === 'persistentVolume'
        ? `PersistentVolume ${t.volume}`
        : t.pair === 'filesystem'
          ? `filesystem of ${t.volume}@${t.node}`
          : `${t.volume} × pod ${t.pod}`;
  out.write(
    `${s.dim(`#${t.seq}`)} ${offset(t.tsMs, originMs)}  ${pair}  ${s.state(t.from)} → ${s.state(t.to)}  ${s.dim(t.because)}${t.error !== null && !t.because.includes(t.error) ? `\n    ${s.red(t.error)}` : ''}\n`,
  );
}

export function historyCommand(
  db: string,
  opts: {
    volume?: string;
    pod?: string;
    node?: string;
    since?: string;
    until?: string;
    json?: boolean;
  },
): number {
  const store = openReadonly(db);
  try {
    const first = store.bounds().firstTsMs;
    const at = (text: string | undefined) => {
      if (text === undefined) return undefined;
      const seq = resolveMoment(store, text);
      return store.get(seq)?.tsMs ?? first;
    };
    const sinceMs = at(opts.since);
    const untilMs = at(opts.until);
    const filter = {
      ...(opts.volume === undefined ? {} : { volume: opts.volume }),
      ...(opts.pod === undefined ? {} : { pod: opts.pod }),
      ...(opts.node === undefined ? {} : { node: opts.node }),
      ...(sinceMs === undefined ? {} : { sinceMs }),
      ...(untilMs === undefined ? {} : { untilMs }),
    };
    if (opts.json !== true && first > 1e12)
      process.stdout.write(
        style(process.stdout).dim(
          `log starts at ${new Date(first).toISOString()}; times are offsets from it\n`,
        ),
      );
    const head = store.head().seq;
    for (const t of history(
      withProgress(store.read({}), { label: 'reading', fromSeq: 1, toSeq: head }),
      filter,
    )) {
      if (opts.json === true) process.stdout.write(`${JSON.stringify(t)}\n`);
      else printTransition(t, first, process.stdout);
    }
    return 0;
  } finally {
    store.close();
  }
}

export function explainCommand(db: string, seqText: string, opts: { json?: boolean }): number {
  if (!/^[0-9]+$/.test(seqText))
    throw new UsageError(`explain takes a seq (a number), not "${seqText}"`);
  const store = openReadonly(db);
  try {
    const chain = explain((seq) => store.get(seq), Number(seqText));
    process.stdout.write(
      opts.json === true ? `${JSON.stringify(chain, null, 2)}\n` : `${explainText(chain)}\n`,
    );
    return 0;
  } finally {
    store.close();
  }
}

export function verifyCommand(db: string, opts: { json?: boolean }): number {
  const store = openReadonly(db);
  try {
    const head = store.head().seq;
    const tty = process.stderr.isTTY === true;
    const report = verify(store.read({}), {
      onProgress: (seq) => {
        if (tty)
          process.stderr.write(`\rverifying ${Math.floor((seq / Math.max(head, 1)) * 100)}%`);
      },
    });
    if (tty) process.stderr.write('\r\x1b[K');
    if (opts.json === true) {
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    } else {
      for (const d of report.divergences)
        process.stdout.write(`seq ${d.seq}: ${d.kind}: ${d.message}\n`);
      process.stdout.write(
        `${report.ok ? 'ok' : 'DIVERGED'}: ${report.events} events, ${report.decisions} decisions re-planned, ${report.invariantChecks} invariant checks, ${report.divergences.length} divergences\n`,
      );
    }
    return report.ok ? 0 : 1;
  } finally {
    store.close();
  }
}

export function diffCommand(db: string, a: string, b: string, opts: { json?: boolean }): number {
  const store = openReadonly(db);
  try {
    const diff = diffWorlds(
      worldAt(store, resolveMoment(store, a)),
      worldAt(store, resolveMoment(store, b)),
      store.bounds().firstTsMs,
    );
    if (opts.json === true) {
      process.stdout.write(`${JSON.stringify(diff, null, 2)}\n`);
      return 0;
    }
    const s = style(process.stdout);
    process.stdout.write(
      `from seq ${diff.from} to seq ${diff.to}: ${diff.changes.length} changes\n`,
    );
    for (const c of diff.changes) {
      process.stdout.write(
        `  ${c.what}: ${c.before === null ? s.dim('(none)') : c.before} → ${c.after === null ? s.dim('(gone)') : c.after}\n`,
      );
    }
    return 0;
  } finally {
    store.close();
  }
}

export async function exportCommand(
  db: string,
  opts: { out?: string; salvage?: boolean },
): Promise<number> {
  if (opts.salvage === true) return salvageCommand(db, opts);
  const store = openReadonly(db);
  try {
    const events = withProgress(store.read({}), {
      label: 'exporting',
      fromSeq: 1,
      toSeq: store.head().seq,
    });
    await writeLines(toJsonLines(events), opts.out);
    return 0;
  } finally {
    store.close();
  }
}

async function writeLines(lines: Iterable<string>, path: string | undefined): Promise<void> {
  const out = path === undefined ? process.stdout : createWriteStream(path);
  for (const line of lines) {
    if (!out.write(line)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
  }
  if (out !== process.stdout)
    await new Promise<void>((resolve) => (out as NodeJS.WritableStream).end(() => resolve()));
}

/**
 * `export --salvage`: every event still readable, in seq order, up to the first gap; where
 * it stopped goes to stderr. Exit 0 when the whole log was read, 1 when it stopped early.
 */
async function salvageCommand(db: string, opts: { out?: string }): Promise<number> {
  const report: SalvageReport = { lastSeq: 0, headSeq: undefined, stop: undefined };
  await writeLines(toJsonLines(salvageEvents(db, eventCodec, report)), opts.out);
  const head = report.headSeq === undefined ? 'unknown (unreadable)' : `${report.headSeq}`;
  const into = opts.out === undefined ? '' : ` into ${opts.out}`;
  if (report.stop === undefined) {
    process.stderr.write(`salvaged all ${report.lastSeq} events of ${db}${into}\n`);
    return 0;
  }
  process.stderr.write(
    `salvaged events 1–${report.lastSeq} of ${db}${into}; stopped at seq ${report.stop.seq}: ` +
      `${report.stop.reason}. The log's head is ${head}: the events after seq ` +
      `${report.lastSeq} are lost. Build a sound log from the export with ` +
      `\`vole import FILE --db NEW\`; an agent started on it finds what the lost events ` +
      `left on the host.\n`,
  );
  return 1;
}

/** Refuses a mode this version does not know, as a usage error naming the file. */
function knownMode(mode: string | undefined, file: string): void {
  try {
    coreOfMode(mode);
  } catch (error) {
    if (error instanceof UnknownModeError) throw new UsageError(`${file}: ${error.message}`);
    throw error;
  }
}

export async function importCommand(file: string, db: string): Promise<number> {
  if (existsSync(db))
    throw new UsageError(`${db} exists; import writes a new log only (choose another --db path)`);
  const store = openLog(db, { codec: eventCodec, mode: 'create' });
  try {
    const lines = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
    const batch: VoleEvent[] = [];
    const collected: string[] = [];
    for await (const line of lines) collected.push(line);
    for (const event of fromJsonLines(collected)) {
      if (event.type === 'EngineStarted') knownMode(event.mode, file);
      batch.push(event);
      if (batch.length >= 4096) flush();
    }
    flush();
    process.stderr.write(`imported ${store.head().seq} events into ${db}\n`);
    return 0;
    function flush() {
      if (batch.length === 0) return;
      const head = store.head().seq;
      store.append(
        batch.map(({ seq: _seq, ...rest }) => rest),
        { expectedSeq: head },
      );
      batch.length = 0;
    }
  } finally {
    store.close();
  }
}

/** `vole get pvs|pvcs --db FILE`: a node agent's PVs or claims, as kubectl lists them. */
export function getFromLogCommand(what: string, db: string, opts: { json?: boolean }): number {
  if (what !== 'pvs' && what !== 'pvcs')
    throw new UsageError(`vole get --db: lists pvs or pvcs of a node log, not "${what}"`);
  const store = openReadonly(db);
  try {
    const view = worldAt(store, store.head().seq);
    const rows =
      what === 'pvs'
        ? view.pvs.map((pv) => ({
            name: pv.name,
            capacity: pv.capacityBytes === null ? '' : String(pv.capacityBytes),
            reclaimPolicy: pv.reclaimPolicy ?? '',
            status: pv.phase,
            claim: pv.claim ?? '',
            storageClass: pv.storageClassName ?? '',
            zone: pv.zone ?? '',
          }))
        : view.claims.map((c) => ({
            claim: c.claim,
            status: c.state,
            volume: c.volume ?? '',
            storageClass: c.storageClassName,
            detail: c.detail,
          }));
    if (opts.json === true) process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
    else if (rows.length === 0) process.stdout.write(`no ${what}\n`);
    else {
      const header = Object.keys(rows[0]!);
      const cells = [header.map((h) => h.toUpperCase()), ...rows.map((r) => Object.values(r))];
      const widths = header.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)));
      for (const r of cells)
        process.stdout.write(
          `${r
            .map((c, i) => c.padEnd(widths[i]!))
            .join('  ')
            .trimEnd()}\n`,
        );
    }
    return 0;
  } finally {
    store.close();
  }
}
