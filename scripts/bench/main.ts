/**
 * `npm run bench [-- --quick] [-- --only append,replay] [-- --fresh]`: vole's benchmark.
 *
 * Each section runs in its own Node process (a clean heap: the memory figures and the GC
 * pressure of one section do not leak into the next) and reports figures that are the
 * median of several runs, each comparison measured side by side in the same run. The
 * table goes to stdout, progress to stderr, everything to bench-results/latest.json. A
 * missed target is a figure (✗), not a failure: the exit status is 0 unless a section
 * itself broke.
 *
 * Sections: append, replay, planner, e2e, restart, controller,
 * csi, cluster (a real etcd; skipped, saying so, without the etcd binary), kube
 * (Kubernetes' attach/detach controller and vole's on a real kube-apiserver), kubelet
 * (a kubemark hollow kubelet and `vole run --kubeconfig` on one; as root, it runs in its
 * own mount namespace), kube-faults (the fault suites on a real API server: each fault's
 * time to converge); see each file.
 */
import { spawnSync } from 'node:child_process';
import { cpus, loadavg, totalmem } from 'node:os';
import { mkdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type Figure,
  formatNumber,
  progress,
  repoRoot,
  resultsDir,
  type SectionResult,
} from './util.js';

/** The replay/restart log: events, pods alive at the end, pods per wave (generate.ts). */
const fullLogEvents = 1_000_000;
const quickLogEvents = 100_000;
const logPopulation = 1_000;
const logWave = 250;

const sections = [
  'append',
  'replay',
  'planner',
  'e2e',
  'restart',
  'controller',
  'csi',
  'cluster',
  'kube',
  'kubelet',
  'failover',
  'kube-faults',
] as const;
type SectionName = (typeof sections)[number];

interface Args {
  quick: boolean;
  fresh: boolean;
  only: SectionName[];
  section?: SectionName;
  out?: string;
  runs?: number;
}

function parseArgs(argv: readonly string[]): Args {
  const args: Args = { quick: false, fresh: false, only: [...sections] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--quick') args.quick = true;
    else if (a === '--fresh') args.fresh = true;
    else if (a === '--only')
      args.only = value()
        .split(',')
        .map((s) => sectionName(s.trim()));
    else if (a === '--section') args.section = sectionName(value());
    else if (a === '--out') args.out = value();
    else if (a === '--runs') args.runs = Number(value());
    // The section processes inherit it (emmett.ts reads it).
    else if (a === '--no-emmett') process.env.BENCH_NO_EMMETT = '1';
    else if (a === '--help' || a === '-h') {
      process.stdout.write(
        'npm run bench [-- --quick] [--only append,replay,planner,e2e,restart,controller,csi,cluster,kube,kubelet,failover,kube-faults] [--runs N] [--fresh] [--no-emmett]\n' +
          '  --quick  smaller sizes (a check in about a minute, not figures to quote)\n' +
          '  --fresh  regenerate the replay/restart log even when the cached one is current\n' +
          '  --no-emmett  skip emmett-sqlite (otherwise installed once into bench-results/emmett)\n',
      );
      process.exit(0);
    } else throw new Error(`unknown argument ${a} (try --help)`);
  }
  return args;
}

function sectionName(s: string): SectionName {
  if (!(sections as readonly string[]).includes(s))
    throw new Error(`unknown section ${s}; one of ${sections.join(', ')}`);
  return s as SectionName;
}

