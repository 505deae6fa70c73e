/**
 * Emmett's SQLite event store (@event-driven-io/emmett-sqlite) as a point of comparison.
 *
 * It is not a devDependency: its only 0.42 release (0.42.4) requires the peer
 * @event-driven-io/emmett@0.42.4, which the npm registry reachable here does not have
 * (its newest is 0.42.0), so `npm install -D @event-driven-io/emmett-sqlite` fails with
 * ETARGET. Forcing it (--legacy-peer-deps) would leave a lock file that `npm ci` refuses
 * and would pull the native `sqlite3` peer into every install; installed that way out of
 * tree beside emmett 0.42.0, its appendToStream failed here with SQLITE_BUSY and its schema
 * setup with "cannot change into wal mode from within a transaction". So these figures are
 * reported as unavailable with that reason, unless the package can be imported anyway
 * (installed by hand in node_modules, or in the directory named by BENCH_EMMETT_DIR) and
 * works.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Figure } from './util.js';

export const emmettUnavailableReason =
  '@event-driven-io/emmett-sqlite@0.42.4 needs peer @event-driven-io/emmett@0.42.4, which the registry ' +
  'does not have (newest 0.42.0): npm install -D fails with ETARGET; forced beside emmett 0.42.0 (out of ' +
  'tree, --legacy-peer-deps) it fails at run time (SQLITE_BUSY / "cannot change into wal mode from within a transaction")';

interface EmmettModule {
  getSQLiteEventStore(options: {
    fileName: string;
    schema?: { autoMigration?: 'CreateOrUpdate' | 'None' };
  }): {
    appendToStream(stream: string, events: { type: string; data: unknown }[]): Promise<unknown>;
    aggregateStream<S>(
      stream: string,
      options: { evolve: (s: S, e: { type: string; data: unknown }) => S; initialState: () => S },
    ): Promise<{ state: S }>;
    close?(): Promise<void> | void;
  };
}

/** The module, or why it cannot be loaded. */
export async function loadEmmett(): Promise<{ module: EmmettModule } | { reason: string }> {
  const candidates: string[] = ['@event-driven-io/emmett-sqlite'];
  const dir = process.env.BENCH_EMMETT_DIR;
  if (dir !== undefined && dir !== '') {
    try {
      const resolved = createRequire(join(dir, 'package.json')).resolve(
        '@event-driven-io/emmett-sqlite',
      );
      // The ESM build sits beside the CommonJS one that require() resolves.
      candidates.push(pathToFileURL(resolved.replace(/index\.cjs$/, 'index.js')).href);
    } catch {
      // fall through to the reason below
    }
  }
  for (const specifier of candidates) {
    try {
      return { module: (await import(specifier)) as EmmettModule };
    } catch {
      // try the next one
    }
  }
  return { reason: emmettUnavailableReason };
}

/** Placeholder figures when emmett cannot be loaded. */
export function unavailable(section: string, names: readonly string[], reason: string): Figure[] {
  return names.map((name) => ({
    section,
    name,
    value: null,
    unit: 'events/s',
    note: `unavailable: ${reason}`,
  }));
}

/**
 * Emmett's figures for a section: `append` (appendToStream, events per call as given) or
 * `aggregate` (aggregateStream over 10-event streams of vole's event payloads).
 */
export async function emmettFigures(
  opts:
    | {
        kind: 'append';
        batchSizes: readonly number[];
        eventsFor: (batch: number) => number;
        runs: number;
        payloads: readonly { type: string; data: unknown }[];
        dir: string;
      }
    | {
        kind: 'aggregate';
        events: number;
        runs: number;
        payloads: readonly { type: string; data: unknown }[];
        dir: string;
      },
): Promise<Figure[]> {
  const names =
    opts.kind === 'append'
      ? opts.batchSizes.map(
          (b) => `emmett-sqlite appendToStream, ${b} event${b === 1 ? '' : 's'} per call`,
        )
      : ['emmett-sqlite aggregateStream, 10-event streams'];
  const section = opts.kind === 'append' ? 'append' : 'replay';
  const loaded = await loadEmmett();
  if ('reason' in loaded) return unavailable(section, names, loaded.reason);
  try {
    return opts.kind === 'append'
      ? await measureAppend(loaded.module, opts, names)
      : await measureAggregate(loaded.module, opts, names[0]!);
  } catch (error) {
    return unavailable(
      section,
      names,
      `its API differs from what this benchmark expects: ${(error as Error).message}`,
    );
  }
}

