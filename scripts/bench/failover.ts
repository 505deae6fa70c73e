/**
 * Failover at size: a controller leading with the default lease (5 s) snapshots its
 * whole world, then is SIGKILLed (its lease left to expire) while a standby process
 * waits; a pod needing an attach is applied at once.
 *
 * For 1,000, 50,000 and 150,000 pods (30 a node, each with its PV, bound claim and
 * attachable disk; `BENCH_FAILOVER_PODS=1000,50000` runs fewer), on a 1-member etcd:
 * - the snapshot's size; its encode in slices in the leading process (total time, the
 *   longest slice, the event loop's longest delay meanwhile: what keepalives wait) and
 *   whether the lease was kept through it and the write to etcd;
 * - the standby's warm-up: from its start to its world loaded and following the log (its
 *   `standby: warm at seq N` line; a is killed only then);
 * - the takeover: from the cut to the new leader's OperationStarted for the new pod, of
 *   which the wait for the lease to expire (until the standby holds the leader key);
 * - after the takeover, in this process: reading the latest snapshot from etcd and
 *   decoding it (what a new leader does first), and encoding the same world in one call
 *   (format 4, and format 3: one structured-clone value, as before slices), the time the
 *   event loop would be blocked.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serialize } from 'node:v8';
import type { Etcd3 } from 'etcd3';
import { connect } from '../../src/cluster/client.js';
import { leaseTtlSDefault } from '../../src/cluster/controller.js';
import { loadLogHead, readLogEvents } from '../../src/cluster/etcd-log.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import { controllerCore } from '../../src/engine/cores.js';
import { EtcdCluster, etcdSkipReason } from '../../test/support/etcd-cluster.js';
import { nodeKvs, putAll, replica, saidLine, storageAndPod, waitFor } from './cluster.js';
import { type Figure, gc, nowMs, progress, type SectionResult } from './util.js';

export interface FailoverBenchOptions {
  readonly sizes: readonly number[];
}

const podsPerNode = 30;
/** The first load's lease (the scale rows' too): a busy machine stalls a load longer than a snapshot. */
const loadTtlS = Number(process.env.BENCH_FAILOVER_LOAD_TTL ?? 30);
const prefix = '/failover/';

/** What the leading process reports once it has snapshotted and kept leading one more TTL. */
interface LeaderReport {
  /** The first load (every disk attached) on the loader's longer lease. */
  loaderMs?: number;
  /** a's takeover from the loader on the default lease, until every disk is attached in its world. */
  loadMs: number;
  /** The event loop's longest delay during the load (a lease lost then ends the run). */
  loadLoopDelayMaxMs: number;
  events: number;
  snapshotBytes: number;
  slicedMs: number;
  slices: number;
  maxSliceMs: number;
  loopDelayMaxMs: number;
  writeMs: number;
  leaseKept: boolean;
  /** a still led when it was killed (its lease kept through the heap's collections). */
  leadingAtCut: boolean;
  /** The leader's seq when it reported: the new leader's events come after it. */
  seq: number;
}

interface Row extends LeaderReport {
  pods: number;
  /** b's start → its warm line, and that line. */
  warmMs: number;
  warmLine: string;
  /** What b said as it won: warm (and how many events it read then) or cold. */
  takeoverLine: string;
  takeoverMs: number;
  leaseExpiryMs: number;
  readMs: number;
  decodeMs: number;
  oneCallMs: number;
  format3Ms: number;
}

export async function runFailover(opts: FailoverBenchOptions): Promise<SectionResult> {
  const missing = etcdSkipReason();
  if (missing !== false)
    return {
      section: 'failover',
      figures: [{ section: 'failover', name: 'failover', value: null, unit: '', note: missing }],
    };
  const rows: Row[] = [];
  for (const pods of opts.sizes) {
    const etcd = await EtcdCluster.start({ members: 1, quotaBackendBytes: 8 * 2 ** 30 });
    try {
      progress(`  failover at ${pods} pods`);
      rows.push(await failoverAt(etcd.urls, pods));
      progress(`  ${JSON.stringify(rows.at(-1))}`);
    } finally {
      await etcd.stop();
    }
    gc();
  }
  return { section: 'failover', figures: rows.flatMap(figures), details: { rows } };
}

