/**
 * §8 Cluster mode on etcd (a real etcd started here: test/support/etcd-cluster.ts).
 *
 * Log appends: the controller log's group commits (validated rows, each transaction
 * fenced on the leader's term and the expected head) against raw etcd3 transactions
 * putting the same keys and values in the same batches, side by side in one run, on a
 * 3-member etcd. Target: ≥ 50 % of raw.
 *
 * Failover: two controller replicas as processes (cluster-replica.ts, fake instant
 * plugin), lease TTL 2 s; the leader is SIGKILLed and a pod needing an attach is applied
 * at once; the figure is the time from the kill to the new leader's OperationStarted for
 * that attach. Target: TTL + 1 s.
 *
 * Scale: N nodes (each Ready: a heartbeat key) and P pods (each with its PV and bound
 * claim, an attachable disk), written to a 1-member etcd, then loaded through one
 * in-process controller replica: the time until every disk is attached and published, the
 * controller's heap after it, its time per log event; then 1,000 pods move to other nodes
 * (delete + put in one transaction each) and the time until all are detached and attached
 * again. Full: 5,000 nodes, 150,000 pods (Kubernetes' published envelope); quick: a tenth.
 */
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import type { Etcd3 } from 'etcd3';
import { connect } from '../../src/cluster/client.js';
import { ClusterController } from '../../src/cluster/controller.js';
import { EtcdEventLog } from '../../src/cluster/etcd-log.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { Leadership } from '../../src/cluster/leadership.js';
import { RealClock } from '../../src/clock.js';
import { managedAnnotation } from '../../src/controller/fold.js';
import { eventCodec, type NewEvent, type VoleEvent } from '../../src/events/index.js';
import type { Pod } from '../../src/events/k8s.js';
import { encodeEvent } from '../../src/log/codec.js';
import { FakePlugin } from '../../src/plugins/fake.js';
import { caps } from '../../src/plugins/types.js';
import { EtcdCluster, etcdSkipReason } from '../../test/support/etcd-cluster.js';
import { diskPlugin, podEvents } from './generate.js';
import { type Figure, gc, heapUsedAfterGc, median, nowMs, progress, type SectionResult } from './util.js';

const batch = 100;

function benchEvents(count: number): NewEvent[] {
  const events: NewEvent[] = [];
  for (let i = 0; events.length < count; i++) events.push(...podEvents(i, 1_700_000_000_000 + i, 'a').events);
  return events.slice(0, count);
}

/** Events per second through the controller log (group commits of `batch`). */
async function ourAppends(client: Etcd3, prefix: string, events: readonly NewEvent[]): Promise<number> {
  const keys = new ClusterKeys(prefix);
  const leadership = await Leadership.campaign(client, keys, { identity: 'bench', ttlS: 10 });
  const log = new EtcdEventLog({ client, keys, leadership, head: 0, onFatal: () => undefined });
  const started = nowMs();
  for (let i = 0; i < events.length; i++) {
    log.push(events[i]!);
    if ((i + 1) % batch === 0) log.flush();
  }
  await log.durable();
  const rate = events.length / ((nowMs() - started) / 1000);
  await leadership.resign();
  return rate;
}

/** Events per second as raw etcd3 transactions of the same keys and values, same batches. */
async function rawPuts(client: Etcd3, prefix: string, events: readonly NewEvent[]): Promise<number> {
  const keys = new ClusterKeys(prefix);
  const rows = events.map((e, i) => ({ key: keys.logEntry(i + 1), value: JSON.stringify(encodeEvent(eventCodec, e as Omit<VoleEvent, 'seq'>, i + 1)) }));
  const started = nowMs();
  for (let i = 0; i < rows.length; i += batch) {
    const part = rows.slice(i, i + batch);
    await client
      .if(keys.logHead, 'Mod', '>', -1)
      .then(...part.map((r) => client.put(r.key).value(r.value)), client.put(keys.logHead).value(String(i + part.length)))
      .commit();
  }
  return rows.length / ((nowMs() - started) / 1000);
}

