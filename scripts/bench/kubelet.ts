/**
 * The real kubelet against `vole run --kubeconfig`, on one kube-apiserver in one run: a
 * kubemark hollow node (`--morph=kubelet`: the kubelet's own volume manager and volume
 * plugins over a fake runtime and mount.FakeMounter, pkg/kubemark/hollow_kubelet.go) and
 * a vole node, both up the whole time.
 *
 * P pods go to each node in turn (bound at creation by spec.nodeName, 16 requests in
 * flight, in namespaces `kubelet` and `vole`), each with a ConfigMap, a Secret and an
 * emptyDir volume. A pod's volumes are ready on disk once, under the node's root, the
 * emptyDir's directory and the ConfigMap's and the Secret's key files exist (an atomic
 * writer makes a key's user-visible symlink last, after `..data`); the bench polls that
 * every 10 ms. Figures: pod create request → every volume ready (p50, p99), and the node
 * process's CPU (/proc/PID/stat utime + stime, with its children's: vole's command helpers
 * and the `mount`s they run) from the first create until the last pod is ready, divided by P.
 *
 * Then each node process is SIGKILLed and started again with its pods in place, and the
 * bench times its reconcile: the hollow kubelet's, until every pod's volumes are on disk
 * again (kubemark makes a new temporary root directory at each start, so it sets every
 * volume up afresh: utils.MakeTempDirOrDie in GetHollowKubeletConfig); vole's, until its
 * /readyz answers (the reconciler synced against what is on disk), every pod's files still
 * in place.
 *
 * No CSI volume yet. The hollow kubelet can take one: its plugin manager watches
 * plugins_registry under its root, and `vole csi-driver --registration-dir ROOT/plugins_registry`
 * registers there (kubemark's volumePlugins() includes csi.ProbeVolumePlugins(); the CSINode
 * then lists disk.csi.vole.dev). But `vole csi-driver` serves only PersistentVolumes on loop
 * disks (no inline volumes): one image, one loop device and one filesystem per pod on each
 * node, provisioned first, and loop devices are the host's, not the mount namespace's. The
 * same three volume types are measured on both, and the table says so.
 *
 * Needs root (vole mounts each Secret's tmpfs), in a private mount namespace (main.ts runs
 * this section under `unshare -m`); otherwise it is skipped, saying why.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  existsSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { mountsUnder } from '../../src/host/mountinfo.js';
import { KubeHttp } from '../../src/kube/http.js';
import { peersBin, pool, stopper, waitFor } from './kube.js';
import { type Figure, progress, quantile, repoRoot, scratchDir, sleepMs } from './util.js';

const hollowNode = 'node-k1';
const voleNode = 'node-v1';
const inFlight = 16;
const pollMs = 10;
/** A round's limit; BENCH_KUBELET_ROUND_TIMEOUT_S lowers it to fit a size into a session. */
const roundTimeoutMs = Number(process.env.BENCH_KUBELET_ROUND_TIMEOUT_S ?? 15 * 60) * 1000;

/** What each node process does, for a reader judging the comparison. */
const whatEachDid =
  'kubemark --morph=kubelet: the whole kubelet (pod workers, a fake container runtime, ' +
  'pod status, node status, its volume manager and plugins; mount.FakeMounter, so no ' +
  'tmpfs for Secrets and no command run); vole run --kubeconfig: volumes only (a real ' +
  'tmpfs per Secret: one `mount` process, run by one of its long-lived sh helpers, whose ' +
  'CPU is counted with it), no containers and no pod status. Volumes: ConfigMap, Secret, ' +
  'emptyDir on both; no CSI volume on either (the hollow kubelet registers vole ' +
  'csi-driver, but that driver serves no inline volume: each pod would need a provisioned ' +
  'loop-disk PersistentVolume, its attach, a loop device on the host and an mkfs, on both ' +
  'nodes; not built yet). vole restarts as a Node process ' +
  '(its modules loaded again), the hollow kubelet in a new root (kubemark makes one a start)';

/**
 * utime + stime of a process and of the children it has waited for (cutime + cstime), in
 * seconds (clock ticks of 1/100 s on Linux), with the same of each live descendant: vole's
 * command helpers are long-lived children, and the `mount` of each Secret's tmpfs is their
 * child, not vole's.
 */
