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
import { csiScriptedRpcs, parseScenario, type Scenario } from './scenario.js';
import { FakeHost } from '../plugins/fake.js';
import { type SimulateOptions, simulate, type SimulationResult } from './simulate.js';

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
/** The scripted driver's RPCs but expansion (chaos swarms grow no volumes). */
const csiRpcs = csiScriptedRpcs.filter((rpc) => rpc !== 'NodeExpandVolume');
const grpcCodes = [
  'DEADLINE_EXCEEDED',
  'UNAVAILABLE',
  'ABORTED',
  'INTERNAL',
  'NOT_FOUND',
  'INVALID_ARGUMENT',
];

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

/** Disks as PersistentVolumes (access and volume modes drawn) with a claim each. */
function drawDisks(r: Random, diskCount: number): unknown[] {
  const objects: unknown[] = [];
  for (let i = 0; i < diskCount; i++) {
    const accessModes = r() < 0.7 ? ['ReadWriteOnce'] : ['ReadWriteMany'];
    const volumeMode = r() < 0.25 ? 'Block' : 'Filesystem';
    objects.push({
      kind: 'PersistentVolume',
      metadata: { name: `pv-${i}` },
      spec: {
        accessModes,
        volumeMode,
        capacity: { storage: '1Gi' },
        csi: { driver: 'fake.disk', volumeHandle: `disk-${i}` },
      },
    });
    objects.push({
      kind: 'PersistentVolumeClaim',
      metadata: { name: `claim-${i}`, namespace: 'default' },
      // Bound by name; its volumeMode and access modes must match the PV's to bind.
      spec: { volumeName: `pv-${i}`, volumeMode, accessModes },
    });
  }
  return objects;
}

const settingsConfigMap = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'settings', namespace: 'default' },
  data: { 'level.conf': 'debug' },
};

/** Pod `p`'s volumes: claims of the disks, emptyDirs, configMaps, inline CSI volumes. */
function drawPodVolumes(r: Random, p: number, diskCount: number): unknown[] {
  const volumes: unknown[] = [];
  const n = int(r, 1, 3);
  for (let v = 0; v < n; v++) {
    const kind = r();
    if (kind < 0.5)
      volumes.push({
        name: `data-${v}`,
        persistentVolumeClaim: { claimName: `claim-${int(r, 0, diskCount - 1)}` },
      });
    else if (kind < 0.7) volumes.push({ name: `scratch-${v}`, emptyDir: {} });
    else if (kind < 0.85) volumes.push({ name: `config-${v}`, configMap: { name: 'settings' } });
    else
      volumes.push({
        name: `inline-${v}`,
        csi: { driver: 'fake.disk', volumeHandle: `eph-${p}-${v}` },
      });
  }
  return volumes;
}

const podObject = (p: PodPlan) => ({
  metadata: { name: p.uid.slice(4), namespace: 'default', uid: p.uid },
  spec: { volumes: p.volumes },
});

/** The disks the present pods claim, as the node reports them in use. */
function disksInUse(pods: readonly PodPlan[], present: ReadonlySet<string>): string[] {
  const handles = new Set<string>();
  for (const p of pods) {
    if (!present.has(p.uid)) continue;
    for (const v of p.volumes as { persistentVolumeClaim?: { claimName: string } }[]) {
      if (v.persistentVolumeClaim)
        handles.add(`fake.disk/disk-${v.persistentVolumeClaim.claimName.split('-')[1]}`);
    }
  }
  return [...handles].sort();
}