async function appendFigures(urls: string, runs: number, count: number): Promise<Figure[]> {
  const client = connect(urls);
  const events = benchEvents(count);
  const ours: number[] = [];
  const raw: number[] = [];
  for (let run = 0; run < runs; run++) {
    raw.push(await rawPuts(client, `/bench-raw-${run}/`, events));
    ours.push(await ourAppends(client, `/bench-log-${run}/`, events));
    progress(`  append run ${run + 1}/${runs}: log ${Math.round(ours[run]!)}/s, raw ${Math.round(raw[run]!)}/s`);
  }
  client.close();
  const ratios = ours.map((o, i) => (100 * o) / raw[i]!);
  const ratio = median(ratios);
  return [
    { section: 'cluster', name: `controller log appends to etcd (${batch}/commit, 3 members)`, value: median(ours), unit: 'events/s', runs: ours },
    { section: 'cluster', name: `raw etcd3 txns of the same puts`, value: median(raw), unit: 'events/s', runs: raw },
    { section: 'cluster', name: 'log appends / raw puts', value: ratio, unit: '%', runs: ratios, target: '≥ 50 %', met: ratio >= 50 },
  ];
}

function storageAndPod(i: number, node: string, prefix: string): { key: string; value: string }[] {
  const keys = new ClusterKeys(prefix);
  const out: { key: string; value: string }[] = [];
  for (const event of podEvents(i, 0, 'p', { scratch: false }).events) {
    if (event.type === 'ObjectUpserted') out.push({ key: keys.objectOf(event.object), value: JSON.stringify(event.object) });
    if (event.type === 'PodUpserted') {
      const pod: Pod = { ...event.pod, spec: { ...event.pod.spec, nodeName: node } };
      out.push({ key: keys.podOf(pod), value: JSON.stringify(pod) });
    }
  }
  return out;
}

