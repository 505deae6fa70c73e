/**
 * `vole chaos --seed N --runs K [--out DIR] [--cluster | --kube]`: randomized fault
 * simulation (src/sim/chaos.ts; with --cluster, cluster mode: src/sim/cluster-chaos.ts;
 * with --kube, the agents and controllers on a simulated API server: src/sim/kube-chaos.ts).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { chaos } from '../sim/chaos.js';
import { clusterChaos } from '../sim/cluster-chaos.js';
import { kubeChaos } from '../sim/kube-chaos.js';
import { UsageError } from './postmortem.js';

function commit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return 'unknown';
  }
}

export async function chaosCommand(opts: {
  seed?: string;
  runs?: string;
  out?: string;
  json?: boolean;
  cluster?: boolean;
  kube?: boolean;
  short?: boolean;
  workers?: string;
}): Promise<number> {
  if (opts.cluster === true && opts.kube === true)
    throw new UsageError('--cluster and --kube are two modes: give one');
  if (opts.cluster === true) return clusterChaosCommand(opts);
  if (opts.kube === true) return kubeChaosCommand(opts);
  const { seed, runs } = seedAndRuns(opts);
  process.stderr.write(`SEED=${seed} commit=${commit()} runs=${runs}\n`);
  const bar = progress(runs);
  const report = await chaos({ seed, runs, onProgress: bar.onProgress });
  bar.done();
  const out = opts.out ?? 'chaos-failures';
  const files: string[] = [];
  if (report.failures.length > 0) {
    mkdirSync(out, { recursive: true });
    for (const f of report.failures) {
      const file = join(out, `chaos-seed-${f.seed}.yaml`);
      writeFileSync(
        file,
        `# vole chaos failure; reproduce with: vole simulate ${file}\n# ${f.messages.join('\n# ')}\n${f.scenario}`,
      );
      files.push(file);
    }
  }
  if (opts.json === true) {
    process.stdout.write(
      `${JSON.stringify({ ...report, failures: report.failures.map((f, i) => ({ seed: f.seed, messages: f.messages, file: files[i] })) }, null, 2)}\n`,
    );
  } else {
    for (const [i, f] of report.failures.entries())
      process.stdout.write(`seed ${f.seed}: ${f.messages[0]} (${files[i]})\n`);
    process.stdout.write(
      `${report.failures.length === 0 ? 'ok' : 'FAILED'}: ${report.runs} runs, ${report.events} events, ` +
        `${report.calls} plugin calls (${report.faultsInjected} faulty), ${report.restarts} restarts, ` +
        `${report.invariantChecks} invariant checks, ${report.failures.length} failures\n`,
    );
  }
  return report.failures.length === 0 ? 0 : 1;
}

/** --seed (default: drawn from the clock) and --runs (default 100), checked. */
function seedAndRuns(opts: { seed?: string; runs?: string }): { seed: number; runs: number } {
  const seed = opts.seed === undefined ? Date.now() % 1_000_000 : Number(opts.seed);
  const runs = Number(opts.runs ?? 100);
  if (!Number.isSafeInteger(seed) || seed < 0)
    throw new UsageError(`--seed ${opts.seed}: give a whole number`);
  if (!Number.isSafeInteger(runs) || runs < 1)
    throw new UsageError(`--runs ${opts.runs}: give a whole number ≥ 1`);
  return { seed, runs };
}

/** A TTY progress line on stderr, every 25 runs. */
function progress(runs: number): { onProgress: (done: number) => void; done: () => void } {
  const tty = process.stderr.isTTY === true;
  return {
    onProgress: (done) => {
      if (tty && (done % 25 === 0 || done === runs))
        process.stderr.write(`\rchaos ${done}/${runs}`);
    },
    done: () => {
      if (tty) process.stderr.write('\r\x1b[K');
    },
  };
}

/**
 * Each failing seed's run as JSON under `out` (default chaos-failures/, made only when a
 * seed failed), with the command that runs it again; the files, in the failures' order.
 */
