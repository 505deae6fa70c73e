/**
 * Emmett's SQLite event store (@event-driven-io/emmett-sqlite) as a point of comparison:
 * appendToStream in the append section, aggregateStream in the replay section.
 *
 * The version measured is 0.38.5 (with @event-driven-io/emmett 0.38.5 and its native peer
 * sqlite3 5). The newer 0.42.4 cannot be installed from the npm registry reachable here: it
 * requires the peer @event-driven-io/emmett@0.42.4, and the registry's newest is 0.42.0
 * (ETARGET); forced beside emmett 0.42.0 it failed at run time (SQLITE_BUSY, "cannot change
 * into wal mode from within a transaction"). 0.38.5 installs and works.
 *
 * It is not a devDependency (that would compile sqlite3 on every `npm ci` of the project).
 * When the project cannot import it, the bench installs it itself, once, into
 * bench-results/emmett/ (`npm install --prefix`, about two minutes: sqlite3 builds
 * natively) and imports it from there; it reinstalls when that copy is not the pinned
 * version or lacks sqlite3's native binding. When the install fails (offline, say), the
 * figures are reported as unavailable with npm's reason. BENCH_EMMETT_DIR names another
 * directory to import it from instead (any version, used as it is; installed into only when
 * it has no package.json of its own). `--no-emmett` (BENCH_NO_EMMETT=1) skips emmett.
 *
 * What is measured is emmett's public API as it stands in 0.38.5: getSQLiteEventStore on a
 * file opens a new sqlite3 connection (journal_mode = WAL, synchronous left at SQLite's
 * default FULL) for every appendToStream and aggregateStream call and closes it after; the
 * version has no option to keep one open, so that cost is part of its figures.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Figure, median, progress, removeDb, repoRoot, resultsDir } from './util.js';

/** The versions the bench installs (see above for why not 0.42). */
const pinned = {
  '@event-driven-io/emmett-sqlite': '0.38.5',
  '@event-driven-io/emmett': '0.38.5',
  sqlite3: '5',
} as const;
const packageName = '@event-driven-io/emmett-sqlite';
const defaultDir = join(resultsDir, 'emmett');

interface EmmettEvent {
  type: string;
  data: unknown;
}

/** The part of 0.38.5's API the bench uses. */
interface EmmettStore {
  appendToStream(
    streamName: string,
    events: EmmettEvent[],
  ): Promise<{ nextExpectedStreamVersion: bigint }>;
  aggregateStream<State>(
    streamName: string,
    options: { evolve: (state: State, event: EmmettEvent) => State; initialState: () => State },
  ): Promise<{ state: State; currentStreamVersion: bigint; streamExists: boolean }>;
}

interface EmmettModule {
  getSQLiteEventStore(options: {
    fileName: string;
    schema?: { autoMigration?: 'None' | 'CreateOrUpdate' };
  }): EmmettStore;
}

interface Loaded {
  module: EmmettModule;
  /** e.g. "emmett-sqlite 0.38.5 from bench-results/emmett". */
  label: string;
}

/** The module, or why it cannot be loaded (installing it first if need be). */
export async function loadEmmett(): Promise<Loaded | { reason: string }> {
  if (process.env.BENCH_NO_EMMETT === '1')
    return { reason: 'skipped (--no-emmett or BENCH_NO_EMMETT=1)' };
  // Installed in the project by hand: use it as it is.
  const inProject = locate(repoRoot);
  if (inProject !== undefined) return importFrom(inProject, 'the project');
  const envDir = process.env.BENCH_EMMETT_DIR;
  const dir = envDir !== undefined && envDir !== '' ? resolve(envDir) : defaultDir;
  const where = dir.startsWith(`${repoRoot}/`) ? dir.slice(repoRoot.length + 1) : dir;
  const found = locate(dir);
  // A directory the bench did not set up is used as it is, whatever version it holds.
  if (!setUpByBench(dir))
    return found !== undefined
      ? importFrom(found, where)
      : { reason: `${packageName} is not installed in BENCH_EMMETT_DIR=${dir}` };
  if (
    found !== undefined &&
    found.version === pinned[packageName] &&
    existsSync(sqliteBinding(dir))
  )
    return importFrom(found, where);
  const failure = install(dir);
  if (failure !== undefined) return { reason: failure };
  const installed = locate(dir);
  if (installed === undefined) return { reason: `npm installed nothing importable in ${dir}` };
  return importFrom(installed, where);
}

