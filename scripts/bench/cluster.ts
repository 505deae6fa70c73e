/**
 * Cluster mode on etcd (a real etcd started here: test/support/etcd-cluster.ts).
 *
 * Log appends: the controller log's group commits (rows encoded and validated as pushed,
 * a thousand a tick, each transaction of up to 1 MiB fenced on the leader's term and the
 * expected head) against bare etcd3 transactions putting the same segments and head,
 * encoded beforehand, side by side in one run, on a 3-member etcd. Target: ≥ 50 % of raw.
 *
 * Failover: two controller replicas as processes (cluster-replica.ts, fake instant
 * plugin), lease TTL 2 s; the leader is SIGKILLed and a pod needing an attach is applied
 * at once; the figure is the time from the kill to the new leader's OperationStarted for
 * that attach. Target: TTL + 1 s.
 *
 * Scale: N nodes (each Ready: a heartbeat key) and P pods (each with its PV and bound
 * claim, an attachable disk), written to a 1-member etcd, then loaded through one
 * in-process controller replica: the time until every disk is attached, the controller's
 * heap after it, its time per log event and the planner's (the core's plan, timed);
 * then 1,000 pods move to other nodes (delete + put, 50 pods a transaction) and the time
 * from the first write until all are detached and attached again. Full: 5,000 nodes,
 * 150,000 pods (Kubernetes' published envelope); quick: a tenth.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeHeapSnapshot } from 'node:v8';
import pino from 'pino';
import type { Etcd3 } from 'etcd3';
import { connect } from '../../src/cluster/client.js';
import { ClusterController } from '../../src/cluster/controller.js';
import { EtcdEventLog, planTxn, readLogEvents, type TxnPlan } from '../../src/cluster/etcd-log.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { Leadership } from '../../src/cluster/leadership.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import { RealClock } from '../../src/clock.js';
import { managedAnnotation } from '../../src/controller/fold.js';
import { valuesOf } from '../../src/desired/one-or-many.js';
import type { ControllerWorld } from '../../src/controller/types.js';
import { controllerCore } from '../../src/engine/cores.js';
import { eventCodec, type NewEvent, type VoleEvent } from '../../src/events/index.js';
import type { Pod } from '../../src/events/k8s.js';
import { encodeEvent } from '../../src/log/codec.js';
import { controllerHeapBytesPerPodMax } from '../../src/controller/memory.js';
import { type FakeCallRecord, FakePlugin } from '../../src/plugins/fake.js';
import { caps } from '../../src/plugins/types.js';
import { EtcdCluster, etcdSkipReason } from '../../test/support/etcd-cluster.js';
import { diskPlugin, podEvents } from './generate.js';
import {
  type Figure,
  gc,
  heapUsedAfterGc,
  median,
  nowMs,
  progress,
  type SectionResult,
} from './util.js';

const batch = 100;

function benchEvents(count: number): NewEvent[] {
  const events: NewEvent[] = [];
  for (let i = 0; events.length < count; i++)
    events.push(...podEvents(i, 1_700_000_000_000 + i, 'a').events);
  return events.slice(0, count);
}

/** Events pushed per engine tick in the append figure (the engine flushes after each tick). */
const eventsPerTick = 1_000;

/**
 * Events per second through the controller log, pushed (encoded and validated) and flushed
 * `eventsPerTick` at a time with a turn of the event loop between, as the engine's ticks
 * do: what is flushed while a transaction is in flight goes in the next (up to 1 MiB).
 */
async function ourAppends(
  client: Etcd3,
  prefix: string,
  events: readonly NewEvent[],
): Promise<{ rate: number; txns: number }> {
  const keys = new ClusterKeys(prefix);
  const store = new EtcdStore(client);
  const clock = new RealClock();
  const leadership = await Leadership.campaign(store, keys, { identity: 'bench', ttlS: 10, clock });
  const log = new EtcdEventLog({
    store,
    clock,
    keys,
    leadership,
    head: 0,
    onFatal: () => undefined,
  });
  const started = nowMs();
  for (let i = 0; i < events.length; i++) {
    log.push(events[i]!);
    if ((i + 1) % eventsPerTick !== 0) continue;
    log.flush();
    await new Promise((resolve) => setImmediate(resolve));
  }
  await log.durable();
  const rate = events.length / ((nowMs() - started) / 1000);
  await leadership.resign();
  return { rate, txns: log.stats.txns };
}