function writeFailureFiles(
  out: string | undefined,
  mode: 'cluster' | 'kube',
  failures: readonly { readonly seed: number }[],
): string[] {
  const dir = out ?? 'chaos-failures';
  if (failures.length > 0) mkdirSync(dir, { recursive: true });
  return failures.map((f) => {
    const file = join(dir, `chaos-${mode}-seed-${f.seed}.json`);
    const short = (f as { length?: string }).length === 'short' ? ' --short' : '';
    const reproduce = `vole chaos --${mode}${short} --seed ${f.seed} --runs 1`;
    writeFileSync(file, `${JSON.stringify({ reproduce, ...f }, null, 2)}\n`);
    return file;
  });
}

/**
 * One mode's runs: the header line (seed, commit, runs), the progress bar, then each
 * failing seed's file; the report and the files, in the failures' order.
 */
async function runMode<R extends { readonly failures: readonly { readonly seed: number }[] }>(
  mode: 'cluster' | 'kube',
  opts: { seed?: string; runs?: string; out?: string },
  run: (o: { seed: number; runs: number; onProgress: (done: number) => void }) => Promise<R>,
): Promise<{ report: R; files: string[] }> {
  const { seed, runs } = seedAndRuns(opts);
  process.stderr.write(`SEED=${seed} commit=${commit()} runs=${runs} mode=${mode}\n`);
  const bar = progress(runs);
  const report = await run({ seed, runs, onProgress: bar.onProgress });
  bar.done();
  return { report, files: writeFailureFiles(opts.out, mode, report.failures) };
}

/** `vole chaos --cluster`: each failing seed is written as its run (plan, trace, failures) in JSON. */
async function clusterChaosCommand(opts: {
  seed?: string;
  runs?: string;
  out?: string;
  json?: boolean;
}): Promise<number> {
  const { report, files } = await runMode('cluster', opts, clusterChaos);
  if (opts.json === true) {
    const failures = report.failures.map((f, i) => ({
      seed: f.seed,
      messages: f.failures,
      file: files[i],
    }));
    process.stdout.write(`${JSON.stringify({ ...report, failures }, null, 2)}\n`);
  } else {
    for (const [i, f] of report.failures.entries())
      process.stdout.write(`seed ${f.seed}: ${f.failures[0]} (${files[i]})\n`);
    process.stdout.write(
      `${report.failures.length === 0 ? 'ok' : 'FAILED'}: ${report.runs} cluster runs, ${report.events} controller log events, ` +
        `${report.calls} plugin calls, ${report.terms} leader terms, ${report.faultsInjected} faults, ` +
        `${report.invariantChecks} invariant checks, ${report.failures.length} failures\n`,
    );
  }
  return report.failures.length === 0 ? 0 : 1;
}

/**
 * `vole chaos --kube`: per failing seed its faults and its violations (and the whole run
 * in JSON under --out), then the summary.
 */
async function kubeChaosCommand(opts: {
  seed?: string;
  runs?: string;
  out?: string;
  json?: boolean;
  short?: boolean;
  workers?: string;
}): Promise<number> {
  const workers = Number(opts.workers ?? 1);
  if (!Number.isSafeInteger(workers) || workers < 1)
    throw new UsageError(`--workers ${opts.workers}: give a whole number ≥ 1`);
  const length = opts.short === true ? 'short' : 'full';
  const { report, files } = await runMode('kube', opts, (o) =>
    kubeChaos({ ...o, length, workers }),
  );
  if (opts.json === true) {
    const failures = report.failures.map((f, i) => ({
      seed: f.seed,
      faults: f.faults,
      messages: f.failures,
      file: files[i],
    }));
    process.stdout.write(`${JSON.stringify({ ...report, failures }, null, 2)}\n`);
    return report.failures.length === 0 ? 0 : 1;
  }
  for (const [i, f] of report.failures.entries()) {
    process.stdout.write(`seed ${f.seed}: faults ${JSON.stringify(f.faults)} (${files[i]})\n`);
    for (const message of f.failures) process.stdout.write(`  ${message}\n`);
  }
  process.stdout.write(
    `${report.failures.length === 0 ? 'ok' : 'FAILED'}: ${report.runs} kube runs, ` +
      `${report.requests} API requests, ${report.attaches} attaches, ${report.detaches} detaches, ` +
      `${report.faultsInjected} faults (${report.deletedWhileAway} pods deleted while their ` +
      `agent was cut off or down), ${report.invariantChecks} invariant checks, ` +
      `${report.failures.length} failures\n`,
  );
  return report.failures.length === 0 ? 0 : 1;
}
