/**
 * A standby's inputs (src/cluster/inputs-cache.ts) on the simulated store: an informer
 * handed over running gives its new handlers the state at its revision and then every
 * change after it, none lost or doubled while their reset takes turns; a compaction while
 * standing by lists again into the cache; and a new leader that takes the cache over
 * appends exactly the events a listing leader appends, to the same world.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ControllerManager } from '../../src/agent/controller-manager.js';
import { VirtualClock } from '../../src/clock.js';
import { ControllerInputs } from '../../src/cluster/controller-inputs.js';
import { listPrefix, PrefixInformer } from '../../src/cluster/informer.js';
import { InputsCache } from '../../src/cluster/inputs-cache.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import {
  type KeyValue,
  type KvStore,
  put,
  remove,
  type WatchHandlers,
} from '../../src/cluster/store.js';
import { MemorySink } from '../../src/engine/sink.js';
import type { VoleEvent } from '../../src/events/index.js';
import { changeCluster, untimed, worldOf, writeCluster } from '../support/inputs-cluster.js';
import { advance, simStore, turn } from '../support/sim-store.js';

/** The store's keys under `prefix` and their values, as text. */
async function stateOf(client: KvStore, prefix: string): Promise<Map<string, string>> {
  const { kvs } = await listPrefix(client, prefix);
  return new Map(kvs.map((kv) => [kv.key, kv.value.toString()]));
}

test('a handed-over informer gives the state at its revision, then every later change once, in order, while the reset takes turns', async () => {
  const { client } = simStore();
  for (let i = 0; i < 3_000; i++) await put(client, `/h/k${i}`, 'v0');
  const cached = new Map<string, KeyValue>();
  const informer = new PrefixInformer(
    client,
    '/h/',
    {
      reset: (kvs) => kvs.forEach((kv) => cached.set(kv.key, kv)),
      put: (kv) => void cached.set(kv.key, kv),
      delete: (key) => void cached.delete(key),
    },
    new VirtualClock(0),
  );
  await informer.start();
  for (let i = 0; i < 200; i++) {
    await put(client, `/h/k${i}`, 'v1');
    await remove(client, `/h/k${i + 200}`);
  }
  await turn();

  const got = new Map<string, string>();
  const changes: string[] = [];
  let resetRevision = 0;
  let resetDone = false;
  let writesDuringReset = 0;
  const handing = informer.handOver(
    {
      reset: async (kvs, revision) => {
        resetRevision = revision;
        for (let i = 0; i < kvs.length; i++) {
          if (i % 100 === 0) await turn();
          got.set(kvs[i]!.key, kvs[i]!.value.toString());
        }
        resetDone = true;
      },
      put: (kv) => {
        assert.ok(resetDone, `put ${kv.key} before the reset ended`);
        assert.ok(
          kv.modRevision > resetRevision,
          `put ${kv.key} at or before the reset's revision`,
        );
        changes.push(`${kv.key}@${kv.modRevision}`);
        got.set(kv.key, kv.value.toString());
      },
      delete: (key) => {
        assert.ok(resetDone, `delete ${key} before the reset ended`);
        changes.push(`-${key}`);
        got.delete(key);
      },
    },
    () => [...cached.values()].sort((a, b) => (a.key < b.key ? -1 : 1)),
  );
  let writes = 0;
  for (let j = 0; j < 300; j++) {
    await put(client, `/h/k${j}`, 'v2');
    await put(client, `/h/n${j}`, 'new');
    writes += 2;
    if (j % 3 === 0) {
      await remove(client, `/h/k${1_000 + j}`);
      writes++;
    }
    if (!resetDone) writesDuringReset = writes;
    await turn();
  }
  await handing;
  await turn();
  assert.ok(writesDuringReset > 30, `writes during the reset: ${writesDuringReset}`);
  assert.equal(changes.length, writes, 'every change after the revision, once');
  assert.equal(new Set(changes.filter((c) => !c.startsWith('-'))).size, 600, 'no put twice');
  assert.deepEqual(got, await stateOf(client, '/h/'));
  await informer.stop();
});

/** A store whose watches can be cut (a lost stream), as etcd's can. */
class CuttableStore implements KvStore {
  private readonly watching: WatchHandlers[] = [];
  constructor(private readonly inner: KvStore) {}
  get: KvStore['get'] = (key) => this.inner.get(key);
  range: KvStore['range'] = (request) => this.inner.range(request);
  txn: KvStore['txn'] = (compares, then, otherwise) => this.inner.txn(compares, then, otherwise);
  grantLease: KvStore['grantLease'] = (ttlS) => this.inner.grantLease(ttlS);
  watch: KvStore['watch'] = (range, from, handlers) => {
    this.watching.push(handlers);
    return this.inner.watch(range, from, handlers);
  };
  cutWatches(): void {
    for (const handlers of this.watching.splice(0)) handlers.error?.(new Error('stream lost'));
  }
}

