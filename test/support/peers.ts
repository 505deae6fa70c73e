/**
 * The real Kubernetes and CSI programs the tests talk to ("peers"), built from the Go
 * module proxy by scripts/peers.sh into a cache outside the work tree. `peersBinDir` runs
 * the script (once per process per set of names) and answers the directory of binaries;
 * env VOLE_PEERS_BIN names a directory of ready binaries instead, so nothing is built.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const repoRoot = new URL('../..', import.meta.url).pathname;
const script = join(repoRoot, 'scripts', 'peers.sh');
/** A cold build of everything (k8s included) takes tens of minutes on 2 cores. */
const buildTimeoutMs = 90 * 60_000;
const built = new Map<string, string>();

/** Every program scripts/peers.sh knows, in build order. */
export function peerNames(): string[] {
  const run = spawnSync('bash', [script, '--list'], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`scripts/peers.sh --list failed: ${run.stderr}`);
  return run.stdout.split('\n').filter((line) => line !== '');
}

/** The directory holding the named peers (all of them when `names` is absent), built now. */
export function peersBinDir(names: readonly string[] = []): string {
  const given = process.env.VOLE_PEERS_BIN;
  if (given !== undefined && given !== '') return given;
  const key = [...names].sort().join(' ');
  const cached = built.get(key) ?? built.get('');
  if (cached !== undefined && names.every((n) => existsSync(join(cached, n)))) return cached;
  const run = spawnSync('bash', [script, ...names], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    timeout: buildTimeoutMs,
  });
  if (run.status !== 0) {
    throw new Error(`scripts/peers.sh ${key} failed (status ${run.status}, ${run.error ?? ''})`);
  }
  const lines = run.stdout.trim().split('\n');
  const dir = lines[lines.length - 1] ?? '';
  if (!existsSync(dir)) throw new Error(`scripts/peers.sh printed no bin dir: '${run.stdout}'`);
  built.set(key, dir);
  return dir;
}

/** The path of one built peer (building it when needed). */
export function peerBin(name: string): string {
  if (process.env.VOLE_PEERS_BIN === undefined && !peerNames().includes(name)) {
    throw new Error(`${name} is not one of the programs scripts/peers.sh builds (docs/peers.md)`);
  }
  const path = join(peersBinDir([name]), name);
  if (!existsSync(path)) throw new Error(`peer ${name} missing at ${path}`);
  return path;
}
