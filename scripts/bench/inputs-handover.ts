/**
 * A new leader's inputs at full size, listed or taken over from a standby's cache
 * (src/cluster/inputs-cache.ts): N pods over N/30 nodes (the scale rows' cluster) in a
 * 1-member etcd; a controller world that already holds all of it (a first leader's lists);
 * then a second start of the inputs on that world, listing, and another taking over a
 * cache that was listed beforehand. Each start appends nothing (the world holds what etcd
 * holds); the time is what a takeover spends there.
 *
 *   node --import tsx scripts/bench/inputs-handover.ts [pods=50000] [runs=2]
 *
 * BENCH_INPUTS_PROFILE=PATH writes a CPU profile of each takeover of a cache.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { ControllerManager } from '../../src/agent/controller-manager.js';
import { RealClock } from '../../src/clock.js';
import { connect } from '../../src/cluster/client.js';
import { ControllerInputs } from '../../src/cluster/controller-inputs.js';
import { listPrefix } from '../../src/cluster/informer.js';
import { InputsCache } from '../../src/cluster/inputs-cache.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { decodeObject, decodePod } from '../../src/cluster/objects.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import { prefixRange } from '../../src/cluster/store.js';
import { EtcdCluster } from '../../test/support/etcd-cluster.js';
import { nodeKvs, putAll, storageAndPod } from './cluster.js';
import { heapUsedAfterGc, nowMs, progress } from './util.js';

const pods = Number(process.argv[2] ?? 50_000);
const runs = Number(process.argv[3] ?? 2);
const prefix = '/inputs/';
const keys = new ClusterKeys(prefix);
const clock = new RealClock();
const say = (line: string) => progress(`  ${line}`);

async function timed(what: string, run: () => Promise<unknown>, cm: ControllerManager) {
  const seq = cm.world.seq;
  const started = nowMs();
  await run();
  const ms = nowMs() - started;
  progress(`${what}: ${Math.round(ms)} ms, ${cm.world.seq - seq} events appended`);
  return ms;
}

/** With BENCH_INPUTS_PROFILE=PATH: a CPU profile of each takeover, written by the returned function. */
async function startProfile(): Promise<((path: string) => Promise<void>) | undefined> {
  if (process.env.BENCH_INPUTS_PROFILE === undefined) return undefined;
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  return async (path) => {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(path, JSON.stringify(profile));
    session.disconnect();
  };
}

const etcd = await EtcdCluster.start({ members: 1, quotaBackendBytes: 8 * 2 ** 30 });
const client = connect(etcd.urls);
try {
  const nodes = Math.ceil(pods / 30);
  const kvs = [...nodeKvs(prefix, nodes)];
  for (let i = 0; i < pods; i++) kvs.push(...storageAndPod(i, `node-${i % nodes}`, prefix));
  await putAll(client, kvs);
  progress(`wrote ${kvs.length} keys (${pods} pods, ${nodes} nodes)`);
  kvs.length = 0;
  const store = new EtcdStore(client);
  const cm = ControllerManager.create({ plugins: [], verifyAttachments: false });
  cm.start();
  const first = new ControllerInputs(store, keys, cm, say, clock);
  await timed('first leader (empty world)', () => first.start(), cm);
  await first.stop();

  // Where a list's time goes: etcd's pages, then decoding what came.
  const listStarted = nowMs();
  const objects = (await listPrefix(store, keys.objects)).kvs;
  const podKvs = (await listPrefix(store, keys.pods)).kvs;
  const listMs = nowMs() - listStarted;
  let decodeStarted = nowMs();
  for (const kv of objects) {
    const decoded = decodeObject(kv);
    if (decoded.ok) cm.inputs.loggedObject(decoded.value);
  }
  const objectsMs = nowMs() - decodeStarted;
  decodeStarted = nowMs();
  for (const kv of podKvs) decodePod(kv);
  const podsMs = nowMs() - decodeStarted;
  progress(
    `lists of objects and pods: ${Math.round(listMs)} ms (${objects.length + podKvs.length} keys); decode + logged form of the objects ~${Math.round(objectsMs)} ms, decode of the pods ${Math.round(podsMs)} ms`,
  );

  // What a standby's check that its cache is fresh costs: etcd sorts a whole prefix.
  for (const prefix of [keys.objects, keys.pods]) {
    const checkStarted = nowMs();
    const newest = await store.range({
      ...prefixRange(prefix),
      byModRevision: true,
      descending: true,
      limit: 1,
      keysOnly: true,
    });
    progress(
      `newest key of ${prefix} (of ${newest.count}): ${Math.round(nowMs() - checkStarted)} ms`,
    );
  }

  for (let run = 1; run <= runs; run++) {
    const listing = new ControllerInputs(store, keys, cm, say, clock);
    await timed(`run ${run}: a new leader lists`, () => listing.start(), cm);
    await listing.stop();
    const heapBefore = heapUsedAfterGc();
    const buffersBefore = process.memoryUsage().arrayBuffers;
    const cache = new InputsCache(store, keys, clock, say);
    cache.start();
    await cache.listed();
    const cacheMiB = (heapUsedAfterGc() - heapBefore) / 2 ** 20;
    const buffersMiB = (process.memoryUsage().arrayBuffers - buffersBefore) / 2 ** 20;
    progress(
      `run ${run}: the standby's cache holds ${Math.round(cacheMiB)} MiB of heap and ${Math.round(buffersMiB)} MiB of buffers`,
    );
    const taking = new ControllerInputs(store, keys, cm, say, clock);
    const profile = await startProfile();
    const take = () => taking.start(cache);
    await timed(`run ${run}: a new leader takes a standby's cache over`, take, cm);
    await profile?.(`${process.env.BENCH_INPUTS_PROFILE}.${run}.cpuprofile`);
    await taking.stop();
    await cache.stop();
  }
  cm.stop();
} finally {
  client.close();
  await etcd.stop();
}