function cpuSeconds(pid: number): number {
  const ticks = statTicks(pid, 4);
  return ticks / 100 + childrenOf(pid).reduce((sum, child) => sum + cpuSeconds(child), 0);
}

/** The process's own utime + stime, without any child's, in seconds. */
function ownCpuSeconds(pid: number): number {
  return statTicks(pid, 2) / 100;
}

/** The sum of the first `count` of utime, stime, cutime, cstime; 0 for a process gone. */
function statTicks(pid: number, count: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields.slice(11, 11 + count).reduce((sum, t) => sum + Number(t), 0);
  } catch {
    return 0; // it ended between the parent's list and this read
  }
}

/** The live children of a process, from each of its threads. */
function childrenOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((tid) =>
      readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8')
        .split(' ')
        .filter((p) => p.trim() !== '')
        .map(Number),
    );
  } catch {
    return [];
  }
}

/** A node under test: its process, and where its pods' volumes are. */
interface NodeUnderTest {
  readonly label: 'kubelet' | 'vole';
  readonly node: string;
  pid: number;
  root: string;
}

/** The time each pod's create request went out and its volumes were first seen ready. */
interface PodTimes {
  readonly created: Map<string, number>;
  readonly ready: Map<string, number>;
  readonly uids: Map<string, string>;
}

/** The paths that exist once the pod's three volumes are set up under `root`. */
function readyPaths(root: string, uid: string): string[] {
  const volumes = join(root, 'pods', uid, 'volumes');
  return [
    join(volumes, 'kubernetes.io~empty-dir', 'scratch'),
    join(volumes, 'kubernetes.io~configmap', 'settings', 'b.txt'),
    join(volumes, 'kubernetes.io~secret', 'credentials', 'user'),
  ];
}

/** Polls every pod not yet ready until all are, recording when each was first seen so. */
async function watchReady(
  what: string,
  times: PodTimes,
  root: () => string,
  done: () => boolean,
): Promise<void> {
  const deadline = Date.now() + roundTimeoutMs;
  while (!done() || times.ready.size < times.created.size) {
    if (Date.now() > deadline)
      throw new Error(
        `${what}: ${times.created.size - times.ready.size} pod(s) not ready on disk after ${roundTimeoutMs / 1000} s`,
      );
    const now = performance.now();
    for (const [pod, uid] of times.uids)
      if (!times.ready.has(pod) && readyPaths(root(), uid).every((p) => existsSync(p)))
        times.ready.set(pod, now);
    await sleepMs(pollMs);
  }
}

const namespaceObjects = (namespace: string) =>
  [
    ['/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } }],
    [
      `/api/v1/namespaces/${namespace}/serviceaccounts`,
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default', namespace } },
    ],
    [
      `/api/v1/namespaces/${namespace}/configmaps`,
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'settings', namespace },
        data: { 'a.txt': 'alpha', 'b.txt': 'beta' },
      },
    ],
    [
      `/api/v1/namespaces/${namespace}/secrets`,
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'credentials', namespace },
        stringData: { password: 'hunter2', user: 'admin' },
      },
    ],
  ] as const;

function podOf(name: string, namespace: string, nodeName: string): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace },
    spec: {
      nodeName,
      automountServiceAccountToken: false,
      containers: [
        {
          name: 'app',
          image: 'pause',
          volumeMounts: ['scratch', 'settings', 'credentials'].map((v) => ({
            name: v,
            mountPath: `/${v}`,
          })),
        },
      ],
      volumes: [
        { name: 'scratch', emptyDir: {} },
        { name: 'settings', configMap: { name: 'settings' } },
        { name: 'credentials', secret: { secretName: 'credentials' } },
      ],
    },
  };
}

interface RoundResult {
  readyMs: number[];
  cpuMsPerPod: number;
  /** Of cpuMsPerPod, what its children (vole's command helpers and their commands) used. */
  commandsCpuMsPerPod: number;
}