const manifestName = 'vole-bench-emmett';

/** Whether `dir` is (or can become) the bench's own install: no package.json, or ours. */
function setUpByBench(dir: string): boolean {
  const manifest = join(dir, 'package.json');
  if (!existsSync(manifest)) return true;
  try {
    return (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === manifestName;
  } catch {
    return false;
  }
}

interface Located {
  /** The package's ESM entry point. */
  entry: string;
  version: string;
}

/** emmett-sqlite as node_modules under `dir` holds it, if it does. */
function locate(dir: string): Located | undefined {
  let cjsEntry: string;
  try {
    cjsEntry = createRequire(join(dir, 'package.json')).resolve(packageName);
  } catch {
    return undefined;
  }
  // From …/emmett-sqlite/dist/index.cjs up to the package's own package.json.
  let root = dirname(cjsEntry);
  while (!existsSync(join(root, 'package.json')) && dirname(root) !== root) root = dirname(root);
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    version: string;
    exports?: { '.'?: { import?: { default?: string } } };
  };
  const esm = manifest.exports?.['.']?.import?.default;
  return {
    entry: esm !== undefined ? join(root, esm) : cjsEntry,
    version: manifest.version,
  };
}

async function importFrom(found: Located, where: string): Promise<Loaded | { reason: string }> {
  try {
    const module = (await import(pathToFileURL(found.entry).href)) as EmmettModule;
    if (typeof module.getSQLiteEventStore !== 'function')
      return { reason: `emmett-sqlite ${found.version} (${where}) has no getSQLiteEventStore` };
    return { module, label: `emmett-sqlite ${found.version} from ${where}` };
  } catch (error) {
    return {
      reason: `emmett-sqlite ${found.version} (${where}) cannot be imported: ${firstLine(error)}`,
    };
  }
}

/** Where sqlite3's native binding lands when its install script ran (prebuilt or compiled). */
function sqliteBinding(dir: string): string {
  return join(dir, 'node_modules', 'sqlite3', 'build', 'Release', 'node_sqlite3.node');
}

/**
 * Installs the pinned versions into `dir`; undefined when done, else why not. A failure is
 * remembered for the rest of this bench run (the sections are sibling processes), so an
 * offline machine waits for npm once, not once per section.
 */