test('a watch compacted away while standing by lists again into the cache; the leader takes the listed state', async () => {
  const { clock, store, client } = simStore();
  const keys = new ClusterKeys('/c/');
  for (let i = 0; i < 50; i++) await put(client, `${keys.pods}node-1/default/p${i}`, `{"v":${i}}`);
  const cuttable = new CuttableStore(client);
  const said: string[] = [];
  const cache = new InputsCache(cuttable, keys, clock, (line) => said.push(line));
  cache.start();
  await advance(clock, 10);
  assert.equal(cache.stats.find((s) => s.prefix === keys.pods)?.keyCount, 50);
  cuttable.cutWatches();
  // Missed while the watch is down, and compacted: only a list can tell.
  for (let i = 0; i < 10; i++) await remove(client, `${keys.pods}node-1/default/p${i}`);
  await put(client, `${keys.pods}node-2/default/q`, '{"v":"q"}');
  store.compact(store.revision);
  await advance(clock, 1_000);
  assert.ok(
    said.some((line) => line.includes(`watch ${keys.pods}`) && line.includes('listing again')),
    said.join('\n'),
  );
  assert.equal(cache.stats.find((s) => s.prefix === keys.pods)?.keyCount, 41);
  const got = new Map<string, string>();
  const taken = await cache.take(keys.pods, {
    reset: (kvs) => kvs.forEach((kv) => got.set(kv.key, kv.value.toString())),
    put: (kv) => void got.set(kv.key, kv.value.toString()),
    delete: (key) => void got.delete(key),
  });
  assert.ok(taken !== null);
  await taken.ready;
  await put(client, `${keys.pods}node-2/default/r`, '{"v":"r"}');
  await advance(clock, 10);
  assert.deepEqual(got, await stateOf(client, keys.pods));
  const none = { reset: () => undefined, put: () => undefined, delete: () => undefined };
  assert.equal(await cache.take(keys.pods, none), null, 'given once');
  await taken.informer.stop();
  await cache.stop();
});

/** A leader's engine on the log so far; what it appends from its start on. */
function leaderOn(history: readonly VoleEvent[]) {
  const cm = ControllerManager.create({
    plugins: [],
    log: { sink: new MemorySink(history), history },
    verifyAttachments: false,
  });
  const appended: VoleEvent[] = [];
  cm.subscribe((event) => void appended.push(event));
  cm.start();
  return { cm, appended };
}

test('a new leader that takes a standby cache over appends exactly what a listing leader appends, to the same world', async () => {
  const { clock, client } = simStore();
  const keys = new ClusterKeys('/c/');
  await writeCluster(client, keys);
  const first = leaderOn([]);
  const inputs0 = new ControllerInputs(client, keys, first.cm, () => undefined, clock);
  await inputs0.start();
  await inputs0.stop();
  first.cm.stop();
  const history = [...first.appended];
  assert.ok(history.some((e) => e.type === 'PodUpserted'));

  const cache = new InputsCache(client, keys, clock, () => undefined);
  cache.start();
  await advance(clock, 10);
  for (let round = 0; round < 3; round++) await changeCluster(client, keys, round);
  await advance(clock, 10);

  const listing = leaderOn(history);
  const inputsA = new ControllerInputs(client, keys, listing.cm, () => undefined, clock);
  await inputsA.start();
  const cached = leaderOn(history);
  const inputsB = new ControllerInputs(client, keys, cached.cm, () => undefined, clock);
  await inputsB.start(cache);
  assert.ok(
    cache.stats.every((s) => s.keyCount === 0),
    'every prefix handed over',
  );
  const afterStart = untimed(listing.appended);
  assert.ok(afterStart.some((e) => e.type === 'PodRemoved'));
  const upserted = afterStart.flatMap((e) =>
    e.type === 'PodUpserted' ? [e.pod.metadata.uid] : [],
  );
  assert.deepEqual(
    upserted,
    ['q0', 'q1', 'q2'],
    'a pod the world holds as listed is not logged again',
  );
  assert.ok(afterStart.some((e) => e.type === 'ObjectRemoved'));
  assert.deepEqual(untimed(cached.appended), afterStart);
  assert.deepEqual(worldOf(cached.cm), worldOf(listing.cm));

  // And both follow what changes next.
  await changeCluster(client, keys, 3);
  await advance(clock, 10);
  assert.deepEqual(untimed(cached.appended), untimed(listing.appended));
  assert.ok(listing.appended.length > afterStart.length);
  assert.deepEqual(worldOf(cached.cm), worldOf(listing.cm));
  for (const inputs of [inputsA, inputsB]) await inputs.stop();
  listing.cm.stop();
  cached.cm.stop();
  await cache.stop();
});

