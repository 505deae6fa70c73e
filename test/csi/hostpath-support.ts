/**
 * The real kubernetes-csi programs beside `vole run` (test/csi/hostpath.host.test.ts): the
 * hostpath driver (hostpathplugin) and node-driver-registrar, built by scripts/peers.sh,
 * each a process ended by its PID; the agent's log read as it grows, fast enough to catch
 * an RPC in flight; CreateVolume/DeleteVolume through vole's own CSI client; the driver's
 * state file.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { GrpcTransport } from '../../src/csi/transport.js';
import type { VoleEvent } from '../../src/events/index.js';
import { openReadonly, type ReadonlyLog } from '../../src/postmortem/open.js';
import { peerBin } from '../support/peers.js';
import type { Sandbox } from './support.js';

export const driverName = 'hostpath.csi.k8s.io';
const repo = join(import.meta.dirname, '../..');
const main = join(repo, 'src/cli/main.ts');

export interface HostpathPeers {
  readonly driver: string;
  readonly registrar: string;
}

/** The two binaries, or why the test cannot have them (then it is skipped, saying so). */
export function hostpathPeers(): HostpathPeers | string {
  try {
    return { driver: peerBin('hostpathplugin'), registrar: peerBin('csi-node-driver-registrar') };
  } catch (error) {
    return `the real hostpath driver and node-driver-registrar are not built (${(error as Error).message})`;
  }
}

const socketInode = (path: string): bigint | undefined => {
  try {
    const st = statSync(path, { bigint: true });
    return st.isSocket() ? st.ino : undefined;
  } catch {
    return undefined;
  }
};

async function waitUntil(what: string, check: () => boolean, timeoutMs = 30_000, pollMs = 20) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

/**
 * `hostpathplugin` on the sandbox's socket, its state under `<sandbox>/state`, with
 * `-enable-attach` (ControllerPublish/Unpublish); -v=5 logs every request to
 * `<sandbox>/hostpath.log`. Resolves once it answers GetPluginInfo.
 */
export async function startHostpath(peers: HostpathPeers, s: Sandbox): Promise<ChildProcess> {
  const args = [
    `--endpoint=unix://${s.socket}`,
    `--drivername=${driverName}`,
    '--nodeid=node-1',
    `--statedir=${s.state}`,
    '--enable-attach=true',
    '-v=5',
  ];
  const log = openSync(join(s.base, 'hostpath.log'), 'a');
  const child = spawn(peers.driver, args, { stdio: ['ignore', log, log] });
  closeSync(log);
  // The old process is gone (its socket file may still be there): whoever answers is new.
  const transport = new GrpcTransport(`unix://${s.socket}`);
  const deadline = Date.now() + 30_000;
  try {
    let answered = false;
    while (!answered) {
      assert.equal(child.exitCode, null, `hostpathplugin exited (see ${s.base}/hostpath.log)`);
      if (Date.now() > deadline)
        throw new Error(`hostpathplugin did not answer in 30 s (see ${s.base}/hostpath.log)`);
      answered = await transport
        .call('GetPluginInfo', {}, { deadlineMs: 1_000 })
        .then(() => true)
        .catch(() => new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 100)));
    }
  } catch (error) {
    await stopProcess(child); // a set-up that fails leaves no driver running
    throw error;
  } finally {
    transport.close();
  }
  return child;
}

export function hostpathLog(s: Sandbox): string {
  return readFileSync(join(s.base, 'hostpath.log'), 'utf8');
}

export const registrationDir = (s: Sandbox) => join(s.root, 'plugins_registry');
export const registrationSocket = (s: Sandbox) =>
  join(registrationDir(s), `${driverName}-reg.sock`);

/**
 * node-driver-registrar for the driver, registering into `<root>/plugins_registry/`: the
 * agent must have made that directory (it does at start, as the kubelet does), or the
 * registrar exits with "bind: no such file or directory".
 */
export async function startRegistrar(peers: HostpathPeers, s: Sandbox): Promise<ChildProcess> {
  const args = [
    `--csi-address=${s.socket}`,
    `--kubelet-registration-path=${s.socket}`,
    `--plugin-registration-path=${registrationDir(s)}`,
    '-v=5',
  ];
  const log = openSync(join(s.base, 'registrar.log'), 'a');
  const child = spawn(peers.registrar, args, { stdio: ['ignore', log, log] });
  closeSync(log);
  try {
    await waitUntil('the registration socket', () => {
      assert.equal(child.exitCode, null, `the registrar exited (see ${s.base}/registrar.log)`);
      return socketInode(registrationSocket(s)) !== undefined;
    });
  } catch (error) {
    await stopProcess(child);
    throw error;
  }
  return child;
}