/** P pods onto one node, timed until each pod's volumes are on disk. */
async function round(http: KubeHttp, node: NodeUnderTest, pods: number): Promise<RoundResult> {
  const namespace = node.label;
  const times: PodTimes = { created: new Map(), ready: new Map(), uids: new Map() };
  let posted = false;
  const cpuBefore = cpuSeconds(node.pid);
  const ownBefore = ownCpuSeconds(node.pid);
  const watching = watchReady(
    `${node.label}: ${pods} pods`,
    times,
    () => node.root,
    () => posted,
  );
  await pool(
    Array.from({ length: pods }, (_, i) => `pod-${i}`),
    inFlight,
    async (name) => {
      times.created.set(name, performance.now());
      const made = await http.post(
        `/api/v1/namespaces/${namespace}/pods`,
        podOf(name, namespace, node.node),
      );
      times.uids.set(name, (made.metadata as { uid: string }).uid);
    },
  );
  posted = true;
  await watching;
  const cpu = cpuSeconds(node.pid) - cpuBefore;
  const own = ownCpuSeconds(node.pid) - ownBefore;
  const readyMs = [...times.created].map(([pod, t]) => times.ready.get(pod)! - t);
  return {
    readyMs,
    cpuMsPerPod: (cpu * 1000) / pods,
    commandsCpuMsPerPod: ((cpu - own) * 1000) / pods,
  };
}

/** The hollow kubelet's root directory from its log: the last "Using X as root dir" line. */
function hollowRootOf(dir: string): string | undefined {
  const log = readFileSync(join(dir, `hollow-${hollowNode}.log`), 'utf8');
  const roots = [...log.matchAll(/Using (\S+) as root dir for hollow-kubelet/g)];
  return roots.at(-1)?.[1];
}

/** The UIDs of a namespace's pods, by name. */
async function podUids(http: KubeHttp, namespace: string): Promise<Map<string, string>> {
  const list = await http.get(`/api/v1/namespaces/${namespace}/pods`);
  const items = (list.items ?? []) as { metadata: { name: string; uid: string } }[];
  return new Map(items.map((p) => [p.metadata.name, p.metadata.uid]));
}

/**
 * SIGKILL and start again (scripts/kube-restart.sh), then until every pod's volumes are on
 * disk under the root the new kubemark made; the new root joins DIR/hollow-nodes so that
 * kube-down.sh removes it too. Seconds.
 */
async function restartKubelet(http: KubeHttp, dir: string, node: NodeUnderTest) {
  const oldRoot = node.root;
  const uids = await podUids(http, node.label);
  const started = performance.now();
  const restart = spawnSync(
    'bash',
    [join(repoRoot, 'scripts/kube-restart.sh'), dir, `hollow-${hollowNode}`],
    {
      encoding: 'utf8',
    },
  );
  if (restart.status !== 0) throw new Error(`kube-restart.sh: ${restart.stderr}`);
  node.pid = Number(restart.stdout.trim().split('\n').at(-1));
  await waitFor('the restarted hollow kubelet to name its root', () => {
    const root = hollowRootOf(dir);
    return root !== undefined && root !== oldRoot;
  });
  node.root = hollowRootOf(dir)!;
  appendFileSync(join(dir, 'hollow-nodes'), `${hollowNode} ${node.root}\n`);
  const times: PodTimes = {
    created: new Map([...uids.keys()].map((p) => [p, started])),
    ready: new Map(),
    uids,
  };
  await watchReady(
    'kubelet after its restart',
    times,
    () => node.root,
    () => true,
  );
  // The new process's CPU since it started: its start and its reconcile.
  return { seconds: (performance.now() - started) / 1000, cpuSeconds: cpuSeconds(node.pid) };
}

