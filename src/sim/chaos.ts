/**
 * `vole chaos`: randomized scenarios on the virtual clock, in the style of TigerBeetle's
 * VOPR. One seed feeds one PRNG that draws a swarm: plugins and their faults (every
 * class, delays and hangs), volumes, pods coming and going, restarts at random points.
 * The safety phase runs with the invariants checked after every event; the liveness
 * phase lets the finite fault scripts run out and demands convergence: every present
 * pod mounted, nothing of the removed ones left, nothing running.
 *
 * Each run is generated as a scenario file and parsed by the same parser as `vole
 * simulate`, so a failing seed is written out as a file that reproduces it exactly.
 */
import { stringify } from 'yaml';
import { parseScenario } from './scenario.js';
import { FakeHost } from '../plugins/fake.js';
import { simulate, type SimulationResult } from './simulate.js';

/** A small, fast, seedable PRNG (mulberry32). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Random = () => number;
const pick = <T>(r: Random, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
const int = (r: Random, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));

const diskCalls = [
  'attach',
  'waitForAttach',
  'detach',
  'mountDevice',
  'unmountDevice',
  'setUp',
  'tearDown',
  'setUpDevice',
  'mapPodDevice',
  'unmapPodDevice',
  'tearDownDevice',
];
const podCalls = ['setUp', 'tearDown'];

function faultEntry(r: Random): unknown {
  const roll = r();
  if (roll < 0.25) return 'transient';
  if (roll < 0.5) return 'uncertain';
  if (roll < 0.7) return 'final';
  if (roll < 0.8)
    return { outcome: pick(r, ['transient', 'uncertain', 'final']), times: int(r, 2, 3) };
  if (roll < 0.95) return { delay: `${int(r, 1, 8)}s` };
  return { hang: true };
}

function faults(r: Random, calls: readonly string[]): Record<string, unknown[]> {
  const out: Record<string, unknown[]> = {};
  for (const call of calls)
    if (r() < 0.5) out[call] = Array.from({ length: int(r, 1, 3) }, () => faultEntry(r));
  return out;
}

const csiDriverName = 'fake.csi.vole.dev';
const csiRpcs = [
  'ControllerPublishVolume',
  'ControllerUnpublishVolume',
  'NodeStageVolume',
  'NodeUnstageVolume',
  'NodePublishVolume',
  'NodeUnpublishVolume',
];
const grpcCodes = ['DEADLINE_EXCEEDED', 'UNAVAILABLE', 'ABORTED', 'INTERNAL', 'NOT_FOUND', 'INVALID_ARGUMENT'];

/** A scripted CSI driver's answer: a status code, a broken connection, a delay or a hang. */
function csiFaultEntry(r: Random): unknown {
  const roll = r();
  if (roll < 0.6) return { grpc: pick(r, grpcCodes) };
  if (roll < 0.75) return { disconnect: true };
  if (roll < 0.95) return { delay: `${int(r, 1, 8)}s` };
  return { hang: true };
}

function csiFaults(r: Random): Record<string, unknown[]> {
  const out: Record<string, unknown[]> = {};
  for (const rpc of csiRpcs)
    if (r() < 0.5) out[rpc] = Array.from({ length: int(r, 1, 3) }, () => csiFaultEntry(r));
  return out;
}

interface PodPlan {
  uid: string;
  volumes: unknown[];
}

/** PVs and bound claims: 1–3 of the scripted disk, 0–2 of the scripted CSI driver. */
function drawObjects(r: Random): { objects: unknown[]; diskCount: number; csiCount: number } {
  const diskCount = int(r, 1, 3);
  const csiCount = int(r, 0, 2);
  const objects: unknown[] = [];
  const volume = (name: string, driver: string, handle: string, accessModes: string[]) => {
    const volumeMode = r() < 0.25 ? 'Block' : 'Filesystem';
    objects.push({
      kind: 'PersistentVolume',
      metadata: { name: `pv-${name}` },
      spec: { accessModes, volumeMode, capacity: { storage: '1Gi' }, csi: { driver, volumeHandle: handle } },
    });
    objects.push({
      kind: 'PersistentVolumeClaim',
      metadata: { name: `claim-${name}`, namespace: 'default' },
      // Bound by name; its volumeMode and access modes must match the PV's to bind.
      spec: { volumeName: `pv-${name}`, volumeMode, accessModes },
    });
  };
  for (let i = 0; i < diskCount; i++)
    volume(`${i}`, 'fake.disk', `disk-${i}`, r() < 0.7 ? ['ReadWriteOnce'] : ['ReadWriteMany']);
  // Volumes of a scripted CSI driver, at the gRPC boundary.
  for (let i = 0; i < csiCount; i++) volume(`csi${i}`, csiDriverName, `csi-${i}`, ['ReadWriteOnce']);
  return { objects, diskCount, csiCount };
}