/** Events per second as bare etcd3 transactions putting the same segments and head, encoded beforehand. */
async function rawPuts(
  client: Etcd3,
  prefix: string,
  events: readonly NewEvent[],
): Promise<number> {
  const keys = new ClusterKeys(prefix);
  const rows = events.map((e, i) => {
    const value = JSON.stringify(encodeEvent(eventCodec, e as Omit<VoleEvent, 'seq'>, i + 1));
    return { seq: i + 1, value, bytes: Buffer.byteLength(value) };
  });
  const txns: { segments: { key: string; value: string }[]; head: string }[] = [];
  for (let i = 0; i < rows.length;) {
    const txn = planTxn(rows, i);
    i += txn.rows;
    const key = (s: TxnPlan['segments'][number]) =>
      s.part === undefined
        ? keys.log.segment(s.firstSeq)
        : keys.log.segmentPart(s.firstSeq, s.part.part, s.part.parts);
    txns.push({
      segments: txn.segments.map((s) => ({ key: key(s), value: s.value })),
      head: String(i),
    });
  }
  const started = nowMs();
  for (const txn of txns) {
    await client
      .if(keys.log.head, 'Mod', '>', -1)
      .then(
        ...txn.segments.map((s) => client.put(s.key).value(s.value)),
        client.put(keys.log.head).value(txn.head),
      )
      .commit();
  }
  return rows.length / ((nowMs() - started) / 1000);
}

async function appendFigures(urls: string, runs: number, count: number): Promise<Figure[]> {
  const client = connect(urls);
  const events = benchEvents(count);
  const ours: number[] = [];
  const raw: number[] = [];
  let txns = 0;
  for (let run = 0; run < runs; run++) {
    // Alternating which goes first: the second of a pair meets a larger etcd.
    const rawFirst = run % 2 === 0;
    if (rawFirst) raw.push(await rawPuts(client, `/bench-raw-${run}/`, events));
    const our = await ourAppends(client, `/bench-log-${run}/`, events);
    if (!rawFirst) raw.push(await rawPuts(client, `/bench-raw-${run}/`, events));
    ours.push(our.rate);
    txns = our.txns;
    progress(
      `  append run ${run + 1}/${runs}: log ${Math.round(ours[run]!)}/s, raw ${Math.round(raw[run]!)}/s (${txns} transactions)`,
    );
  }
  client.close();
  const ratios = ours.map((o, i) => (100 * o) / raw[i]!);
  const ratio = median(ratios);
  const note = `${count} events flushed ${eventsPerTick} at a time, in ${txns} transactions of up to 1 MiB`;
  return [
    {
      section: 'cluster',
      name: 'controller log appends to etcd (1 MiB/commit in 32 KiB segments, 3 members)',
      value: median(ours),
      unit: 'events/s',
      runs: ours,
      note,
    },
    {
      section: 'cluster',
      name: `raw etcd3 txns of the same puts`,
      value: median(raw),
      unit: 'events/s',
      runs: raw,
    },
    {
      section: 'cluster',
      name: 'log appends / raw puts',
      value: ratio,
      unit: '%',
      runs: ratios,
      target: '≥ 50 %',
      met: ratio >= 50,
    },
  ];
}

export function storageAndPod(
  i: number,
  node: string,
  prefix: string,
): { key: string; value: string }[] {
  const keys = new ClusterKeys(prefix);
  const out: { key: string; value: string }[] = [];
  for (const event of podEvents(i, 0, 'p', { scratch: false }).events) {
    if (event.type === 'ObjectUpserted')
      out.push({ key: keys.objectOf(event.object), value: JSON.stringify(event.object) });
    if (event.type === 'PodUpserted') {
      const pod: Pod = { ...event.pod, spec: { ...event.pod.spec, nodeName: node } };
      out.push({ key: keys.podOf(pod), value: JSON.stringify(pod) });
    }
  }
  return out;
}