/** The steps: pods added, removed and updated, restarts, time passing; then a long wait. */
function drawSteps(r: Random, pods: readonly PodPlan[], controllerAttachDetach: boolean) {
  const present = new Set<string>();
  const everAdded = new Set<string>();
  const steps: unknown[] = [];
  const report = () => {
    if (!controllerAttachDetach) return;
    steps.push({ reportInUse: disksInUse(pods, present) });
    steps.push({ controllerAttach: disksInUse(pods, present) });
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
  const removed = [...everAdded].filter((uid) => !present.has(uid)).sort();
  return { steps, present: [...present].sort(), removed };
}

/** Convergence: every present pod ready, every volume of the removed ones unmounted. */
function convergence(pods: readonly PodPlan[], present: string[], removed: string[]) {
  const mounts: Record<string, string> = {};
  for (const uid of removed)
    for (const v of pods.find((p) => p.uid === uid)!.volumes as { name: string }[])
      mounts[`${uid}/${v.name}`] = 'unmounted';
  const expectation: Record<string, unknown> = {
    ...(present.length > 0 ? { podReady: present } : {}),
    ...(Object.keys(mounts).length > 0 ? { mounts } : {}),
  };
  if (present.length === 0) expectation.volumesInUse = [];
  return expectation;
}

/** Draws one scenario (as the raw document a file would hold) from a seed. */
export function generateScenario(seed: number): {
  document: Record<string, unknown>;
  present: string[];
  removed: string[];
} {
  // The order of the draws is the seed's meaning: keep it, or old seeds stop reproducing.
  const r = prng(seed);
  const controllerAttachDetach = r() < 0.3;
  const diskCount = int(r, 1, 3);
  const objects = drawDisks(r, diskCount);
  // The ConfigMap the pods' configMap volumes read: without it their setUp fails, as the
  // kubelet's does (a draw of none, so every seed keeps its meaning).
  objects.push(settingsConfigMap);
  const podCount = int(r, 2, 5);
  const pods: PodPlan[] = Array.from({ length: podCount }, (_, p) => ({
    uid: `uid-${p}`,
    volumes: drawPodVolumes(r, p, diskCount),
  }));
  const { steps, present, removed } = drawSteps(r, pods, controllerAttachDetach);
  steps.push({ expect: convergence(pods, present, removed) });
  // The scenario file's plugin entries: plain scripted plugins, and maybe a CSI driver below.
  const plugins: unknown[] = [
    { name: 'fake.disk', attachable: true, blockMappable: true, faults: faults(r, diskCalls) },
    { name: 'kubernetes.io/empty-dir', faults: faults(r, podCalls) },
    { name: 'kubernetes.io/configmap', requiresRemount: true, faults: faults(r, podCalls) },
  ];
  const document = { name: `chaos seed ${seed}`, controllerAttachDetach, plugins, objects, steps };
  // Drawn last, so every earlier draw of a seed stays as it was.
  const csi = drawCsiDriver(r, pods, controllerAttachDetach);
  if (csi !== undefined) {
    objects.push(...csi.objects);
    plugins.push(csi.plugin);
    steps[steps.length - 1] = { expect: convergence(pods, present, removed) };
  }
  return { document, present, removed };
}

/**
 * 0–2 volumes of a scripted CSI driver at the gRPC boundary, claimed by some of the pods
 * (added to their volume lists, which their steps share). In controller mode the driver
 * has no ControllerPublishVolume: the steps report only the disks in use.
 */
function drawCsiDriver(
  r: Random,
  pods: PodPlan[],
  controllerAttachDetach: boolean,
): { objects: unknown[]; plugin: unknown } | undefined {
  const csiCount = int(r, 0, 2);
  if (csiCount === 0) return undefined;
  const objects: unknown[] = [];
  for (let i = 0; i < csiCount; i++) {
    const volumeMode = r() < 0.25 ? 'Block' : 'Filesystem';
    const accessModes = ['ReadWriteOnce'];
    objects.push({
      kind: 'PersistentVolume',
      metadata: { name: `pv-csi${i}` },
      spec: {
        accessModes,
        volumeMode,
        capacity: { storage: '1Gi' },
        csi: { driver: csiDriverName, volumeHandle: `csi-${i}` },
      },
    });
    objects.push({
      kind: 'PersistentVolumeClaim',
      metadata: { name: `claim-csi${i}`, namespace: 'default' },
      spec: { volumeName: `pv-csi${i}`, volumeMode, accessModes },
    });
  }
  for (const p of pods) {
    if (r() < 0.5) continue;
    const claimName = `claim-csi${int(r, 0, csiCount - 1)}`;
    p.volumes.push({ name: 'csi-data', persistentVolumeClaim: { claimName } });
  }
  const plugin = {
    name: csiDriverName,
    csi: { publishUnpublish: !controllerAttachDetach && r() < 0.7, stageUnstage: r() < 0.7 },
    faults: csiFaults(r),
  };
  return { objects, plugin };
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
  /** Runs one scenario (default: simulate); a test passes a mutant engine to see it caught. */
  simulate?: (scenario: Scenario, opts: SimulateOptions) => Promise<SimulationResult>;
}): Promise<ChaosReport> {
  const run = opts.simulate ?? simulate;
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
      result = await run(scenario, { fakeHost: host, stats });
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