/** Ends a process by its PID and waits for it. */
export async function stopProcess(
  child: ChildProcess,
  signal: NodeJS.Signals = 'SIGTERM',
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  if (signal === 'SIGKILL' || signal === 'SIGTERM') process.kill(child.pid!, 'SIGCONT');
  process.kill(child.pid!, signal);
  await exited;
}

/** A volume made by the driver's own CreateVolume, as a provisioner would. */
export async function createVolume(
  s: Sandbox,
  opts: { name: string; block: boolean; sizeBytes: number },
): Promise<{ volumeId: string; context: Record<string, string> }> {
  const transport = new GrpcTransport(`unix://${s.socket}`);
  try {
    const accessType = opts.block ? { block: {} } : { mount: { fs_type: '', mount_flags: [] } };
    const response = await transport.call<{
      volume: { volume_id: string; volume_context: Record<string, string> };
    }>(
      'CreateVolume',
      {
        name: opts.name,
        capacity_range: { required_bytes: String(opts.sizeBytes), limit_bytes: '0' },
        volume_capabilities: [{ ...accessType, access_mode: { mode: 'SINGLE_NODE_WRITER' } }],
        parameters: {},
      },
      { deadlineMs: 30_000 },
    );
    return { volumeId: response.volume.volume_id, context: response.volume.volume_context ?? {} };
  } finally {
    transport.close();
  }
}

export async function deleteVolume(s: Sandbox, volumeId: string): Promise<void> {
  const transport = new GrpcTransport(`unix://${s.socket}`);
  try {
    await transport.call('DeleteVolume', { volume_id: volumeId }, { deadlineMs: 30_000 });
  } finally {
    transport.close();
  }
}

/** A volume in the driver's state file (pkg/state: Go field names). */
export interface DriverVolume {
  readonly VolID: string;
  readonly VolName: string;
  readonly VolPath: string;
  readonly Ephemeral?: boolean;
  readonly Attached?: boolean;
  /** What older releases call `Attached`, and hold instead of the path sets. */
  readonly IsAttached?: boolean;
  readonly IsStaged?: boolean;
  readonly IsPublished?: boolean;
  readonly Staged?: string[] | null;
  readonly Published?: string[] | null;
}

export function driverVolumes(s: Sandbox): DriverVolume[] {
  const file = join(s.state, 'state.json');
  if (!existsSync(file)) return [];
  const state = JSON.parse(readFileSync(file, 'utf8')) as { Volumes?: DriverVolume[] | null };
  return state.Volumes ?? [];
}

/** The driver holds no volume attached, staged or published. */
export function assertDriverIdle(s: Sandbox): void {
  for (const v of driverVolumes(s)) {
    const attached = v.Attached ?? v.IsAttached ?? false;
    assert.equal(attached, false, `${v.VolName} still attached in the driver's state`);
    const staged = v.Staged ?? (v.IsStaged === true ? ['(staged)'] : []);
    const published = v.Published ?? (v.IsPublished === true ? ['(published)'] : []);
    assert.deepEqual(staged, [], `${v.VolName} still staged in the driver's state`);
    assert.deepEqual(published, [], `${v.VolName} still published in the driver's state`);
  }
}

/** The agent's log as it grows: opened once, each poll reads the events appended since. */
export class LogTail {
  readonly events: VoleEvent[] = [];
  private store: ReadonlyLog | undefined;

  constructor(private readonly db: string) {}

  poll(): VoleEvent[] {
    if (this.store === undefined) {
      if (!existsSync(this.db)) return this.events;
      try {
        this.store = openReadonly(this.db);
      } catch {
        return this.events; // the agent is still creating it
      }
    }
    const fromSeq = (this.events.at(-1)?.seq ?? 0) + 1;
    this.events.push(...Array.from(this.store.read({ fromSeq })));
    return this.events;
  }