export async function putAll(
  client: Etcd3,
  kvs: readonly { key: string; value: string }[],
  parallel = 4,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < kvs.length) {
      const part = kvs.slice(next, next + batch);
      next += batch;
      await client
        .if(part[0]!.key, 'Mod', '>', -1)
        .then(...part.map((kv) => client.put(kv.key).value(kv.value)))
        .commit();
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
}

export function nodeKvs(prefix: string, nodes: number): { key: string; value: string }[] {
  const keys = new ClusterKeys(prefix);
  const out: { key: string; value: string }[] = [];
  for (let n = 0; n < nodes; n++) {
    const name = `node-${n}`;
    const node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name, annotations: { [managedAnnotation]: 'true' } },
    };
    out.push(
      { key: keys.object('Node', name), value: JSON.stringify(node) },
      { key: keys.heartbeat(name), value: '{}' },
    );
  }
  return out;
}

export interface ClusterBenchOptions {
  readonly runs: number;
  readonly quick: boolean;
}

export async function runCluster(opts: ClusterBenchOptions): Promise<SectionResult> {
  const figures: Figure[] = [];
  const missing = etcdSkipReason();
  if (missing !== false)
    return {
      section: 'cluster',
      figures: [
        { section: 'cluster', name: 'cluster mode on etcd', value: null, unit: '', note: missing },
      ],
    };
  const etcd = await EtcdCluster.start();
  try {
    progress('  log appends against raw etcd3 puts (3 members)');
    figures.push(...(await appendFigures(etcd.urls, opts.runs, opts.quick ? 20_000 : 100_000)));
    progress('  failover: leader SIGKILLed, until the new leader decides');
    figures.push(await failoverFigure(etcd.urls, Math.min(opts.runs, 3)));
  } finally {
    await etcd.stop();
  }
  // Nothing compacts etcd's history during the run (a cluster runs etcd with
  // --auto-compaction-retention): the log, its deleted segments and the snapshots stay in
  // the backend, which the default 2 GiB quota may not hold at the full size.
  const single = await EtcdCluster.start({ members: 1, quotaBackendBytes: 8 * 2 ** 30 });
  try {
    const [nodes, pods] = opts.quick ? [500, 15_000] : [5_000, 150_000];
    progress(`  scale: ${nodes} nodes, ${pods} pods loaded through the controller (1 member)`);
    figures.push(...(await scaleFigures(single.urls, nodes, pods, opts.quick ? 100 : 1_000)));
  } finally {
    await single.stop();
  }
  return { section: 'cluster', figures };
}

const leaseTtlS = 2;

export function replica(urls: string, prefix: string, identity: string, ttlS = leaseTtlS) {
  const here = fileURLToPath(import.meta.url);
  const script = join(
    dirname(here),
    here.endsWith('.ts') ? 'cluster-replica.ts' : 'cluster-replica.js',
  );
  const args = [
    ...(here.endsWith('.ts') ? ['--import', 'tsx'] : []),
    script,
    urls,
    prefix,
    identity,
    String(ttlS),
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  child.stdout.resume(); // its progress lines: read (saidLine), else dropped
  return child;
}

/** The first line a replica says on stdout (from now on) that matches `pattern`. */
export function saidLine(
  child: ChildProcess,
  pattern: RegExp,
  timeoutMs = 600_000,
): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const timer = setTimeout(
      () => done(new Error(`no line ${pattern} in ${timeoutMs} ms`)),
      timeoutMs,
    );
    const onData = (chunk: Buffer) => {
      text += chunk.toString();
      const lines = text.split('\n');
      text = lines.pop()!;
      const line = lines.find((l) => pattern.test(l));
      if (line !== undefined) done(undefined, line);
    };
    const onExit = () => done(new Error(`the replica exited before saying ${pattern}`));
    const done = (error: Error | undefined, line?: string) => {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.off('exit', onExit);
      if (error === undefined) resolve(line!);
      else reject(error);
    };
    child.stdout?.on('data', onData);
    child.once('exit', onExit);
  });
}

