/**
 * Kubernetes' attach/detach controller against `vole controller --kubeconfig`, side by
 * side on one real kube-apiserver (scripts/kube-up.sh), in turn, in the same run.
 *
 * The bench makes N fake Nodes (the controller-managed annotation), a CSIDriver with
 * attachRequired true, and P ReadWriteOnce claims with their PVs bound already (claimRef
 * with the claim's UID, both Bound, as Kubernetes' PV controller would leave them). Then,
 * for each controller in turn — kube-controller-manager run with `--controllers
 * attachdetach` only, then `vole controller` — it creates P pods bound to the Nodes by
 * spec.nodeName, one claim each, spread round-robin, 16 requests in flight.
 *
 * The bench plays the external-attacher (it sets `status.attached` on each new
 * VolumeAttachment as soon as its watch sees it) and the kubelets (a volume listed in a
 * Node's `volumesAttached` goes into that Node's `volumesInUse`, as a kubelet mounting it
 * would report). Both controllers get exactly the same attacher and kubelets, so the
 * figures measure the controllers, not a CSI driver; csi-attacher with a fake driver would
 * add its own queue and its own CPU to both alike.
 *
 * Figures, from each pod's create request: the VolumeAttachment seen by the bench's watch,
 * and the volume listed in its Node's `status.volumesAttached` (p50, p99), and the
 * controller process's CPU seconds (/proc/PID/stat utime + stime) over that window. Then
 * the pods are deleted, volumesInUse emptied, and the round ends when every
 * VolumeAttachment and volumesAttached entry is gone. Goal: vole's p99 below Kubernetes'
 * (its reconciler wakes every 100 ms; vole is event-driven), CPU at most Kubernetes'.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, openSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeHttp } from '../../src/kube/http.js';
import {
  type ApiObject,
  type KubeInformer,
  coreRef,
  startInformer,
  storageRef,
} from '../../src/kube/informer.js';
import { type Figure, progress, quantile, repoRoot, scratchDir, sleepMs } from './util.js';
import { RealClock } from '../../src/clock.js';

const driver = 'bench.csi.vole.dev';
const managed = 'volumes.kubernetes.io/controller-managed-attach-detach';
const inFlight = 16;
const roundTimeoutMs = 10 * 60_000;

/** Runs `fn` over `items`, `limit` at a time. */
export async function pool<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<unknown>,
) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** utime + stime of a process, in seconds (clock ticks of 1/100 s on Linux). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });
}

export async function waitFor(what: string, check: () => boolean, timeoutMs = roundTimeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleepMs(50);
  }
}

interface Controller {
  readonly pid: number;
  stop(): Promise<void>;
}

export function stopper(child: ChildProcess): () => Promise<void> {
  return async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    process.kill(child.pid!, 'SIGTERM');
    const timer = setTimeout(() => child.pid !== undefined && child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  };
}

/** kube-controller-manager with its attach/detach controller only, ready once synced. */
async function startKcm(bin: string, dir: string): Promise<Controller> {
  const logFile = join(dir, 'kube-controller-manager-bench.log');
  const log = openSync(logFile, 'w');
  const port = await freePort();
  const child = spawn(
    join(bin, 'kube-controller-manager'),
    [
      '--kubeconfig',
      join(dir, 'kubeconfig'),
      '--controllers',
      'attachdetach',
      '--leader-elect=false',
      '--bind-address',
      '127.0.0.1',
      '--secure-port',
      String(port),
      '--cert-dir',
      join(dir, 'pki/kcm-bench'),
      '--use-service-account-credentials=false',
    ],
    { stdio: ['ignore', log, log] },
  );
  const synced = () =>
    /Starting attach detach controller[\s\S]*Caches are synced/.test(readFileSync(logFile, 'utf8'));
  await waitFor('kube-controller-manager to sync', synced, 60_000);
  return { pid: child.pid!, stop: stopper(child) };
}