function figures(row: Row): Figure[] {
  const at = `${row.pods.toLocaleString('en-US')} pods`;
  const mib = (row.snapshotBytes / 2 ** 20).toFixed(1);
  const figure = (name: string, value: number, unit: string, note?: string): Figure => ({
    section: 'failover',
    name: `${at}: ${name}`,
    value,
    unit,
    ...(note === undefined ? {} : { note }),
  });
  const takeoverTargetMs = leaseTtlSDefault * 1000 + 1000 + row.readMs + row.decodeMs;
  return [
    figure('snapshot size', row.snapshotBytes / 2 ** 20, 'MiB', `${row.events} log events`),
    figure(
      'encode in one call (the event loop blocked)',
      row.oneCallMs,
      'ms',
      `format 3: ${Math.round(row.format3Ms)} ms`,
    ),
    figure(
      'encode in slices (leading, lease 5 s)',
      row.slicedMs,
      'ms',
      `${row.slices} slices, longest ${Math.round(row.maxSliceMs)} ms; event loop delay max ${Math.round(row.loopDelayMaxMs)} ms; written to etcd in ${Math.round(row.writeMs)} ms`,
    ),
    {
      ...figure('lease kept through the snapshot', row.leaseKept ? 1 : 0, ''),
      target: 'kept',
      met: row.leaseKept,
      note: row.leaseKept ? 'kept' : 'lost',
    },
    figure('standby warm: b started → world loaded and following', row.warmMs, 'ms', row.warmLine),
    figure(
      'read the latest snapshot (etcd read + decode in slices)',
      row.readMs + row.decodeMs,
      'ms',
      `read ${Math.round(row.readMs)} ms, decode ${Math.round(row.decodeMs)} ms`,
    ),
    {
      ...figure(
        'takeover: cut → new leader decides',
        row.takeoverMs,
        'ms',
        `lease expiry ${Math.round(row.leaseExpiryMs)} ms, then tail + list ${Math.round(row.takeoverMs - row.leaseExpiryMs)} ms (${row.takeoverLine})${row.leadingAtCut ? '' : '; a no longer led when killed'}`,
      ),
      target: `≤ TTL + 1 s + read = ${Math.round(takeoverTargetMs)} ms`,
      met: row.takeoverMs <= takeoverTargetMs,
    },
  ];
}

/** The leading replica as a process (failover-leader.ts); resolves with its JSON line. */
function leader(
  urls: string,
  pods: number,
): { child: ChildProcess; report: Promise<LeaderReport> } {
  const here = fileURLToPath(import.meta.url);
  const ts = here.endsWith('.ts');
  const script = join(dirname(here), ts ? 'failover-leader.ts' : 'failover-leader.js');
  const args = [
    ...(ts ? ['--import', 'tsx'] : []),
    '--expose-gc',
    script,
    urls,
    prefix,
    String(pods),
    String(loadTtlS),
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const report = new Promise<LeaderReport>((resolve, reject) => {
    let text = '';
    child.stdout.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes('\n')) resolve(JSON.parse(text) as LeaderReport);
    });
    child.once('exit', (code) => reject(new Error(`failover bench: leader exited (${code})`)));
  });
  return { child, report };
}