/** Runs one section in this process (the child side). */
async function runSection(name: SectionName, args: Args): Promise<SectionResult> {
  const runs = args.runs ?? (args.quick ? 3 : 5);
  const logEvents = args.quick ? quickLogEvents : fullLogEvents;
  switch (name) {
    case 'append': {
      const { runAppend } = await import('./append.js');
      return runAppend({ runs: Math.min(runs, 5), quick: args.quick });
    }
    case 'replay': {
      const { runReplay } = await import('./replay.js');
      return runReplay({
        events: logEvents,
        population: logPopulation,
        wave: logWave,
        runs: Math.min(runs, 3),
        fresh: args.fresh,
      });
    }
    case 'planner': {
      const { runPlanner } = await import('./planner.js');
      return runPlanner({ sizes: args.quick ? [1_000, 10_000] : [1_000, 10_000, 100_000], runs });
    }
    case 'e2e': {
      const { runE2e } = await import('./e2e.js');
      return runE2e({ pods: args.quick ? 200 : 1_000, runs: Math.min(runs, 3) });
    }
    case 'csi': {
      const { runCsi } = await import('./csi.js');
      return runCsi({ pods: args.quick ? 200 : 1_000, runs: Math.min(runs, 3) });
    }
    case 'restart': {
      const { runRestart } = await import('./restart.js');
      return runRestart({
        events: logEvents,
        // The large log for "does not grow with the log" (restart-big-log.ts); 10× unless
        // BENCH_RESTART_REPEAT says otherwise (0: none).
        repeat: Number(process.env.BENCH_RESTART_REPEAT ?? (args.quick ? 2 : 10)),
        population: logPopulation,
        wave: logWave,
        runs,
        fresh: false,
      });
    }
    case 'controller': {
      const { runController } = await import('./controller.js');
      return runController({
        sizes: args.quick ? [1_000, 10_000] : [1_000, 10_000, 100_000],
        logEvents,
        runs: Math.min(runs, 3),
      });
    }
    case 'kube': {
      const { runKube } = await import('./kube.js');
      return runKube({ pods: args.quick ? 100 : 500, nodes: args.quick ? 10 : 50 });
    }
    case 'kubelet': {
      const { runKubelet } = await import('./kubelet.js');
      // BENCH_KUBELET_PODS=100 runs fewer sizes (the machine may be shared).
      const given = process.env.BENCH_KUBELET_PODS?.split(',').map(Number);
      return runKubelet({ sizes: given ?? (args.quick ? [100] : [100, 1_000]) });
    }
    case 'cluster': {
      const { runCluster } = await import('./cluster.js');
      return runCluster({ runs: Math.min(runs, 3), quick: args.quick });
    }
    case 'kube-faults': {
      const { runKubeFaults } = await import('./kube-faults.js');
      return runKubeFaults();
    }
    case 'failover': {
      const { runFailover } = await import('./failover.js');
      // BENCH_FAILOVER_PODS=1000,50000 runs fewer sizes (the machine may be shared).
      const given = process.env.BENCH_FAILOVER_PODS?.split(',').map(Number);
      return runFailover({
        sizes: given ?? (args.quick ? [1_000, 15_000] : [1_000, 50_000, 150_000]),
      });
    }
  }
}

function machine() {
  const cpuinfo = (() => {
    try {
      return readFileSync('/proc/cpuinfo', 'utf8');
    } catch {
      return '';
    }
  })();
  const model = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1] ?? cpus()[0]?.model ?? 'unknown';
  return {
    nproc: cpus().length,
    cpu: model,
    memGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
  };
}

function printTable(figures: readonly Figure[]): void {
  const rows = figures.map((f) => [
    f.section,
    f.name,
    f.value === null ? 'n/a' : formatNumber(f.value),
    f.unit,
    f.target ?? '',
    f.met === undefined ? '' : f.met ? '✓' : '✗',
  ]);
  const header = ['section', 'figure', 'median', 'unit', 'target', ''];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === 2 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  const out: string[] = [line(header), widths.map((w) => '-'.repeat(w)).join('  ')];
  let section = '';
  const notes = new Set<string>();
  for (const [i, r] of rows.entries()) {
    if (r[0] !== section && section !== '') out.push('');
    section = r[0]!;
    out.push(line(r));
    const note = figures[i]!.note;
    if (figures[i]!.value === null && note !== undefined) {
      out.push(`${' '.repeat(widths[0]! + 2)}↳ ${notes.has(note) ? '(as above)' : note}`);
      notes.add(note);
    }
  }
  process.stdout.write(`${out.join('\n')}\n`);
}