/** `vole run --kubeconfig` on the vole node; resolves with its /readyz URL once it answers. */
async function startVole(
  kubeconfig: string,
  root: string,
): Promise<{ child: ChildProcess; readyz: string }> {
  const here = fileURLToPath(import.meta.url);
  const compiled = here.endsWith('.js');
  const main = compiled
    ? join(dirname(here), '../../src/cli/main.js')
    : join(repoRoot, 'src/cli/main.ts');
  const args = [
    ...(compiled ? [] : ['--import', 'tsx']),
    main,
    'run',
    ...['--kubeconfig', kubeconfig, '--node', voleNode, '--root', root],
    ...['--metrics-address', '127.0.0.1:0'],
  ];
  // e.g. BENCH_KUBELET_VOLE_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof' to profile it.
  const nodeArgs = (process.env.BENCH_KUBELET_VOLE_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // What it said, kept beside the root for a reader (the bench's scratch directory).
  const logFile = join(dirname(root), 'vole-run.log');
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
    appendFileSync(logFile, chunk);
  });
  let url = '';
  await waitFor(
    'vole run to serve its metrics',
    () => {
      url = /metrics on (http:\/\/\S+)\/metrics/.exec(out)?.[1] ?? '';
      return url !== '' || child.exitCode !== null;
    },
    60_000,
  );
  if (url === '') throw new Error(`vole run exited (${child.exitCode}):\n${out}`);
  return { child, readyz: `${url}/readyz` };
}

async function answersOk(url: string): Promise<boolean> {
  return fetch(url).then(
    (r) => r.ok,
    () => false,
  );
}