function install(dir: string): string | undefined {
  const failedMarker = join(dir, 'install-failed.json');
  try {
    const failed = JSON.parse(readFileSync(failedMarker, 'utf8')) as {
      parent: number;
      reason: string;
    };
    const recent = Date.now() - statSync(failedMarker).mtimeMs < 30 * 60_000;
    if (failed.parent === process.ppid && recent) return failed.reason;
  } catch {
    // no failure recorded (or an unreadable record): try
  }
  const started = Date.now();
  progress(
    `installing emmett-sqlite ${pinned[packageName]} for the comparison (once, ~2 min) into ${dir}…`,
  );
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'package.json'),
    `${JSON.stringify(
      {
        name: manifestName,
        private: true,
        description: "emmett-sqlite for vole's benchmark (scripts/bench/emmett.ts); safe to delete",
        dependencies: pinned,
        // npm 11 may hold back unapproved install scripts; sqlite3's builds its binding.
        allowScripts: { sqlite3: true },
      },
      null,
      2,
    )}\n`,
  );
  const fail = (reason: string): string => {
    writeFileSync(failedMarker, `${JSON.stringify({ parent: process.ppid, reason })}\n`);
    progress(`emmett-sqlite not installed: ${reason}`);
    return reason;
  };
  const npm = (args: string[]) =>
    spawnSync('npm', [...args, '--prefix', dir, '--no-audit', '--no-fund'], {
      cwd: dir,
      encoding: 'utf8',
      timeout: 15 * 60_000,
    });
  const installed = npm(['install']);
  if (installed.error !== undefined) return fail(`npm install failed: ${installed.error.message}`);
  if (installed.status !== 0) return fail(`npm install failed: ${npmError(installed.stderr)}`);
  if (!existsSync(sqliteBinding(dir))) {
    progress(
      'sqlite3 has no native binding (its install script did not run): npm rebuild sqlite3…',
    );
    const rebuilt = npm(['rebuild', 'sqlite3']);
    if (rebuilt.status !== 0 || !existsSync(sqliteBinding(dir)))
      return fail(
        `sqlite3's native binding was not built (npm rebuild sqlite3: ${
          rebuilt.error?.message ?? npmError(rebuilt.stderr)
        })`,
      );
  }
  rmSync(failedMarker, { force: true });
  progress(`installed emmett-sqlite in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return undefined;
}

/** npm's error in one line: "npm error code X" and the first line that says what happened. */
function npmError(stderr: string): string {
  const lines = stderr
    .split('\n')
    .filter((l) => l.startsWith('npm error '))
    .map((l) => l.slice('npm error '.length).trim());
  const code = lines.find((l) => /^code \S+$/.test(l))?.slice('code '.length);
  const message = lines.find(
    (l) => l !== '' && !/^(code|errno|syscall|path|A complete log)\b/.test(l),
  );
  if (message === undefined) return stderr.trim().split('\n')[0] ?? 'no output';
  return code === undefined ? message : `${code}: ${message}`;
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!;
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
        payloads: readonly EmmettEvent[];
        dir: string;
      }
    | {
        kind: 'aggregate';
        events: number;
        runs: number;
        payloads: readonly EmmettEvent[];
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
  // emmett-sqlite console.logs every failed transaction's error, and stdout carries the table.
  const log = console.log;
  console.log = () => {};
  try {
    return opts.kind === 'append'
      ? await measureAppend(loaded, opts, names)
      : await measureAggregate(loaded, opts, names[0]!);
  } catch (error) {
    return unavailable(section, names, `${loaded.label} failed: ${firstLine(error)}`);
  } finally {
    console.log = log;
  }
}

/**
 * A store on a fresh file, whose appendToStream retries the calls that failed with
 * "SQLITE_BUSY: cannot commit transaction - SQL statements in progress", and checks that
 * every call (retried or not) moved its stream by exactly the events it carried.
 *
 * That error is a race inside 0.38.5, not contention (one connection at a time, one
 * process): its INSERT/UPDATE … RETURNING goes through sqlite3's Database#get, which
 * resolves with the first row before the statement is finalized, so now and then COMMIT
 * runs while that statement is still open. The transaction is rolled back and the
 * connection closed, so the call can be made again. It happens more often on a loaded
 * machine; the retries stay inside the timed loop and are counted in the figure's note.
 */
class Store {
  readonly #store: EmmettStore;
  readonly #versions = new Map<string, bigint>();
  calls = 0;
  retries = 0;

  constructor(module: EmmettModule, fileName: string) {
    removeDb(fileName);
    this.#store = module.getSQLiteEventStore({
      fileName,
      schema: { autoMigration: 'CreateOrUpdate' },
    });
  }

  async append(stream: string, events: EmmettEvent[]): Promise<void> {
    this.calls++;
    const expected = (this.#versions.get(stream) ?? 0n) + BigInt(events.length);
    for (let attempt = 1; ; attempt++) {
      try {
        const { nextExpectedStreamVersion } = await this.#store.appendToStream(stream, events);
        if (nextExpectedStreamVersion !== expected)
          throw new Error(
            `appendToStream left ${stream} at version ${nextExpectedStreamVersion}, expected ${expected}`,
          );
        this.#versions.set(stream, expected);
        return;
      } catch (error) {
        if (attempt >= 10 || (error as { code?: unknown }).code !== 'SQLITE_BUSY') throw error;
        this.retries++;
      }
    }
  }

  async count(stream: string): Promise<number> {
    const { state } = await this.#store.aggregateStream<number>(stream, {
      evolve: (n) => n + 1,
      initialState: () => 0,
    });
    return state;
  }
}

function retried(retries: number, calls: number): string {
  return retries === 0
    ? ''
    : `; ${retries} of ${calls.toLocaleString('en-US')} calls retried after emmett's SQLITE_BUSY race`;
}

