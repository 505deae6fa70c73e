/**
 * The fault suites on a real API server (test/host/kube-faults.host.test.ts and
 * kube-faults-partition.host.test.ts), run as CI runs them: as root, each in a private
 * mount namespace. Each prints a table, one row a fault: the time from the fault to
 * converged (every pod on disk with its CSI volume attached and mounted, nothing left of a
 * deleted pod), the invariants checked over the logs' history after it, and the
 * violations. A row is a figure: its time, with "0 violations" as its target.
 */
import { spawnSync } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { type Figure, progress, repoRoot } from './util.js';

const suites = [
  'test/host/kube-faults.host.test.ts',
  'test/host/kube-faults-partition.host.test.ts',
] as const;

/** `# FAULT  12345 ms  PODS  CSI  CHECKED  VIOLATIONS`, as the suites print their rows. */
const row = /^# (.+?)\s+(\d+) ms\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$/;

function unavailable(name: string, note: string): Figure {
  return { section: 'kube-faults', name, value: null, unit: '', note };
}

/** Runs one suite; its rows as figures, or one unavailable figure saying why. */
function runSuite(file: string): Figure[] {
  if (process.getuid?.() !== 0) return [unavailable(file, 'needs root (mounts, namespaces)')];
  progress(`kube-faults: ${file}`);
  const run = spawnSync(
    'unshare',
    ['-m', '--propagation', 'private', process.execPath, '--import', 'tsx', '--test', file],
    {
      cwd: repoRoot,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      timeout: 20 * 60_000,
      // The host tests run only when they can tell their mount namespace from this one.
      env: { ...process.env, VOLE_OUTER_MOUNT_NS: readlinkSync('/proc/self/ns/mnt') },
    },
  );
  const figures: Figure[] = [];
  for (const line of run.stdout.split('\n')) {
    const m = row.exec(line.trim());
    if (m === null) continue;
    const [, fault, ms, pods, csi, checked, violations] = m;
    figures.push({
      section: 'kube-faults',
      name: `${fault!.trim()}: time to converge`,
      value: Number(ms),
      unit: 'ms',
      target: '0 violations',
      met: Number(violations) === 0,
      note: `${pods} pods (${csi} with a CSI volume), ${checked} invariants checked, ${violations} violations`,
    });
  }
  const skipped = /# SKIP (.*)$/m.exec(run.stdout);
  if (run.status === 0 && figures.length === 0)
    figures.push(unavailable(file, `no rows: skipped (${skipped?.[1] ?? 'no reason printed'})`));
  if (run.status !== 0) {
    process.stderr.write(run.stdout.split('\n').slice(-80).join('\n'));
    figures.push(
      unavailable(file, `failed (exit ${run.status ?? run.signal}); see its output above`),
    );
  }
  return figures;
}

export function runKubeFaults(): { section: string; figures: Figure[] } {
  return { section: 'kube-faults', figures: suites.flatMap(runSuite) };
}