type Store = ReturnType<EmmettModule['getSQLiteEventStore']>;

function open(module: EmmettModule, fileName: string): Store {
  // One shared connection, as PERF.md measured it (a connection per call is far slower).
  return module.getSQLiteEventStore({
    fileName,
    schema: { autoMigration: 'CreateOrUpdate' },
    connectionOptions: { singleton: true },
  } as Parameters<EmmettModule['getSQLiteEventStore']>[0]);
}

async function measureAppend(
  module: EmmettModule,
  opts: {
    batchSizes: readonly number[];
    eventsFor: (batch: number) => number;
    runs: number;
    payloads: readonly { type: string; data: unknown }[];
    dir: string;
  },
  names: readonly string[],
): Promise<Figure[]> {
  const { median } = await import('./util.js');
  const { rmSync } = await import('node:fs');
  const figures: Figure[] = [];
  for (const [index, batch] of opts.batchSizes.entries()) {
    const rates: number[] = [];
    for (let run = 0; run < opts.runs; run++) {
      const fileName = join(opts.dir, `emmett-append-${batch}-${run}.db`);
      for (const s of ['', '-wal', '-shm', '-journal']) rmSync(fileName + s, { force: true });
      const store = open(module, fileName);
      await store.appendToStream('warmup', [opts.payloads[0]!]);
      const total = opts.eventsFor(batch);
      const start = performance.now();
      let k = 0;
      for (let written = 0; written < total; written += batch) {
        const events = [];
        for (let j = 0; j < batch; j++) events.push(opts.payloads[k++ % opts.payloads.length]!);
        await store.appendToStream(`pair-${written % 1000}`, events);
      }
      rates.push(total / ((performance.now() - start) / 1000));
      await store.close?.();
    }
    figures.push({
      section: 'append',
      name: names[index]!,
      value: median(rates),
      unit: 'events/s',
      runs: rates,
    });
  }
  return figures;
}

async function measureAggregate(
  module: EmmettModule,
  opts: {
    events: number;
    runs: number;
    payloads: readonly { type: string; data: unknown }[];
    dir: string;
  },
  name: string,
): Promise<Figure[]> {
  const { median } = await import('./util.js');
  const { rmSync } = await import('node:fs');
  const fileName = join(opts.dir, 'emmett-aggregate.db');
  for (const s of ['', '-wal', '-shm', '-journal']) rmSync(fileName + s, { force: true });
  const store = open(module, fileName);
  const streams = Math.ceil(opts.events / 10);
  let k = 0;
  for (let s = 0; s < streams; s++) {
    const events = [];
    for (let j = 0; j < 10; j++) events.push(opts.payloads[k++ % opts.payloads.length]!);
    await store.appendToStream(`stream-${s}`, events);
  }
  const rates: number[] = [];
  for (let run = 0; run < opts.runs; run++) {
    const start = performance.now();
    let folded = 0;
    for (let s = 0; s < streams; s++) {
      const { state } = await store.aggregateStream<number>(`stream-${s}`, {
        evolve: (n) => n + 1,
        initialState: () => 0,
      });
      folded += state;
    }
    rates.push(folded / ((performance.now() - start) / 1000));
  }
  await store.close?.();
  return [
    {
      section: 'replay',
      name,
      value: median(rates),
      unit: 'events/s',
      runs: rates,
      note: `${streams.toLocaleString('en-US')} streams read one by one, evolve = count`,
    },
  ];
}
