/**
 * A real peer program (csi-sanity) for the CSI tests: from env VOLE_PEERS_BIN (a directory
 * of ready binaries), else built by scripts/peers.sh, which prints its bin dir as the last
 * line of its output. The same `peerBin(name)` as the shared peers support module.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const script = join(import.meta.dirname, '../../scripts/peers.sh');
let binDir: string | undefined;

/** Why no peer can be had here (neither VOLE_PEERS_BIN nor scripts/peers.sh), or false. */
export function peerSkipReason(): string | false {
  if ((process.env.VOLE_PEERS_BIN ?? '') !== '' || existsSync(script)) return false;
  return 'no peers: set VOLE_PEERS_BIN to a directory holding csi-sanity, or add scripts/peers.sh';
}

/** The path of one peer program, built when needed. */
export function peerBin(name: string): string {
  if (binDir === undefined) {
    const given = process.env.VOLE_PEERS_BIN ?? '';
    if (given !== '') binDir = given;
    else {
      const run = spawnSync('bash', [script, name], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      if (run.status !== 0)
        throw new Error(`scripts/peers.sh ${name} failed with status ${run.status}`);
      binDir = run.stdout.trim().split('\n').at(-1) ?? '';
    }
  }
  const path = join(binDir, name);
  if (!existsSync(path))
    throw new Error(`peer ${name} is missing at ${path}; run scripts/peers.sh ${name}`);
  return path;
}