export async function waitFor<T>(
  fn: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = nowMs() + timeoutMs;
  while (nowMs() < deadline) {
    const value = await fn();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`cluster bench: timed out waiting for ${what}`);
}

/** Whether the log holds an OperationStarted attach of `volumeHandle`. */
async function attachStarted(
  client: Etcd3,
  keys: ClusterKeys,
  volumeHandle: string,
): Promise<true | undefined> {
  let found = false;
  await readLogEvents(new EtcdStore(client), keys, 1, (event) => {
    if (
      event.type === 'OperationStarted' &&
      event.op === 'attach' &&
      event.volume.endsWith(`/${volumeHandle}`)
    )
      found = true;
  });
  return found ? true : undefined;
}

async function failoverOnce(client: Etcd3, urls: string, run: number): Promise<number> {
  const prefix = `/failover-${run}/`;
  const keys = new ClusterKeys(prefix);
  await putAll(client, [...nodeKvs(prefix, 1), ...storageAndPod(0, 'node-0', prefix)]);
  const a = replica(urls, prefix, 'a');
  await waitFor(
    async () => ((await client.get(keys.leader).string()) === 'a' ? true : undefined),
    'replica a to lead',
  );
  const b = replica(urls, prefix, 'b');
  await waitFor(() => attachStarted(client, keys, 'disk-p-0'), 'the first attach');
  await new Promise((r) => setTimeout(r, 1500)); // b campaigns, waiting
  const killedAt = nowMs();
  process.kill(a.pid!, 'SIGKILL');
  await putAll(client, storageAndPod(1, 'node-0', prefix));
  await waitFor(() => attachStarted(client, keys, 'disk-p-1'), 'the new leader to attach', 20_000);
  const tookMs = nowMs() - killedAt;
  process.kill(b.pid!, 'SIGKILL');
  return tookMs;
}

async function failoverFigure(urls: string, runs: number): Promise<Figure> {
  const client = connect(urls);
  const values: number[] = [];
  for (let run = 0; run < runs; run++) {
    values.push(await failoverOnce(client, urls, run));
    progress(`  failover run ${run + 1}/${runs}: ${Math.round(values[run]!)} ms`);
  }
  client.close();
  const value = median(values);
  const targetMs = leaseTtlS * 1000 + 1000;
  return {
    section: 'cluster',
    name: `failover, leader SIGKILL → new leader's first decision (TTL ${leaseTtlS} s)`,
    value,
    unit: 'ms',
    runs: values,
    target: `≤ ${targetMs} ms`,
    met: value <= targetMs,
  };
}

/** The controller core's plan, timed: total milliseconds and calls since installed. */
function timePlans(): { stats: { ms: number; calls: number }; restore: () => void } {
  const core = controllerCore as { plan: typeof controllerCore.plan };
  const plan = core.plan;
  const stats = { ms: 0, calls: 0 };
  core.plan = (world, atMs, opts) => {
    const started = nowMs();
    const result = plan(world, atMs, opts);
    stats.ms += nowMs() - started;
    stats.calls++;
    return result;
  };
  return { stats, restore: () => void (core.plan = plan) };
}

/** A journal that keeps nothing: the fake plugin's call records are no part of the controller's heap. */
export function noJournal(): FakeCallRecord[] {
  const journal: FakeCallRecord[] = [];
  journal.push = () => 0;
  return journal;
}

function newController(client: Etcd3, prefix: string): ClusterController {
  return new ClusterController({
    client: new EtcdStore(client),
    keys: new ClusterKeys(prefix),
    identity: 'scale',
    plugins: [
      new FakePlugin({
        caps: caps(diskPlugin, { attachable: true }),
        clock: new RealClock(),
        journal: noJournal(),
      }),
    ],
    logger: pino({ level: 'silent' }),
    leaseTtlS: 30,
    say: (line) => progress(`  controller: ${line}`),
  });
}

