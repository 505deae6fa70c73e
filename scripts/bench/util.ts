/** Shared helpers of the benchmark: timing, statistics, progress, GC, temporary files. */
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** The checkout: the nearest directory above this file with a package.json (the bench runs compiled from dist/scripts/bench). */
export const repoRoot = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`no package.json above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
  return dir;
})();
export const resultsDir = join(repoRoot, 'bench-results');

/** Progress for people, on stderr (stdout carries only the table). */
export function progress(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

export function nowMs(): number {
  return performance.now();
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The q-quantile (0..1) by the nearest-rank method. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[rank - 1]!;
}

let gcFn: (() => void) | undefined;

/** A full garbage collection (exposes V8's gc at run time when --expose-gc was not given). */
export function gc(): void {
  if (gcFn === undefined) {
    const existing = (globalThis as { gc?: () => void }).gc;
    if (existing !== undefined) {
      gcFn = existing;
    } else {
      setFlagsFromString('--expose-gc');
      gcFn = runInNewContext('gc') as () => void;
    }
  }
  gcFn();
  gcFn();
}

/** Heap in use after a full collection, in bytes. */
export function heapUsedAfterGc(): number {
  gc();
  return process.memoryUsage().heapUsed;
}

/** A fresh directory under bench-results/tmp (on the real disk, not a tmpfs). */
export function scratchDir(name: string): string {
  const dir = join(resultsDir, 'tmp', name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

export function removeDb(path: string): void {
  for (const suffix of ['', '-wal', '-shm', '-journal', '-lock'])
    rmSync(path + suffix, { force: true });
}

/** Yields to the event loop once (lets setImmediate callbacks run). */
export function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export function sleepMs(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** One measured figure, as written to latest.json and printed in the table. */
export interface Figure {
  /** Section, e.g. "append". */
  readonly section: string;
  readonly name: string;
  /** The median; null when the figure is unavailable. */
  readonly value: number | null;
  readonly unit: string;
  /** Every run's value (the median is taken over these). */
  readonly runs?: readonly number[];
  /** The target in words, e.g. "≥ 50 % of raw". */
  readonly target?: string;
  /** Whether the target was met; undefined when the figure has no target. */
  readonly met?: boolean;
  /** Why a figure is unavailable, or what it means. */
  readonly note?: string;
}

export interface SectionResult {
  readonly section: string;
  readonly figures: Figure[];
  readonly details?: Record<string, unknown>;
}

/** Runs `fn` `runs` times (after an optional warm-up) and returns each run's value. */
export async function repeat(
  runs: number,
  fn: (run: number) => number | Promise<number>,
  opts: { warmup?: boolean; label?: string } = {},
): Promise<number[]> {
  if (opts.warmup === true) await fn(-1);
  const values: number[] = [];
  for (let run = 0; run < runs; run++) {
    const value = await fn(run);
    values.push(value);
    if (opts.label !== undefined)
      progress(`  ${opts.label} run ${run + 1}/${runs}: ${formatNumber(value)}`);
  }
  return values;
}

export function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (abs >= 1000) return Math.round(value).toLocaleString('en-US');
  if (abs >= 100) return value.toFixed(0);
  if (abs >= 10) return value.toFixed(1);
  if (abs >= 1) return value.toFixed(2);
  return value.toPrecision(2);
}