async function parent(args: Args): Promise<number> {
  const started = Date.now();
  const here = fileURLToPath(import.meta.url);
  const tmp = join(resultsDir, 'tmp');
  mkdirSync(tmp, { recursive: true });
  const results: SectionResult[] = [];
  const failures: string[] = [];
  // One log for the whole run (replay and restart), even if src/ changes meanwhile.
  const { codeHash } = await import('./generate.js');
  process.env.BENCH_LOG_KEY = codeHash(
    args.quick ? quickLogEvents : fullLogEvents,
    logPopulation,
    logWave,
  );
  for (const name of args.only) {
    progress(`== ${name}`);
    const out = join(tmp, `section-${name}.json`);
    rmSync(out, { force: true });
    const childArgs = [
      // Compiled by `npm run bench` (tsc), as users run it; through tsx only when started so.
      ...(here.endsWith('.ts') ? ['--import', 'tsx'] : []),
      '--expose-gc',
      '--max-old-space-size=8192',
      here,
      '--section',
      name,
      '--out',
      out,
      ...(args.quick ? ['--quick'] : []),
      ...(args.fresh ? ['--fresh'] : []),
      ...(args.runs === undefined ? [] : ['--runs', String(args.runs)]),
    ];
    const sectionStart = Date.now();
    const loadBefore = loadavg()[0]!;
    // The kubelet section mounts (vole's tmpfs for Secrets): in a mount namespace of its
    // own, so that nothing it leaves mounted outlives it on the host.
    process.env.BENCH_OUTER_MOUNT_NS = readlinkSync('/proc/self/ns/mnt');
    const [command, commandArgs] =
      name === 'kubelet' && process.getuid?.() === 0
        ? ['unshare', ['-m', '--propagation', 'private', process.execPath, ...childArgs]]
        : [process.execPath, childArgs];
    const child = spawnSync(command, commandArgs, {
      cwd: repoRoot,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    try {
      const result = JSON.parse(readFileSync(out, 'utf8')) as SectionResult;
      // The machine may be shared: the 1-minute load average says how much else ran.
      const load = { before: loadBefore, after: loadavg()[0]!, cpus: cpus().length };
      results.push({
        ...result,
        details: {
          ...result.details,
          loadAverage: load,
          seconds: Math.round((Date.now() - sectionStart) / 1000),
        },
      });
      progress(
        `== ${name} done in ${((Date.now() - sectionStart) / 1000).toFixed(0)} s (load average ${load.before.toFixed(1)} → ${load.after.toFixed(1)} on ${load.cpus} CPUs)`,
      );
    } catch {
      const why = child.error?.message ?? `exit status ${child.status ?? child.signal}`;
      failures.push(`${name}: ${why}`);
      results.push({
        section: name,
        figures: [{ section: name, name: '(section failed)', value: null, unit: '', note: why }],
      });
      progress(`== ${name} FAILED (${why})`);
    }
  }
  const figures = results.flatMap((r) => r.figures);
  const report = {
    date: new Date().toISOString(),
    quick: args.quick,
    seconds: Math.round((Date.now() - started) / 1000),
    machine: machine(),
    figures,
    details: Object.fromEntries(results.map((r) => [r.section, r.details ?? {}])),
    failures,
  };
  mkdirSync(resultsDir, { recursive: true });
  const latest = join(resultsDir, 'latest.json');
  writeFileSync(latest, `${JSON.stringify(report, null, 2)}\n`);
  const m = report.machine;
  const loads = results
    .map((r) => r.details?.loadAverage as { before: number; after: number } | undefined)
    .filter((l) => l !== undefined);
  const loadText =
    loads.length === 0
      ? ''
      : `; 1-min load average ${Math.min(...loads.map((l) => Math.min(l.before, l.after))).toFixed(1)}–${Math.max(...loads.map((l) => Math.max(l.before, l.after))).toFixed(1)}`;
  process.stdout.write(
    `vole bench${args.quick ? ' --quick' : ''}: ${m.nproc} × ${m.cpu}, ${m.memGiB} GiB, Node ${m.node}${loadText}\n\n`,
  );
  printTable(figures);
  const missed = figures.filter((f) => f.met === false);
  process.stdout.write(
    `\n${figures.filter((f) => f.met === true).length} targets met, ${missed.length} missed` +
      `${failures.length > 0 ? `, ${failures.length} section(s) failed` : ''}; ${report.seconds} s; written to ${latest}\n`,
  );
  return failures.length > 0 ? 1 : 0;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (args.section === undefined) {
    process.exitCode = await parent(args);
    return;
  }
  const result = await runSection(args.section, args);
  if (args.out !== undefined) writeFileSync(args.out, JSON.stringify(result));
  else process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  // Engines, timers and connections a section leaves behind must not keep it alive.
  process.exit(0);
}

main().catch((error: unknown) => {
  process.stderr.write(
    `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