/** Every pod's disk attached, nothing running: counted once nothing runs (O(world), so checked at most every 200 ms). */
export function attachedAll(
  controller: ClusterController,
  want: number,
): () => Promise<true | undefined> {
  let lastMs = 0;
  return async () => {
    const w = controller.world;
    if (w === undefined || w.running.size > 0 || w.pods.size < want || nowMs() - lastMs < 200)
      return undefined;
    lastMs = nowMs();
    let attached = 0;
    for (const a of w.pairs.values()) if (a.value.startsWith('attached')) attached++;
    return attached === want && w.pods.size === want ? true : undefined;
  };
}

export async function scaleFigures(
  urls: string,
  nodes: number,
  pods: number,
  moves: number,
): Promise<Figure[]> {
  const prefix = '/scale/';
  const client = connect(urls);
  const kvs = [...nodeKvs(prefix, nodes)];
  for (let i = 0; i < pods; i++) kvs.push(...storageAndPod(i, `node-${i % nodes}`, prefix));
  await putAll(client, kvs);
  progress(`  wrote ${kvs.length} keys`);
  kvs.length = 0;
  gc();
  const heapBefore = heapUsedAfterGc();
  const plans = timePlans();
  const controller = newController(client, prefix);
  const stop = new AbortController();
  const started = nowMs();
  const running = controller.run(stop.signal);
  const ticker = setInterval(() => {
    const log = controller.logStats;
    const seq = controller.world?.seq ?? 0;
    progress(
      `  ${Math.round((nowMs() - started) / 1000)} s: seq ${seq}, ${Math.round((seq * 1000) / (nowMs() - started))} events/s, ${log?.txns ?? 0} commits, ${controller.world?.pairs.size ?? 0} pairs`,
    );
  }, 15_000);
  await waitFor(attachedAll(controller, pods), `${pods} attachments`, 3_600_000).finally(() =>
    clearInterval(ticker),
  );
  const loadMs = nowMs() - started;
  const events = controller.world!.seq;
  const { ms: planMs, calls: planCalls } = plans.stats;
  const log = { ...controller.logStats! }; // as the load left it
  gc();
  const heapMiB = (heapUsedAfterGc() - heapBefore) / 2 ** 20;
  const snapshot = await client.get(new ClusterKeys(prefix).log.snapshot).string();
  const snapshotNote =
    snapshot === null
      ? 'no snapshot'
      : `latest snapshot at seq ${(JSON.parse(snapshot) as { seq: number }).seq}, ${(JSON.parse(snapshot) as { chunks: number }).chunks} MiB`;
  progress(
    `  loaded: ${Math.round(loadMs)} ms, ${events} events in ${log.txns} commits (${log.segments} segments), ${Math.round(heapMiB)} MiB, plan ${Math.round(planMs)} ms in ${planCalls} plans, ${snapshotNote}`,
  );
  const move = await movePods(client, controller, prefix, nodes, pods, moves);
  progress(
    `  moved ${moves}: written in ${Math.round(move.writtenMs)} ms, converged after ${Math.round(move.convergedMs)} ms (${move.events} events)`,
  );
  plans.restore();
  stop.abort();
  await running;
  // Once the replica has stopped: no snapshot or commit of its own in flight.
  if (process.env.BENCH_HEAP_PARTS === '1') heapParts(controller.world!, pods, heapBefore);
  client.close();
  return [
    {
      section: 'cluster',
      name: `load ${nodes} nodes / ${pods} pods through the controller`,
      value: loadMs,
      unit: 'ms',
      note: `${events} log events in ${log.txns} commits; ${snapshotNote}`,
    },
    { section: 'cluster', name: 'controller heap after the load', value: heapMiB, unit: 'MiB' },
    {
      section: 'cluster',
      name: 'controller heap a pod after the load',
      value: (heapMiB * 2 ** 20) / pods,
      unit: 'B',
      target: `< ${controllerHeapBytesPerPodMax} B`,
      met: (heapMiB * 2 ** 20) / pods < controllerHeapBytesPerPodMax,
    },
    {
      section: 'cluster',
      name: 'controller time per log event during the load (incl. etcd)',
      value: (loadMs * 1000) / events,
      unit: 'µs',
    },
    {
      section: 'cluster',
      name: 'plan time per log event during the load',
      value: (planMs * 1000) / events,
      unit: 'µs',
      note: `${Math.round(planMs)} ms in ${planCalls} plans`,
    },
    {
      section: 'cluster',
      name: `converge after ${moves} pods move to other nodes`,
      value: move.convergedMs,
      unit: 'ms',
      note: `moves written in ${Math.round(move.writtenMs)} ms; ${move.events} events`,
    },
  ];
}

