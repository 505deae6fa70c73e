/**
 * Append: events/s into the SQLite log with one durable commit per event and in group
 * commits of 10, 100 and 1,000 events, through vole's EventStore.append and its
 * GroupCommitter, against raw better-sqlite3 inserts of the same rows in the same batch
 * sizes into the same table shape (the ceiling), side by side in every run. Durability is
 * vole's default (synchronous = FULL: every commit is fsynced). The events are real ones,
 * written by the engine (generate.ts runEngine), cycled.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { eventCodec, type VoleEvent } from '../../src/events/index.js';
import { GroupCommitter } from '../../src/log/group-commit.js';
import { openLog } from '../../src/log/store.js';
import { emmettFigures } from './emmett.js';
import { runEngine } from './generate.js';
import {
  type Figure,
  gc,
  median,
  nowMs,
  progress,
  removeDb,
  scratchDir,
  type SectionResult,
} from './util.js';

type NewRow = Omit<VoleEvent, 'seq'>;
type Row = [seq: number, tsMs: number, type: string, data: string];

export interface AppendOptions {
  readonly runs: number;
  readonly quick: boolean;
}

function voleAppend(path: string, events: readonly NewRow[], batch: number): number {
  const store = openLog<VoleEvent>(path, { codec: eventCodec, mode: 'create', durability: 'full' });
  const start = nowMs();
  for (let i = 0; i < events.length; i += batch)
    store.append(events.slice(i, i + batch), { expectedSeq: i });
  const seconds = (nowMs() - start) / 1000;
  if (store.head().seq !== events.length) throw new Error('append: wrong head');
  store.close();
  return events.length / seconds;
}

function voleGroupCommit(path: string, events: readonly NewRow[], batch: number): number {
  const store = openLog<VoleEvent>(path, { codec: eventCodec, mode: 'create', durability: 'full' });
  const committer = new GroupCommitter<VoleEvent>(store);
  const start = nowMs();
  for (let i = 0; i < events.length; i++) {
    committer.push(events[i]!);
    if ((i + 1) % batch === 0) committer.flush();
  }
  committer.flush();
  const seconds = (nowMs() - start) / 1000;
  if (store.appendTransactionCount !== Math.ceil(events.length / batch))
    throw new Error('group commit: wrong transaction count');
  committer.close();
  return events.length / seconds;
}

function rawInsert(path: string, rows: readonly Row[], batch: number): number {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(
    'CREATE TABLE events (seq INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL)',
  );
  const insert = db.prepare<Row>('INSERT INTO events (seq, ts_ms, type, data) VALUES (?, ?, ?, ?)');
  const write = db.transaction((chunk: readonly Row[]) => {
    for (const row of chunk) insert.run(...row);
  });
  const start = nowMs();
  for (let i = 0; i < rows.length; i += batch) write(rows.slice(i, i + batch));
  const seconds = (nowMs() - start) / 1000;
  db.close();
  return rows.length / seconds;
}

export async function runAppend(opts: AppendOptions): Promise<SectionResult> {
  progress('append: collecting real events from the engine');
  const pool = (await runEngine({ targetEvents: 20_000, population: 200, wave: 50 })).events.map(
    ({ seq: _seq, ...rest }) => rest as NewRow,
  );
  const dir = scratchDir('append');
  const batches = [1, 10, 100, 1000];
  const counts: Record<number, number> = opts.quick
    ? { 1: 500, 10: 3_000, 100: 20_000, 1000: 50_000 }
    : { 1: 2_000, 10: 10_000, 100: 50_000, 1000: 200_000 };
  const figures: Figure[] = [];
  for (const batch of batches) {
    const n = counts[batch]!;
    const events = Array.from(
      { length: n },
      (_, i) => ({ ...pool[i % pool.length]!, tsMs: 1_700_000_000_000 + i }) as NewRow,
    );
    const rows: Row[] = events.map((e, i) => {
      const { tsMs, type, ...data } = e as unknown as Record<string, unknown>;
      return [i + 1, tsMs as number, type as string, JSON.stringify(data)];
    });
    const rates = { append: [] as number[], group: [] as number[], raw: [] as number[] };
    for (let run = 0; run < opts.runs; run++) {
      const path = (name: string) => {
        const p = join(dir, `${name}-${batch}.db`);
        removeDb(p);
        return p;
      };
      gc();
      rates.raw.push(rawInsert(path('raw'), rows, batch));
      gc();
      rates.append.push(voleAppend(path('append'), events, batch));
      gc();
      rates.group.push(voleGroupCommit(path('group'), events, batch));
      progress(
        `  batch ${batch} run ${run + 1}/${opts.runs}: raw ${Math.round(rates.raw.at(-1)!)}, ` +
          `EventStore.append ${Math.round(rates.append.at(-1)!)}, GroupCommitter ${Math.round(rates.group.at(-1)!)} events/s`,
      );
    }
    const label = batch === 1 ? '1 event per durable commit' : `${batch} events per commit`;
    const share = rates.group.map((g, i) => (100 * g) / rates.raw[i]!);
    figures.push(
      {
        section: 'append',
        name: `raw better-sqlite3 inserts, ${label} (the ceiling)`,
        value: median(rates.raw),
        unit: 'events/s',
        runs: rates.raw,
      },
      {
        section: 'append',
        name: `EventStore.append, ${label}`,
        value: median(rates.append),
        unit: 'events/s',
        runs: rates.append,
      },
      {
        section: 'append',
        name: `GroupCommitter, ${label}`,
        value: median(rates.group),
        unit: 'events/s',
        runs: rates.group,
      },
      batch === 1
        ? {
            section: 'append',
            name: 'GroupCommitter ÷ raw, 1 per commit',
            value: median(share),
            unit: '%',
            runs: share,
          }
        : {
            section: 'append',
            name: `group commit ÷ raw, ${batch} per commit`,
            value: median(share),
            unit: '%',
            runs: share,
            target: '≥ 50 %',
            met: median(share) >= 50,
          },
    );
  }
  progress('append: emmett-sqlite appendToStream');
  figures.push(
    ...(await emmettFigures({
      kind: 'append',
      batchSizes: [1, 10, 100, 1000],
      runs: opts.runs,
      dir,
      eventsFor: (b) =>
        b === 1
          ? opts.quick
            ? 100
            : 400
          : b === 10
            ? 2_000
            : b === 100
              ? 10_000
              : opts.quick
                ? 20_000
                : 50_000,
      payloads: pool.slice(0, 5_000).map(({ tsMs: _t, type, ...data }) => ({ type, data })),
    })),
  );
  return { section: 'append', figures, details: { durability: 'FULL', counts } };
}