/** `vole controller`, compiled (dist/) when the bench is, ready once it leads. */
async function startVole(dir: string): Promise<Controller> {
  const here = fileURLToPath(import.meta.url);
  const compiled = here.endsWith('.js');
  const main = compiled
    ? join(dirname(here), '../../src/cli/main.js')
    : join(repoRoot, 'src/cli/main.ts');
  // e.g. BENCH_KUBE_VOLE_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof' to profile it.
  const nodeArgs = (process.env.BENCH_KUBE_VOLE_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const args = [
    ...nodeArgs,
    ...(compiled ? [] : ['--import', 'tsx']),
    main,
    'controller',
    '--kubeconfig',
    join(dir, 'kubeconfig'),
    '--root',
    join(dir, 'vole-controller'),
    '--identity',
    'bench',
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  await waitFor('vole controller to lead', () => /leading: CSI drivers/.test(out), 60_000);
  return { pid: child.pid!, stop: stopper(child) };
}

/** The Nodes, the CSIDriver, and P claims with their PVs, bound already. */
async function makeObjects(http: KubeHttp, nodes: number, pods: number): Promise<void> {
  // No kube-controller-manager made it (its service account controller does not run).
  await http.post('/api/v1/namespaces/default/serviceaccounts', {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: 'default', namespace: 'default' },
  });
  await http.post('/apis/storage.k8s.io/v1/csidrivers', {
    apiVersion: 'storage.k8s.io/v1',
    kind: 'CSIDriver',
    metadata: { name: driver },
    spec: { attachRequired: true, podInfoOnMount: false },
  });
  await pool(
    Array.from({ length: nodes }, (_, i) => `node-${i}`),
    inFlight,
    (name) =>
      http.post('/api/v1/nodes', {
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name, annotations: { [managed]: 'true' } },
      }),
  );
  const storage = { storage: '1Gi' };
  await pool(
    Array.from({ length: pods }, (_, i) => i),
    inFlight,
    async (i) => {
      const claimPath = '/api/v1/namespaces/default/persistentvolumeclaims';
      const claim = await http.post(claimPath, {
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        metadata: { name: `claim-${i}`, namespace: 'default' },
        spec: {
          accessModes: ['ReadWriteOnce'],
          resources: { requests: storage },
          storageClassName: '',
          volumeName: `pv-${i}`,
        },
      });
      const uid = (claim.metadata as { uid: string }).uid;
      await http.post('/api/v1/persistentvolumes', {
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        metadata: { name: `pv-${i}` },
        spec: {
          capacity: storage,
          accessModes: ['ReadWriteOnce'],
          persistentVolumeReclaimPolicy: 'Retain',
          storageClassName: '',
          claimRef: {
            kind: 'PersistentVolumeClaim',
            namespace: 'default',
            name: `claim-${i}`,
            uid,
          },
          csi: { driver, volumeHandle: `vol-${i}` },
        },
      });
      const bound = {
        status: { phase: 'Bound', capacity: storage, accessModes: ['ReadWriteOnce'] },
      };
      await http.patch(`${claimPath}/claim-${i}/status`, bound, 'merge');
      await http.patch(
        `/api/v1/persistentvolumes/pv-${i}/status`,
        { status: { phase: 'Bound' } },
        'merge',
      );
    },
  );
}

interface RoundTimes {
  created: Map<string, number>;
  vaSeen: Map<string, number>;
  listed: Map<string, number>;
}

/**
 * The bench's watches: the external-attacher (status.attached on each new
 * VolumeAttachment) and the kubelets (volumesInUse follows volumesAttached), and the
 * times each (PV, node) was first seen as a VolumeAttachment and in volumesAttached.
 */
class Cluster {
  private informers: KubeInformer[] = [];
  private readonly patched = new Set<string>();
  readonly vas = new Map<string, ApiObject>();
  readonly attachedOn = new Map<string, string[]>();
  private readonly inUse = new Map<string, string[]>();
  private kubeletsReport = true;
  times: RoundTimes = { created: new Map(), vaSeen: new Map(), listed: new Map() };
  errors: string[] = [];

  constructor(private readonly http: KubeHttp) {}

  async start(): Promise<void> {
    const clock = new RealClock();
    const say = (line: string) => this.errors.push(line);
    this.informers = [
      startInformer(
        { http: this.http, clock },
        storageRef('volumeattachments', 'VolumeAttachment'),
        { upsert: (o) => this.onVa(o), remove: (o) => this.vas.delete(o.metadata.name) },
        say,
      ),
      startInformer(
        { http: this.http, clock },
        coreRef('nodes', 'Node'),
        { upsert: (o) => this.onNode(o), remove: (o) => this.attachedOn.delete(o.metadata.name) },
        say,
      ),
    ];
    await Promise.all(this.informers.map((i) => i.synced));
  }

  newRound(): void {
    this.times = { created: new Map(), vaSeen: new Map(), listed: new Map() };
    this.patched.clear();
    this.kubeletsReport = true;
  }