async function measureAppend(
  loaded: Loaded,
  opts: {
    batchSizes: readonly number[];
    eventsFor: (batch: number) => number;
    runs: number;
    payloads: readonly EmmettEvent[];
    dir: string;
  },
  names: readonly string[],
): Promise<Figure[]> {
  const figures: Figure[] = [];
  for (const [index, batch] of opts.batchSizes.entries()) {
    const rates: number[] = [];
    let retries = 0;
    let calls = 0;
    for (let run = 0; run < opts.runs; run++) {
      const store = new Store(loaded.module, join(opts.dir, `emmett-append-${batch}-${run}.db`));
      await store.append('warmup', [opts.payloads[0]!]); // creates the schema
      const total = opts.eventsFor(batch);
      const start = performance.now();
      let k = 0;
      // Calls go round 1,000 streams (as vole's pairs), whatever the batch size.
      for (let call = 0, written = 0; written < total; call++, written += batch) {
        const events: EmmettEvent[] = [];
        for (let j = 0; j < batch; j++) events.push(opts.payloads[k++ % opts.payloads.length]!);
        await store.append(`pair-${call % 1000}`, events);
      }
      rates.push(total / ((performance.now() - start) / 1000));
      retries += store.retries;
      calls += store.calls;
    }
    figures.push({
      section: 'append',
      name: names[index]!,
      value: median(rates),
      unit: 'events/s',
      runs: rates,
      note: `${loaded.label}; a sqlite3 connection opened and closed per call${retried(retries, calls)}`,
    });
  }
  return figures;
}

async function measureAggregate(
  loaded: Loaded,
  opts: { events: number; runs: number; payloads: readonly EmmettEvent[]; dir: string },
  name: string,
): Promise<Figure[]> {
  const store = new Store(loaded.module, join(opts.dir, 'emmett-aggregate.db'));
  const streams = Math.ceil(opts.events / 10);
  let k = 0;
  for (let s = 0; s < streams; s++) {
    const events: EmmettEvent[] = [];
    for (let j = 0; j < 10; j++) events.push(opts.payloads[k++ % opts.payloads.length]!);
    await store.append(`stream-${s}`, events);
  }
  const rates: number[] = [];
  for (let run = 0; run < opts.runs; run++) {
    const start = performance.now();
    let folded = 0;
    for (let s = 0; s < streams; s++) folded += await store.count(`stream-${s}`);
    const seconds = (performance.now() - start) / 1000;
    if (folded !== streams * 10)
      throw new Error(`aggregateStream folded ${folded} events, ${streams * 10} were appended`);
    rates.push(folded / seconds);
  }
  return [
    {
      section: 'replay',
      name,
      value: median(rates),
      unit: 'events/s',
      runs: rates,
      note:
        `${loaded.label}; ${streams.toLocaleString('en-US')} streams read one by one, ` +
        'evolve = count, a sqlite3 connection opened and closed per call',
    },
  ];
}