async function putAll(client: Etcd3, kvs: readonly { key: string; value: string }[], parallel = 4): Promise<void> {
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

function nodeKvs(prefix: string, nodes: number): { key: string; value: string }[] {
  const keys = new ClusterKeys(prefix);
  const out: { key: string; value: string }[] = [];
  for (let n = 0; n < nodes; n++) {
    const name = `node-${n}`;
    const node = { apiVersion: 'v1', kind: 'Node', metadata: { name, annotations: { [managedAnnotation]: 'true' } } };
    out.push({ key: keys.object('Node', name), value: JSON.stringify(node) }, { key: keys.heartbeat(name), value: '{}' });
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
    return { section: 'cluster', figures: [{ section: 'cluster', name: 'cluster mode on etcd', value: null, unit: '', note: missing }] };
  const etcd = await EtcdCluster.start();
  try {
    progress('  log appends against raw etcd3 puts (3 members)');
    figures.push(...(await appendFigures(etcd.urls, opts.runs, opts.quick ? 2_000 : 10_000)));
    progress('  failover: leader SIGKILLed, until the new leader decides');
    figures.push(await failoverFigure(etcd.urls, Math.min(opts.runs, 3)));
  } finally {
    await etcd.stop();
  }
  const single = await EtcdCluster.start({ members: 1 });
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

function replica(urls: string, prefix: string, identity: string) {
  const here = fileURLToPath(import.meta.url);
  const script = join(dirname(here), here.endsWith('.ts') ? 'cluster-replica.ts' : 'cluster-replica.js');
  const args = [...(here.endsWith('.ts') ? ['--import', 'tsx'] : []), script, urls, prefix, identity, String(leaseTtlS)];
  return spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit'] });
}

async function waitFor<T>(fn: () => Promise<T | undefined>, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = nowMs() + timeoutMs;
  while (nowMs() < deadline) {
    const value = await fn();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`cluster bench: timed out waiting for ${what}`);
}

/** The seq of the first OperationStarted attach of `volumeHandle` in the log, if any. */
async function attachStarted(client: Etcd3, keys: ClusterKeys, volumeHandle: string): Promise<true | undefined> {
  const entries = await client.getAll().prefix(keys.logEntries).strings();
  for (const value of Object.values(entries)) {
    const [, , type, data] = JSON.parse(value) as [number, number, string, string];
    if (type === 'OperationStarted' && data.includes(`"op":"attach"`) && data.includes(volumeHandle)) return true;
  }
  return undefined;
}

async function failoverOnce(client: Etcd3, urls: string, run: number): Promise<number> {
  const prefix = `/failover-${run}/`;
  const keys = new ClusterKeys(prefix);
  await putAll(client, [...nodeKvs(prefix, 1), ...storageAndPod(0, 'node-0', prefix)]);
  const a = replica(urls, prefix, 'a');
  await waitFor(async () => ((await client.get(keys.leader).string()) === 'a' ? true : undefined), 'replica a to lead');
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
  return { section: 'cluster', name: `failover, leader SIGKILL → new leader's first decision (TTL ${leaseTtlS} s)`, value, unit: 'ms', runs: values, target: `≤ ${targetMs} ms`, met: value <= targetMs };
}

export async function scaleFigures(urls: string, nodes: number, pods: number, moves: number): Promise<Figure[]> {
  const prefix = '/scale/';
  const client = connect(urls);
  const kvs = [...nodeKvs(prefix, nodes)];
  for (let i = 0; i < pods; i++) kvs.push(...storageAndPod(i, `node-${i % nodes}`, prefix));
  await putAll(client, kvs);
  progress(`  wrote ${kvs.length} keys`);
  gc();
  const heapBefore = heapUsedAfterGc();
  const controller = new ClusterController({
    client,
    keys: new ClusterKeys(prefix),
    identity: 'scale',
    plugins: [new FakePlugin({ caps: caps(diskPlugin, { attachable: true }), clock: new RealClock(), journal: [] })],
    logger: pino({ level: 'silent' }),
    leaseTtlS: 30,
    snapshotEveryEvents: 10_000_000,
    say: (line) => progress(`  controller: ${line}`),
  });
  const stop = new AbortController();
  const started = nowMs();
  const running = controller.run(stop.signal);
  const attachedAll = (want: number) => async () => {
    const w = controller.world;
    if (w === undefined || w.running.size > 0) return undefined;
    let attached = 0;
    for (const a of w.attachments.values()) if (a.state.value.startsWith('attached')) attached++;
    return attached === want && w.pods.size === want ? true : undefined;
  };
  await waitFor(attachedAll(pods), `${pods} attachments`, 3_600_000);
  const loadMs = nowMs() - started;
  const events = controller.world!.seq;
  gc();
  const heapMiB = (heapUsedAfterGc() - heapBefore) / 2 ** 20;
  progress(`  loaded: ${Math.round(loadMs)} ms, ${events} events, ${Math.round(heapMiB)} MiB`);
  const moveMs = await movePods(client, controller, prefix, nodes, pods, moves);
  stop.abort();
  await running;
  client.close();
  return [
    { section: 'cluster', name: `load ${nodes} nodes / ${pods} pods through the controller`, value: loadMs, unit: 'ms', note: `${events} log events` },
    { section: 'cluster', name: 'controller heap after the load', value: heapMiB, unit: 'MiB' },
    { section: 'cluster', name: 'controller time per log event during the load (incl. etcd)', value: (loadMs * 1000) / events, unit: 'µs' },
    { section: 'cluster', name: `converge after ${moves} pods move to other nodes`, value: moveMs, unit: 'ms' },
  ];
}

async function movePods(client: Etcd3, controller: ClusterController, prefix: string, nodes: number, pods: number, moves: number): Promise<number> {
  const keys = new ClusterKeys(prefix);
  const stride = Math.max(1, Math.floor(pods / moves));
  const moved: number[] = [];
  for (let k = 0; k < moves; k++) moved.push(k * stride);
  const started = nowMs();
  for (const i of moved) {
    const old = `node-${i % nodes}`;
    const next = `node-${(i + 1) % nodes}`;
    const [pod] = storageAndPod(i, next, prefix).filter((kv) => kv.key.startsWith(keys.pods));
    await client.if(pod!.key, 'Mod', '>', -1).then(client.delete().key(keys.pod(old, 'default', `pod-p-${i}`)), client.put(pod!.key).value(pod!.value)).commit();
  }
  await waitFor(async () => {
    const w = controller.world!;
    if (w.running.size > 0) return undefined;
    for (const i of moved) {
      const next = `node-${(i + 1) % nodes}`;
      const a = [...(w.nodesByVolume.get(`${diskPlugin}/disk-p-${i}` as never) ?? [])];
      if (a.length !== 1 || a[0] !== next) return undefined;
      if (w.attachments.get(`${diskPlugin}/disk-p-${i}@${next}`)?.state.value.startsWith('attached') !== true) return undefined;
    }
    return true;
  }, `${moves} moved pods attached again`, process.env.BENCH_DEBUG ? 8_000 : 600_000).catch((error: Error) => {
    const w = controller.world!;
    const i = moved[0]!;
    const v = `${diskPlugin}/disk-p-${i}`;
    progress(`  ${v}: nodes ${[...(w.nodesByVolume.get(v as never) ?? [])].join(',')} attachments ${[...w.attachments.values()].filter((a) => a.volume === v).map((a) => `${a.node}:${a.state.value}`).join(' ')} running ${w.running.size} desired ${[...w.dsw.keys()].filter((k) => k.startsWith(v)).join(' ')}`);
    throw error;
  });
  return nowMs() - started;
}