  private onVa(o: ApiObject): void {
    const nowMs = performance.now();
    this.vas.set(o.metadata.name, o);
    const spec = o.spec as { nodeName: string; source: { persistentVolumeName: string } };
    const key = `${spec.source.persistentVolumeName}@${spec.nodeName}`;
    if (!this.times.vaSeen.has(key)) this.times.vaSeen.set(key, nowMs);
    const status = (o.status ?? {}) as { attached?: boolean };
    const name = o.metadata.name;
    if (status.attached === true || o.metadata.deletionTimestamp !== undefined) return;
    if (this.patched.has(name)) return;
    this.patched.add(name);
    const path = `/apis/storage.k8s.io/v1/volumeattachments/${name}/status`;
    void this.http
      .patch(path, { status: { attached: true } }, 'merge')
      .catch((e: Error) => (this.patched.delete(name), this.errors.push(`attacher: ${e.message}`)));
  }

  private onNode(o: ApiObject): void {
    const nowMs = performance.now();
    const node = o.metadata.name;
    const status = (o.status ?? {}) as { volumesAttached?: { name: string }[] };
    const names = (status.volumesAttached ?? []).map((v) => v.name);
    this.attachedOn.set(node, names);
    for (const name of names) {
      const handle = name.slice(name.indexOf('^') + 1);
      const key = `pv-${handle.slice('vol-'.length)}@${node}`;
      if (!this.times.listed.has(key)) this.times.listed.set(key, nowMs);
    }
    if (!this.kubeletsReport) return;
    const inUse = this.inUse.get(node) ?? [];
    const more = names.filter((n) => !inUse.includes(n));
    if (more.length === 0) return;
    const next = [...inUse, ...more].sort();
    this.inUse.set(node, next);
    void this.setInUse(node, next);
  }

  setInUse(node: string, volumesInUse: string[]): Promise<unknown> {
    return this.http
      .patch(`/api/v1/nodes/${node}/status`, { status: { volumesInUse } }, 'merge')
      .catch((e: Error) => this.errors.push(`kubelet ${node}: ${e.message}`));
  }

  /** The kubelets unmount everything: volumesInUse emptied on every Node. */
  async unmountAll(): Promise<void> {
    this.kubeletsReport = false;
    const nodes = [...this.inUse.keys()];
    this.inUse.clear();
    await pool(nodes, inFlight, (node) => this.setInUse(node, []));
  }

  allDetached(): boolean {
    return this.vas.size === 0 && [...this.attachedOn.values()].every((v) => v.length === 0);
  }

  async stop(): Promise<void> {
    for (const i of this.informers) await i.stop();
  }
}

interface RoundResult {
  vaMs: number[];
  listedMs: number[];
  cpuSeconds: number;
  detachSeconds: number;
}

/** One controller's round: pods created, everything attached and listed, then torn down. */
async function round(
  http: KubeHttp,
  cluster: Cluster,
  controller: Controller,
  opts: { nodes: number; pods: number; label: string },
): Promise<RoundResult> {
  cluster.newRound();
  const cpuBefore = cpuSeconds(controller.pid);
  const podsPath = '/api/v1/namespaces/default/pods';
  const items = Array.from({ length: opts.pods }, (_, i) => i);
  await pool(items, inFlight, async (i) => {
    const nodeName = `node-${i % opts.nodes}`;
    cluster.times.created.set(`pv-${i}@${nodeName}`, performance.now());
    await http.post(podsPath, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `${opts.label}-${i}`, namespace: 'default' },
      spec: {
        nodeName,
        automountServiceAccountToken: false,
        containers: [
          { name: 'c', image: 'pause', volumeMounts: [{ name: 'v', mountPath: '/data' }] },
        ],
        volumes: [{ name: 'v', persistentVolumeClaim: { claimName: `claim-${i}` } }],
      },
    });
  });
  await waitFor(`${opts.label}: every volume listed in volumesAttached`, () =>
    [...cluster.times.created.keys()].every((k) => cluster.times.listed.has(k)),
  );
  const cpuAfter = cpuSeconds(controller.pid);
  const { created, vaSeen, listed } = cluster.times;
  const since = (seen: Map<string, number>) =>
    [...created].map(([k, t]) => (seen.get(k) ?? Number.NaN) - t);
  const result = {
    vaMs: since(vaSeen),
    listedMs: since(listed),
    cpuSeconds: cpuAfter - cpuBefore,
    detachSeconds: 0,
  };
  const deleteStart = performance.now();
  const body = { apiVersion: 'v1', kind: 'DeleteOptions', gracePeriodSeconds: 0 };
  await pool(items, inFlight, (i) =>
    http.call('DELETE', `${podsPath}/${opts.label}-${i}`, {
      body,
      contentType: 'application/json',
    }),
  );
  await cluster.unmountAll();
  await waitFor(`${opts.label}: every volume detached`, () => cluster.allDetached());
  result.detachSeconds = (performance.now() - deleteStart) / 1000;
  return result;
}