test('a cache taken before its first list is in gives that list to the new handlers, then the changes after it', async () => {
  const { clock, client } = simStore();
  const keys = new ClusterKeys('/c/');
  for (let i = 0; i < 20; i++) await put(client, `${keys.objects}Node/n${i}`, `{"n":${i}}`);
  const cache = new InputsCache(client, keys, clock, () => undefined);
  cache.start();
  const got = new Map<string, string>();
  let resets = 0;
  const taken = await cache.take(keys.objects, {
    reset: (kvs) => {
      resets++;
      for (const kv of kvs) got.set(kv.key, kv.value.toString());
    },
    put: (kv) => void got.set(kv.key, kv.value.toString()),
    delete: (key) => void got.delete(key),
  });
  assert.ok(taken !== null);
  await taken.ready;
  assert.equal(resets, 1);
  await remove(client, `${keys.objects}Node/n3`);
  await put(client, `${keys.objects}Node/n20`, '{"n":20}');
  await advance(clock, 10);
  assert.deepEqual(got, await stateOf(client, keys.objects));
  assert.equal(got.size, 20);
  await taken.informer.stop();
  await cache.stop();
});

/** A store whose watch deliveries can be held back (a watch behind etcd). */
class LaggingStore implements KvStore {
  lagging = false;
  private readonly late: (() => void)[] = [];
  constructor(private readonly inner: KvStore) {}
  get: KvStore['get'] = (key) => this.inner.get(key);
  range: KvStore['range'] = (request) => this.inner.range(request);
  txn: KvStore['txn'] = (compares, then, otherwise) => this.inner.txn(compares, then, otherwise);
  grantLease: KvStore['grantLease'] = (ttlS) => this.inner.grantLease(ttlS);
  watch: KvStore['watch'] = (range, from, handlers) =>
    this.inner.watch(range, from, {
      ...handlers,
      put: (kv) => (this.lagging ? this.late.push(() => handlers.put(kv)) : handlers.put(kv)),
      delete: (key, revision) =>
        this.lagging
          ? this.late.push(() => handlers.delete(key, revision))
          : handlers.delete(key, revision),
    });
  catchUp(): void {
    this.lagging = false;
    for (const deliver of this.late.splice(0)) deliver();
  }
}

test('a cache behind etcd when its replica wins is not handed over: the new leader lists, appending what a listing leader appends', async () => {
  const { clock, client } = simStore();
  const keys = new ClusterKeys('/c/');
  await writeCluster(client, keys);
  const first = leaderOn([]);
  const inputs0 = new ControllerInputs(client, keys, first.cm, () => undefined, clock);
  await inputs0.start();
  await inputs0.stop();
  first.cm.stop();
  const history = [...first.appended];

  const lagging = new LaggingStore(client);
  const said: string[] = [];
  const cache = new InputsCache(lagging, keys, clock, (line) => said.push(line));
  cache.start();
  await advance(clock, 10);
  lagging.lagging = true; // what follows is in etcd, not yet in the cache
  await changeCluster(client, keys, 0);

  const listing = leaderOn(history);
  const inputsA = new ControllerInputs(client, keys, listing.cm, () => undefined, clock);
  await inputsA.start();
  const cached = leaderOn(history);
  const inputsB = new ControllerInputs(client, keys, cached.cm, () => undefined, clock);
  const starting = inputsB.start(cache);
  await advance(clock, 1_000);
  await starting;
  for (const prefix of [keys.heartbeats, keys.status, keys.objects, keys.pods])
    assert.ok(
      said.includes(`etcd (standby): the cache of ${prefix} is behind etcd: listing it`),
      said.join('\n'),
    );
  assert.deepEqual(untimed(cached.appended), untimed(listing.appended));
  assert.deepEqual(worldOf(cached.cm), worldOf(listing.cm));
  lagging.catchUp(); // the cache's informers were stopped: nothing reaches the leader twice
  await advance(clock, 10);
  assert.deepEqual(untimed(cached.appended), untimed(listing.appended));
  for (const inputs of [inputsA, inputsB]) await inputs.stop();
  listing.cm.stop();
  cached.cm.stop();
  await cache.stop();
});