/**
 * Where the controller's heap goes, a pod (BENCH_HEAP_PARTS=1, at the end of the scale
 * rows): each map of its world emptied in turn, a full collection after each. A value two
 * maps share is counted with the last of them to go. BENCH_HEAP_SNAPSHOT=file writes a heap
 * snapshot before the first map goes.
 */
function heapParts(world: ControllerWorld, pods: number, heapBefore: number): void {
  const parts = ['pods', 'objects', 'podsByObject', 'pairs', 'nodesByVolume'];
  parts.push('volumesByNode', 'reported', 'nodes', 'causes');
  const maps = world as unknown as Record<string, Map<unknown, unknown>>;
  let last = heapUsedAfterGc();
  const perPod = (bytes: number) => Math.round(bytes / pods).toLocaleString('en-US');
  progress(`  heap a pod: ${perPod(last - heapBefore)} B`);
  // BENCH_HEAP_SNAPSHOT=file: the whole heap as it is here, for DevTools or a script to read.
  const snapshotFile = process.env.BENCH_HEAP_SNAPSHOT;
  if (snapshotFile !== undefined && snapshotFile !== '') writeHeapSnapshot(snapshotFile);
  for (const part of parts) {
    maps[part] = new Map();
    const now = heapUsedAfterGc();
    progress(`    ${part}: ${perPod(last - now)} B`);
    last = now;
  }
  progress(`    the rest of the process: ${perPod(last - heapBefore)} B`);
}

/** Moves `moves` pods to the next node (delete + put, 50 pods a transaction) and waits until each is attached there alone. */
async function movePods(
  client: Etcd3,
  controller: ClusterController,
  prefix: string,
  nodes: number,
  pods: number,
  moves: number,
): Promise<{ writtenMs: number; convergedMs: number; events: number }> {
  const keys = new ClusterKeys(prefix);
  const stride = Math.max(1, Math.floor(pods / moves));
  const moved: number[] = [];
  for (let k = 0; k < moves; k++) moved.push(k * stride);
  const seqBefore = controller.world!.seq;
  const started = nowMs();
  for (let k = 0; k < moved.length; k += 50) {
    const ops = moved.slice(k, k + 50).flatMap((i) => {
      const [pod] = storageAndPod(i, `node-${(i + 1) % nodes}`, prefix).filter((kv) =>
        kv.key.startsWith(keys.pods),
      );
      return [
        client.delete().key(keys.pod(`node-${i % nodes}`, 'default', `pod-p-${i}`)),
        client.put(pod!.key).value(pod!.value),
      ];
    });
    await client
      .if(keys.pods, 'Mod', '>', -1)
      .then(...ops)
      .commit();
  }
  const writtenMs = nowMs() - started;
  const convergedAll = (): true | undefined => {
    const w = controller.world!;
    if (w.running.size > 0) return undefined;
    for (const i of moved) {
      const next = `node-${(i + 1) % nodes}`;
      const a = [...valuesOf(w.nodesByVolume.get(`${diskPlugin}/disk-p-${i}` as never))];
      if (a.length !== 1 || a[0] !== next) return undefined;
      const pair = w.pairs.get(`${diskPlugin}/disk-p-${i}@${next}`);
      if (pair?.value.startsWith('attached') !== true) return undefined;
    }
    return true;
  };
  await waitFor(async () => convergedAll(), `${moves} moved pods attached again`, 600_000);
  return { writtenMs, convergedMs: nowMs() - started, events: controller.world!.seq - seqBefore };
}
