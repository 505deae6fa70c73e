/**
 * The CSI host tests' pieces: `vole csi-driver` and `vole run` as separate processes (each
 * ended by its PID), manifests for the disk driver, the agent's log read back, and the
 * leak check (no mounts, no loop devices, no device node left under the sandbox).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { listLoops } from '../../src/host/loop.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { until } from '../support/host.js';

const repo = join(import.meta.dirname, '../..');
const main = join(repo, 'src/cli/main.ts');

export interface Sandbox {
  readonly base: string;
  readonly root: string;
  readonly db: string;
  readonly manifests: string;
  readonly state: string;
  readonly socket: string;
}

export function sandboxIn(base: string, name: string): Sandbox {
  const dir = join(base, name);
  const sandbox = {
    base: dir,
    root: join(dir, 'root'),
    db: join(dir, 'vole.db'),
    manifests: join(dir, 'manifests'),
    state: join(dir, 'state'),
    socket: join(dir, 'csi.sock'),
  };
  mkdirSync(sandbox.manifests, { recursive: true });
  return sandbox;
}

/** Starts `vole csi-driver`; resolves once its socket is there. */
export async function startDriver(
  s: Sandbox,
  opts: { hold?: string; registrationDir?: string; args?: string[] } = {},
): Promise<ChildProcess> {
  rmSync(join(s.state, `held-${opts.hold ?? ''}`), { force: true });
  const args = ['--import', 'tsx', main, 'csi-driver', '--endpoint', `unix://${s.socket}`];
  args.push('--node-id', 'node-1', '--state-dir', s.state);
  if (opts.registrationDir !== undefined) args.push('--registration-dir', opts.registrationDir);
  args.push(...(opts.args ?? []));
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, VOLE_CSI_DRIVER_HOLD: opts.hold ?? '' },
  });
  const started = Date.now();
  await until(() => existsSync(s.socket) && Date.now() - started > 50, 'the driver socket');
  return child;
}

/** Ends a process by its PID and waits for it. */
export async function stop(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  process.kill(child.pid!, signal);
  await exited;
}

export function agentArgs(s: Sandbox, extra: string[]): string[] {
  return [
    '--import',
    'tsx',
    main,
    'run',
    '--manifests',
    s.manifests,
    '--root',
    s.root,
    '--db',
    s.db,
    ...extra,
  ];
}

/** `vole run --once` until settled; its exit status and output. */
export function runOnce(s: Sandbox, extra: string[] = [], timeoutSeconds = 60) {
  const flag = `disk.csi.vole.dev=unix://${s.socket}`;
  const args = agentArgs(s, [
    '--csi',
    flag,
    '--once',
    '--timeout',
    String(timeoutSeconds),
    ...extra,
  ]);
  return spawnSync(process.execPath, args, { encoding: 'utf8' });
}

/** The agent's log, as `vole export` writes it. */
export function events(s: Sandbox): Record<string, unknown>[] {
  const out = spawnSync(process.execPath, ['--import', 'tsx', main, 'export', '--db', s.db], {
    encoding: 'utf8',
  });
  assert.equal(out.status, 0, out.stderr);
  return out.stdout
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

export function write(s: Sandbox, file: string, text: string): void {
  writeFileSync(join(s.manifests, file), text);
}

export function disk(opts: {
  name: string;
  fsType?: string;
  size: string;
  claimSize?: string;
  block?: boolean;
}): string {
  const fs = opts.fsType === undefined ? '' : `, fsType: ${opts.fsType}`;
  return `apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-${opts.name}}
spec:
  capacity: {storage: ${opts.size}}
  accessModes: [ReadWriteOnce]
  volumeMode: ${opts.block === true ? 'Block' : 'Filesystem'}
  csi: {driver: disk.csi.vole.dev, volumeHandle: ${opts.name}${fs}, volumeAttributes: {size: ${opts.claimSize ?? opts.size}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ${opts.name}, namespace: default}
spec:
  volumeName: pv-${opts.name}
  accessModes: [ReadWriteOnce]
  volumeMode: ${opts.block === true ? 'Block' : 'Filesystem'}
  resources: {requests: {storage: ${opts.claimSize ?? opts.size}}}
status: {phase: Bound, capacity: {storage: ${opts.claimSize ?? opts.size}}}
`;
}

export function pod(opts: { uid: string; claim: string; block?: boolean }): string {
  const use =
    opts.block === true
      ? `volumeDevices: [{name: data, devicePath: /dev/xvda}]`
      : `volumeMounts: [{name: data, mountPath: /data}]`;
  return `apiVersion: v1
kind: Pod
metadata: {name: ${opts.uid}, namespace: default, uid: ${opts.uid}}
spec:
  containers: [{name: c, ${use}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: ${opts.claim}}}]
`;
}

/** Nothing of the sandbox on the host: no mounts below it, no loop device over its images. */
export async function assertNothingLeft(s: Sandbox, devicePaths: string[] = []): Promise<void> {
  assert.deepEqual(
    mountsUnder(await readMountTable(), s.base).map((m) => m.mountPoint),
    [],
    'no mounts left',
  );
  assert.deepEqual(
    (await listLoops()).filter((l) => l.backFile.startsWith(s.base)).map((l) => l.name),
    [],
    'no loop devices left',
  );
  // `find -type b` misses a device node bind-mounted over a file; stat sees it.
  for (const path of devicePaths) {
    const st = (() => {
      try {
        return statSync(path);
      } catch {
        return undefined;
      }
    })();
    assert.ok(st?.isBlockDevice() !== true, `${path} is still a block device`);
  }
}

export function targetPath(s: Sandbox, uid: string): string {
  return join(s.root, 'pods', uid, 'volumes', 'kubernetes.io~csi', 'data', 'mount');
}