/** Until `url` answers 200, polled every 10 ms. */
async function untilOk(what: string, url: string, timeoutMs = roundTimeoutMs): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await answersOk(url))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (${url})`);
    await sleepMs(pollMs);
  }
}

/**
 * SIGKILL vole run and start it again on the same root; seconds until its /readyz says ok,
 * and the new process's CPU by then (its start included).
 */
async function restartVole(
  http: KubeHttp,
  kubeconfig: string,
  vole: { child: ChildProcess },
  node: NodeUnderTest,
) {
  const uids = await podUids(http, node.label);
  const exited = new Promise((resolve) => vole.child.once('exit', resolve));
  const started = performance.now();
  process.kill(node.pid, 'SIGKILL');
  await exited;
  const again = await startVole(kubeconfig, node.root);
  vole.child = again.child;
  node.pid = again.child.pid!;
  await untilOk('the restarted vole run to be ready', again.readyz);
  const seconds = (performance.now() - started) / 1000;
  const cpu = cpuSeconds(node.pid);
  const lost = [...uids.values()].filter(
    (uid) => !readyPaths(node.root, uid).every((p) => existsSync(p)),
  );
  if (lost.length > 0)
    throw new Error(`vole after its restart: ${lost.length} pod(s) without their files`);
  return { seconds, cpuSeconds: cpu };
}

/**
 * What each node asked of the API server over the whole run, from DIR/audit.log: the
 * hollow kubelet by its user agent (it runs as admin), vole by its node identity. Each
 * node's requests by "verb resource[/subresource]", most first.
 */
function apiRequests(dir: string): Record<'kubelet' | 'vole', Record<string, number>> {
  const out = { kubelet: new Map<string, number>(), vole: new Map<string, number>() };
  for (const line of readFileSync(join(dir, 'audit.log'), 'utf8').split('\n')) {
    if (line === '') continue;
    const e = JSON.parse(line) as {
      user: { username: string };
      userAgent?: string;
      verb: string;
      objectRef?: { resource?: string; subresource?: string };
    };
    const who =
      e.userAgent === 'hollow-kubelet'
        ? out.kubelet
        : e.user.username === `system:node:${voleNode}`
          ? out.vole
          : undefined;
    if (who === undefined) continue;
    const ref = e.objectRef ?? {};
    const key = `${e.verb} ${ref.resource ?? '?'}${ref.subresource === undefined ? '' : `/${ref.subresource}`}`;
    who.set(key, (who.get(key) ?? 0) + 1);
  }
  const sorted = (m: Map<string, number>) => Object.fromEntries([...m].sort((a, b) => b[1] - a[1]));
  return { kubelet: sorted(out.kubelet), vole: sorted(out.vole) };
}

const total = (byKind: Record<string, number>) => Object.values(byKind).reduce((a, b) => a + b, 0);

interface SizeResult {
  pods: number;
  requests: Record<'kubelet' | 'vole', Record<string, number>>;
  kubelet: RoundResult;
  vole: RoundResult;
  restart: {
    kubelet: { seconds: number; cpuSeconds: number };
    vole: { seconds: number; cpuSeconds: number };
  };
}

/** Why this section cannot run here, or undefined. */
function skipReason(): string | undefined {
  if (process.getuid?.() !== 0) return 'not root: vole run mounts a tmpfs for each Secret';
  const outer = process.env.BENCH_OUTER_MOUNT_NS;
  if (outer === undefined || readlinkSync('/proc/self/ns/mnt') === outer)
    return 'not in a mount namespace of its own (main.ts runs this section under unshare -m)';
  return undefined;
}

/** vole's mounts under `root`, deepest first, then the directory. */
async function removeVoleRoot(root: string): Promise<void> {
  const mounts = (await mountsUnder(root)).map((m) => m.mountPoint);
  for (const mountPoint of mounts.sort((a, b) => b.length - a.length))
    spawnSync('umount', [mountPoint], { stdio: 'inherit' });
  rmSync(root, { recursive: true, force: true });
}

/** One size: a fresh control plane, both nodes, both rounds, both restarts. */
async function runSize(bin: string, pods: number, base: string): Promise<SizeResult> {
  const dir = join(base, 'cluster');
  const up = spawnSync(
    'bash',
    [
      join(repoRoot, 'scripts/kube-up.sh'),
      dir,
      '--hollow-nodes',
      hollowNode,
      '--node-kubeconfig',
      voleNode,
    ],
    {
      encoding: 'utf8',
      env: { ...process.env, VOLE_PEERS_BIN: bin, VOLE_KUBEMARK_FLAGS: `--max-pods=${pods + 10}` },
      timeout: 240_000,
    },
  );
  if (up.status !== 0) throw new Error(`kube-up.sh: ${up.stderr}`);
  const http = KubeHttp.fromFile(join(dir, 'kubeconfig'));
  const voleRoot = join(base, 'vole-root');
  const voleKubeconfig = join(dir, `node-${voleNode}.kubeconfig`);
  let vole: { child: ChildProcess } | undefined;
  try {
    const pids = readFileSync(join(dir, 'pids'), 'utf8');
    const hollowPid = Number(new RegExp(`^hollow-${hollowNode} (\\d+)$`, 'm').exec(pids)?.[1]);
    const kubelet: NodeUnderTest = {
      label: 'kubelet',
      node: hollowNode,
      pid: hollowPid,
      root: hollowRootOf(dir)!,
    };
    for (const ns of ['kubelet', 'vole'])
      for (const [path, body] of namespaceObjects(ns)) await http.post(path, body);
    const started = await startVole(voleKubeconfig, voleRoot);
    vole = started;
    await untilOk('vole run to be ready', started.readyz, 120_000);
    const voleNodeT: NodeUnderTest = {
      label: 'vole',
      node: voleNode,
      pid: started.child.pid!,
      root: voleRoot,
    };
    const rounds: RoundResult[] = [];
    for (const node of [kubelet, voleNodeT]) {
      progress(`kubelet: ${node.label}: ${pods} pods`);
      const r = await round(http, node, pods);
      rounds.push(r);
      progress(
        `kubelet: ${node.label}: ready on disk p50 ${quantile(r.readyMs, 0.5).toFixed(0)} ms, p99 ${quantile(r.readyMs, 0.99).toFixed(0)} ms, CPU ${r.cpuMsPerPod.toFixed(1)} ms a pod (${r.commandsCpuMsPerPod.toFixed(1)} of it in the commands it ran)`,
      );
    }
    progress('kubelet: restarts (SIGKILL, start again)');
    const kubeletRestart = await restartKubelet(http, dir, kubelet);
    const voleRestart = await restartVole(http, voleKubeconfig, started, voleNodeT);
    progress(
      `kubelet: reconcile after SIGKILL: kubelet ${kubeletRestart.seconds.toFixed(2)} s, vole ${voleRestart.seconds.toFixed(2)} s`,
    );
    const requests = apiRequests(dir);
    for (const label of ['kubelet', 'vole'] as const)
      progress(`kubelet: ${label}'s API requests: ${JSON.stringify(requests[label])}`);
    return {
      pods,
      requests,
      kubelet: rounds[0]!,
      vole: rounds[1]!,
      restart: { kubelet: kubeletRestart, vole: voleRestart },
    };
  } finally {
    if (vole !== undefined) await stopper(vole.child)();
    if (existsSync(join(dir, 'pids')))
      spawnSync('bash', [join(repoRoot, 'scripts/kube-down.sh'), dir], { stdio: 'inherit' });
    await removeVoleRoot(voleRoot);
  }
}