function drawPods(r: Random, counts: { diskCount: number; csiCount: number }): PodPlan[] {
  return Array.from({ length: int(r, 2, 5) }, (_, p) => {
    const volumes: unknown[] = [];
    const n = int(r, 1, 3);
    for (let v = 0; v < n; v++) {
      const kind = r();
      const claim = (claimName: string) => ({ claimName });
      if (kind < 0.5)
        volumes.push({ name: `data-${v}`, persistentVolumeClaim: claim(`claim-${int(r, 0, counts.diskCount - 1)}`) });
      else if (kind < 0.6 && counts.csiCount > 0)
        volumes.push({ name: `csi-${v}`, persistentVolumeClaim: claim(`claim-csi${int(r, 0, counts.csiCount - 1)}`) });
      else if (kind < 0.7) volumes.push({ name: `scratch-${v}`, emptyDir: {} });
      else if (kind < 0.85) volumes.push({ name: `config-${v}`, configMap: { name: 'settings' } });
      else volumes.push({ name: `inline-${v}`, csi: { driver: 'fake.disk', volumeHandle: `eph-${p}-${v}` } });
    }
    return { uid: `uid-${p}`, volumes };
  });
}

/** The attachable volumes the present pods use (what the node reports in controller mode). */
function volumesInUse(pods: readonly PodPlan[], present: ReadonlySet<string>, csiAttachable: boolean): string[] {
  const handles = new Set<string>();
  for (const p of pods) {
    if (!present.has(p.uid)) continue;
    for (const v of p.volumes as { persistentVolumeClaim?: { claimName: string } }[]) {
      const claim = v.persistentVolumeClaim?.claimName;
      if (claim === undefined) continue;
      const id = claim.slice('claim-'.length);
      if (!id.startsWith('csi')) handles.add(`fake.disk/disk-${id}`);
      else if (csiAttachable) handles.add(`kubernetes.io/csi/${csiDriverName}^csi-${id.slice(3)}`);
    }
  }
  return [...handles].sort();
}

/** Pods coming and going, updates, restarts and time passing; then the liveness phase. */
function drawSteps(
  r: Random,
  pods: readonly PodPlan[],
  opts: { controllerAttachDetach: boolean; csiAttachable: boolean },
): { steps: unknown[]; present: Set<string>; everAdded: Set<string> } {
  const podObject = (p: PodPlan) => ({
    metadata: { name: p.uid.slice(4), namespace: 'default', uid: p.uid },
    spec: { volumes: p.volumes },
  });
  const present = new Set<string>();
  const everAdded = new Set<string>();
  const steps: unknown[] = [];
  const report = () => {
    if (!opts.controllerAttachDetach) return;
    steps.push({ reportInUse: volumesInUse(pods, present, opts.csiAttachable) });
    steps.push({ controllerAttach: volumesInUse(pods, present, opts.csiAttachable) });
  };
  const stepCount = int(r, 5, 20);
  for (let s = 0; s < stepCount; s++) {
    const roll = r();
    const absent = pods.filter((p) => !present.has(p.uid));
    const here = pods.filter((p) => present.has(p.uid));
    if (roll < 0.35 && absent.length > 0) {
      const p = pick(r, absent);
      present.add(p.uid);
      everAdded.add(p.uid);
      steps.push({ addPod: podObject(p) });
      report();
    } else if (roll < 0.5 && here.length > 0) {
      const p = pick(r, here);
      present.delete(p.uid);
      steps.push({ removePod: p.uid });
      report();
    } else if (roll < 0.6 && here.length > 0) {
      steps.push({ updatePod: podObject(pick(r, here)) });
    } else if (roll < 0.7) {
      steps.push({ restart: {} });
    } else {
      steps.push({ advance: `${int(r, 1, 20_000)}ms` });
    }
  }
  // Liveness: the fault scripts are finite; give every backoff and timeout time to pass.
  report();
  steps.push({ advance: '6h' });
  return { steps, present, everAdded };
}