  /** Polls every `pollMs` until `find` answers; its answer. */
  async waitFor<T>(
    what: string,
    find: (events: VoleEvent[]) => T | undefined,
    timeoutMs = 60_000,
    pollMs = 20,
  ): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = find(this.poll());
      if (found !== undefined) return found;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} in ${this.db}`);
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }

  close(): void {
    this.store?.close();
  }
}

type Ev<T extends VoleEvent['type']> = Extract<VoleEvent, { type: T }>;

export function operationStarted(
  events: VoleEvent[],
  op: string,
  pod: string,
  afterSeq = 0,
): Ev<'OperationStarted'> | undefined {
  return events.find(
    (e): e is Ev<'OperationStarted'> =>
      e.type === 'OperationStarted' && e.seq > afterSeq && e.op === op && e.pod === pod,
  );
}

export function operationFinished(
  events: VoleEvent[],
  opId: string,
): Ev<'OperationFinished'> | undefined {
  return events.find(
    (e): e is Ev<'OperationFinished'> => e.type === 'OperationFinished' && e.opId === opId,
  );
}

/** The call's events of one operation (CallStarted, then CallSucceeded or CallFailed). */
export function callEvents(
  events: VoleEvent[],
  opId: string,
  call: string,
): (Ev<'CallStarted'> | Ev<'CallSucceeded'> | Ev<'CallFailed'>)[] {
  return events.filter(
    (e): e is Ev<'CallStarted'> | Ev<'CallSucceeded'> | Ev<'CallFailed'> =>
      (e.type === 'CallStarted' || e.type === 'CallSucceeded' || e.type === 'CallFailed') &&
      e.opId === opId &&
      e.call === call,
  );
}

/** A pod's mount (or map) operation that finished ok, once there is one. */
export function podMounted(events: VoleEvent[], pod: string): boolean {
  return events.some(
    (e) =>
      e.type === 'OperationStarted' &&
      e.op === 'mount' &&
      e.pod === pod &&
      operationFinished(events, e.opId)?.outcome === 'ok',
  );
}

/** Every volume of the pod unmounted: an unmount of it finished ok, and no mount since. */
export function podUnmounted(events: VoleEvent[], pod: string): boolean {
  const last = events
    .filter(
      (e): e is Ev<'OperationStarted'> =>
        e.type === 'OperationStarted' && e.pod === pod && (e.op === 'mount' || e.op === 'unmount'),
    )
    .at(-1);
  return last?.op === 'unmount' && operationFinished(events, last.opId)?.outcome === 'ok';
}

/** The RPC methods that answered OK for a volume, in the log's order. */
export function rpcsOf(events: VoleEvent[], volume: string): string[] {
  const volumeOf = new Map(
    events.flatMap((e) => (e.type === 'OperationStarted' ? [[e.opId, e.volume] as const] : [])),
  );
  return events.flatMap((e) =>
    e.type === 'CallSucceeded' && e.rpc !== undefined && volumeOf.get(e.opId) === volume
      ? [e.rpc.method.slice(e.rpc.method.lastIndexOf('/') + 1)]
      : [],
  );
}

/** `vole <args…>`: its status and output. */
export function vole(args: string[]): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(process.execPath, ['--import', 'tsx', main, ...args], { encoding: 'utf8' });
}

export function hostpathPv(opts: {
  name: string;
  volumeId: string;
  context: Record<string, string>;
  block?: boolean;
}): string {
  const mode = opts.block === true ? 'Block' : 'Filesystem';
  const attributes = JSON.stringify(opts.context);
  return `apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-${opts.name}}
spec:
  capacity: {storage: 16Mi}
  accessModes: [ReadWriteOnce]
  volumeMode: ${mode}
  csi: {driver: ${driverName}, volumeHandle: ${opts.volumeId}, volumeAttributes: ${attributes}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ${opts.name}, namespace: default}
spec:
  volumeName: pv-${opts.name}
  accessModes: [ReadWriteOnce]
  volumeMode: ${mode}
  resources: {requests: {storage: 16Mi}}
status: {phase: Bound, capacity: {storage: 16Mi}}
`;
}

/** A pod with one inline (ephemeral) CSI volume `scratch` of the hostpath driver. */
export function inlinePod(uid: string): string {
  return `apiVersion: v1
kind: Pod
metadata: {name: ${uid}, namespace: default, uid: ${uid}}
spec:
  containers: [{name: c, volumeMounts: [{name: scratch, mountPath: /scratch}]}]
  volumes: [{name: scratch, csi: {driver: ${driverName}}}]
`;
}