function figuresOf(results: readonly SizeResult[]): Figure[] {
  const figures: Figure[] = [];
  const add = (name: string, value: number, unit: string, extra: Partial<Figure> = {}) =>
    figures.push({ section: 'kubelet', name, value, unit, runs: [value], ...extra });
  for (const r of results) {
    for (const label of ['kubelet', 'vole'] as const) {
      add(
        `${label}, ${r.pods} pods: bound → volumes on disk p50`,
        quantile(r[label].readyMs, 0.5),
        'ms',
      );
      add(
        `${label}, ${r.pods} pods: bound → volumes on disk p99`,
        quantile(r[label].readyMs, 0.99),
        'ms',
      );
      add(`${label}, ${r.pods} pods: CPU a pod`, r[label].cpuMsPerPod, 'ms');
      add(
        `${label}, ${r.pods} pods: of it, in the commands it ran`,
        r[label].commandsCpuMsPerPod,
        'ms',
      );
      add(`${label}, ${r.pods} pods: reconcile after SIGKILL`, r.restart[label].seconds, 's');
      add(
        `${label}, ${r.pods} pods: CPU to reconcile after SIGKILL`,
        r.restart[label].cpuSeconds,
        's',
      );
      add(`${label}, ${r.pods} pods: API requests over the run`, total(r.requests[label]), '');
    }
    const p99 = quantile(r.vole.readyMs, 0.99) / quantile(r.kubelet.readyMs, 0.99);
    add(`vole / kubelet, ${r.pods} pods: p99`, p99, '×', { target: '≤ 0.5', met: p99 <= 0.5 });
    const cpu = r.vole.cpuMsPerPod / r.kubelet.cpuMsPerPod;
    add(`vole / kubelet, ${r.pods} pods: CPU a pod`, cpu, '×', { target: '≤ 1', met: cpu <= 1 });
    const restart = r.restart.vole.seconds / r.restart.kubelet.seconds;
    add(`vole / kubelet, ${r.pods} pods: reconcile after SIGKILL`, restart, '×', {
      target: '< 1',
      met: restart < 1,
    });
  }
  figures.push({
    section: 'kubelet',
    name: '(what each node process did)',
    value: null,
    unit: '',
    note: whatEachDid,
  });
  return figures;
}

/** Each size in turn, each on its own control plane. */
export async function runKubelet(opts: {
  sizes: readonly number[];
  /** Where each size's control plane and vole root go (default: bench-results/tmp). */
  scratch?: (pods: number) => string;
}): Promise<{
  section: string;
  figures: Figure[];
  details?: Record<string, unknown>;
}> {
  const skipped = (note: string) => ({
    section: 'kubelet',
    figures: [{ section: 'kubelet', name: '(skipped)', value: null, unit: '', note }],
  });
  const why = skipReason();
  if (why !== undefined) return skipped(why);
  let bin: string;
  try {
    bin = peersBin(['etcd', 'kube-apiserver', 'kubectl', 'kubemark']);
  } catch (error) {
    return skipped(`no Kubernetes peers: ${(error as Error).message}`);
  }
  const results: SizeResult[] = [];
  const scratch = opts.scratch ?? ((pods: number) => scratchDir(`kubelet-${pods}`));
  // A size that does not finish (a round past its timeout on a loaded machine) is a row
  // saying why, and the other sizes still run.
  const failed: Figure[] = [];
  for (const pods of opts.sizes)
    try {
      results.push(await runSize(bin, pods, scratch(pods)));
    } catch (error) {
      const note = (error as Error).message;
      progress(`kubelet: ${pods} pods: ${note}`);
      failed.push({ section: 'kubelet', name: `${pods} pods`, value: null, unit: '', note });
    }
  return {
    section: 'kubelet',
    figures: [...figuresOf(results), ...failed],
    details: {
      whatEachDid,
      sizes: opts.sizes,
      apiRequests: Object.fromEntries(results.map((r) => [r.pods, r.requests])),
    },
  };
}