/** Loads `pods` pods through replica a, snapshots, SIGKILLs a and times b's takeover. */
async function failoverAt(urls: string, pods: number): Promise<Row> {
  const nodes = Math.max(1, Math.round(pods / podsPerNode));
  const client = connect(urls);
  const keys = new ClusterKeys(prefix);
  const kvs = nodeKvs(prefix, nodes);
  for (let i = 0; i < pods; i++) kvs.push(...storageAndPod(i, `node-${i % nodes}`, prefix));
  await putAll(client, kvs);
  kvs.length = 0;
  const a = leader(urls, pods);
  let b: ChildProcess | undefined;
  try {
    const report = await a.report;
    if (!('events' in report))
      throw new Error(
        `failover bench: the leader lost its lease during the load: ${JSON.stringify(report)}`,
      );
    const bStartedMs = nowMs();
    b = replica(urls, prefix, 'b', leaseTtlSDefault);
    // b campaigns, waiting, and loads the world meanwhile: a is cut once b is warm.
    const warmLine = await saidLine(b, /^standby: warm at seq/);
    const warmMs = nowMs() - bStartedMs;
    progress(`  b: ${warmLine} (${Math.round(warmMs)} ms after its start)`);
    const tookOver = saidLine(b, /^standby: (took over warm|.*loading cold)/);
    const killedAt = nowMs();
    a.child.kill('SIGKILL');
    await putAll(client, storageAndPod(pods, 'node-0', prefix));
    await waitFor(
      async () => ((await client.get(keys.leader).string()) === 'b' ? true : undefined),
      'b to lead',
      600_000,
    );
    const leaseExpiryMs = nowMs() - killedAt;
    const fromSeq = report.seq + 1;
    await waitFor(
      () => attachOf(client, keys, fromSeq, `disk-p-${pods}`),
      'b to attach',
      1_800_000,
    );
    const takeoverMs = nowMs() - killedAt;
    const takeoverLine = await tookOver;
    const profileDir = process.env.BENCH_FAILOVER_PROFILE;
    if (profileDir !== undefined) {
      b.kill('SIGUSR2');
      const file = join(profileDir, 'replica-b.cpuprofile');
      await waitFor(async () => (existsSync(file) ? true : undefined), 'b profile', 120_000);
      await new Promise((r) => setTimeout(r, 2_000)); // written in full
    }
    b.kill('SIGKILL');
    const timings = await readAndEncode(client, keys);
    return {
      pods,
      ...report,
      warmMs,
      warmLine,
      takeoverLine,
      takeoverMs,
      leaseExpiryMs,
      ...timings,
    };
  } finally {
    a.child.kill('SIGKILL');
    b?.kill('SIGKILL');
    client.close();
  }
}

/** Whether the log from `fromSeq` holds an OperationStarted attach of `volumeHandle`. */
async function attachOf(
  client: Etcd3,
  keys: ClusterKeys,
  fromSeq: number,
  volumeHandle: string,
): Promise<true | undefined> {
  let found = false;
  await readLogEvents(new EtcdStore(client), keys, fromSeq, (event) => {
    if (event.type === 'OperationStarted' && event.op === 'attach')
      found ||= event.volume.endsWith(`/${volumeHandle}`);
  });
  return found ? true : undefined;
}

/** The latest snapshot read and decoded as a new leader does, then that world encoded in one call. */
async function readAndEncode(client: Etcd3, keys: ClusterKeys) {
  gc();
  const codec = controllerCore.snapshot;
  let t = nowMs();
  const loaded = await loadLogHead(new EtcdStore(client), keys);
  const readMs = nowMs() - t;
  if (loaded.snapshot === undefined) throw new Error('failover bench: no snapshot in etcd');
  t = nowMs();
  const world = await codec.decodeSliced(loaded.snapshot.data, loaded.snapshot.meta.format);
  const decodeMs = nowMs() - t;
  if (world === undefined) throw new Error('failover bench: the snapshot does not decode');
  gc();
  t = nowMs();
  codec.encode(world);
  const oneCallMs = nowMs() - t;
  gc();
  const { dirty: _dirty, ...rest } = world;
  t = nowMs();
  serialize({ v8: process.versions.v8, world: rest });
  const format3Ms = nowMs() - t;
  return { readMs, decodeMs, oneCallMs, format3Ms };
}