/** The built peers' directory: VOLE_PEERS_BIN, else scripts/peers.sh (builds them once). */
export function peersBin(names: readonly string[]): string {
  const given = process.env.VOLE_PEERS_BIN;
  if (given !== undefined && given !== '') return given;
  const run = spawnSync('bash', [join(repoRoot, 'scripts/peers.sh'), ...names], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const dir = run.stdout?.trim().split('\n').at(-1) ?? '';
  if (run.status !== 0 || !existsSync(dir))
    throw new Error(`scripts/peers.sh ${names.join(' ')} failed (status ${run.status})`);
  return dir;
}

const ms = (values: readonly number[], q: number) => quantile(values, q);

function figuresOf(results: Map<string, RoundResult>, pods: number, nodes: number): Figure[] {
  const figures: Figure[] = [];
  const add = (name: string, value: number, unit: string, extra: Partial<Figure> = {}) =>
    figures.push({ section: 'kube', name, value, unit, runs: [value], ...extra });
  for (const [label, r] of results) {
    add(`${label}: pod → VolumeAttachment p50`, ms(r.vaMs, 0.5), 'ms');
    add(`${label}: pod → VolumeAttachment p99`, ms(r.vaMs, 0.99), 'ms');
    add(`${label}: pod → volumesAttached p50`, ms(r.listedMs, 0.5), 'ms');
    add(`${label}: pod → volumesAttached p99`, ms(r.listedMs, 0.99), 'ms');
    add(`${label}: CPU, ${pods} attaches`, r.cpuSeconds, 's');
    add(`${label}: all detached after the pods' delete`, r.detachSeconds, 's');
  }
  const kube = results.get('kubernetes');
  const vole = results.get('vole');
  if (kube !== undefined && vole !== undefined) {
    const p99 = ms(vole.listedMs, 0.99) / ms(kube.listedMs, 0.99);
    add('vole / kubernetes: volumesAttached p99', p99, '×', { target: '< 1', met: p99 < 1 });
    const cpu = vole.cpuSeconds / kube.cpuSeconds;
    add('vole / kubernetes: CPU', cpu, '×', { target: '≤ 1.0', met: cpu <= 1 });
  }
  const note = `${pods} pods over ${nodes} Nodes`;
  return figures.map((f) => ({ ...f, note }));
}

/** Both controllers in turn on one API server: Kubernetes' first, then vole's. */
export async function runKube(opts: { pods: number; nodes: number }): Promise<{
  section: string;
  figures: Figure[];
  details?: Record<string, unknown>;
}> {
  let bin: string;
  try {
    bin = peersBin(['etcd', 'kube-apiserver', 'kubectl', 'kube-controller-manager']);
  } catch (error) {
    const note = `no Kubernetes peers: ${(error as Error).message}`;
    return {
      section: 'kube',
      figures: [{ section: 'kube', name: '(skipped)', value: null, unit: '', note }],
    };
  }
  const dir = join(scratchDir('kube'), 'cluster');
  const up = spawnSync('bash', [join(repoRoot, 'scripts/kube-up.sh'), dir], {
    encoding: 'utf8',
    env: { ...process.env, VOLE_PEERS_BIN: bin },
    timeout: 180_000,
  });
  if (up.status !== 0) throw new Error(`kube-up.sh: ${up.stderr}`);
  const http = KubeHttp.fromFile(join(dir, 'kubeconfig'));
  const cluster = new Cluster(http);
  const results = new Map<string, RoundResult>();
  try {
    progress(`kube: ${opts.nodes} Nodes, ${opts.pods} claims and PVs`);
    await makeObjects(http, opts.nodes, opts.pods);
    await cluster.start();
    for (const [label, start] of [
      ['kubernetes', () => startKcm(bin, dir)],
      ['vole', () => startVole(dir)],
    ] as const) {
      const controller = await start();
      try {
        progress(`kube: ${label}: ${opts.pods} pods`);
        const r = await round(http, cluster, controller, { ...opts, label });
        results.set(label, r);
        progress(
          `kube: ${label}: volumesAttached p50 ${ms(r.listedMs, 0.5).toFixed(0)} ms, p99 ${ms(r.listedMs, 0.99).toFixed(0)} ms, CPU ${r.cpuSeconds.toFixed(2)} s`,
        );
      } finally {
        await controller.stop();
      }
    }
  } finally {
    await cluster.stop();
    if (existsSync(join(dir, 'pids')))
      spawnSync('bash', [join(repoRoot, 'scripts/kube-down.sh'), dir], { stdio: 'inherit' });
  }
  return {
    section: 'kube',
    figures: figuresOf(results, opts.pods, opts.nodes),
    details: { errors: cluster.errors.slice(0, 20), rounds: [...results.keys()] },
  };
}