/** Draws one scenario (as the raw document a file would hold) from a seed. */
export function generateScenario(seed: number): {
  document: Record<string, unknown>;
  present: string[];
  removed: string[];
} {
  const r = prng(seed);
  const controllerAttachDetach = r() < 0.3;
  const { objects, diskCount, csiCount } = drawObjects(r);
  const pods = drawPods(r, { diskCount, csiCount });
  const csiAttachable = r() < 0.7;
  const csiPlugin = {
    name: csiDriverName,
    csi: { publishUnpublish: csiAttachable, stageUnstage: r() < 0.7 },
    faults: csiFaults(r),
  };
  const { steps, present, everAdded } = drawSteps(r, pods, { controllerAttachDetach, csiAttachable });
  const presentList = [...present].sort();
  const removed = [...everAdded].filter((uid) => !present.has(uid)).sort();
  const mounts: Record<string, string> = {};
  for (const uid of removed)
    for (const v of pods.find((p) => p.uid === uid)!.volumes as { name: string }[])
      mounts[`${uid}/${v.name}`] = 'unmounted';
  const expectation: Record<string, unknown> = {
    ...(presentList.length > 0 ? { podReady: presentList } : {}),
    ...(Object.keys(mounts).length > 0 ? { mounts } : {}),
  };
  if (presentList.length === 0) expectation.volumesInUse = [];
  steps.push({ expect: expectation });
  const document = {
    name: `chaos seed ${seed}`,
    controllerAttachDetach,
    plugins: [
      { name: 'fake.disk', attachable: true, blockMappable: true, faults: faults(r, diskCalls) },
      { name: 'kubernetes.io/empty-dir', faults: faults(r, podCalls) },
      { name: 'kubernetes.io/configmap', requiresRemount: true, faults: faults(r, podCalls) },
      ...(csiCount > 0 ? [csiPlugin] : []),
    ],
    objects,
    steps,
  };
  return { document, present: presentList, removed };
}

export interface ChaosFailure {
  readonly seed: number;
  readonly messages: string[];
  readonly scenario: string;
}

export interface ChaosReport {
  readonly seed: number;
  readonly runs: number;
  readonly events: number;
  readonly calls: number;
  readonly restarts: number;
  readonly faultsInjected: number;
  readonly invariantChecks: number;
  readonly failures: ChaosFailure[];
}

/**
 * After the liveness phase: nothing running, and the pretend host holds exactly what the
 * present pods need — no pod volume, device mount or attachment left of anything else.
 */
function convergenceMisses(
  result: SimulationResult,
  host: FakeHost,
  wanted: { setUp: Set<string>; volumes: Set<string> },
): string[] {
  const misses: string[] = [];
  const state = result.state as { pending: unknown[] };
  if (state.pending.length > 0)
    misses.push(
      `operations still running after the liveness phase: ${JSON.stringify(state.pending)}`,
    );
  for (const key of host.setUp)
    if (!wanted.setUp.has(key)) misses.push(`leaked on the host: pod volume ${key}`);
  for (const key of wanted.setUp)
    if (!host.setUp.has(key)) misses.push(`missing on the host: pod volume ${key}`);
  for (const v of host.devicesMounted)
    if (!wanted.volumes.has(v)) misses.push(`leaked on the host: device mount of ${v}`);
  for (const v of host.attached)
    if (!wanted.volumes.has(v)) misses.push(`leaked on the host: attachment of ${v}`);
  return misses;
}

/** What the present pods need on the host, from the final world the engine reached. */
function wantedOnHost(result: SimulationResult): { setUp: Set<string>; volumes: Set<string> } {
  const state = result.state as {
    mounts: { volume: string; pod: string; state: string }[];
    attachments: { volume: string }[];
  };
  return {
    setUp: new Set(
      state.mounts.filter((m) => m.state === 'mounted').map((m) => `${m.volume}|${m.pod}`),
    ),
    volumes: new Set(state.attachments.map((a) => a.volume)),
  };
}

export async function chaos(opts: {
  seed: number;
  runs: number;
  onProgress?: (done: number) => void;
}): Promise<ChaosReport> {
  const failures: ChaosFailure[] = [];
  let events = 0;
  let calls = 0;
  let restarts = 0;
  let faultsInjected = 0;
  const stats = { invariantChecks: 0 };
  for (let i = 0; i < opts.runs; i++) {
    const seed = (opts.seed + i) >>> 0;
    const { document } = generateScenario(seed);
    const text = stringify(document);
    const scenario = parseScenario(text, `chaos seed ${seed}`);
    let result: SimulationResult;
    const host = new FakeHost();
    try {
      result = await simulate(scenario, { fakeHost: host, stats });
    } catch (error) {
      failures.push({
        seed,
        messages: [`the engine failed: ${(error as Error).stack ?? String(error)}`],
        scenario: text,
      });
      continue;
    }
    events += result.events;
    calls += result.calls.length;
    faultsInjected += result.calls.filter((c) => c.outcome !== 'ok').length;
    restarts += scenario.steps.filter((s) => 'restart' in s).length;
    const messages = [
      ...result.failures.map((f) => f.message),
      ...convergenceMisses(result, host, wantedOnHost(result)),
    ];
    if (messages.length > 0) failures.push({ seed, messages, scenario: text });
    opts.onProgress?.(i + 1);
  }
  return {
    seed: opts.seed,
    runs: opts.runs,
    events,
    calls,
    restarts,
    faultsInjected,
    invariantChecks: stats.invariantChecks,
    failures,
  };
}
