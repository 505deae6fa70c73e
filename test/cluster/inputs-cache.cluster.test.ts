/**
 * A standby replica on a real etcd keeps the leader's inputs while it waits (InputsCache,
 * started by ClusterController.run) and takes them over when it wins: it lists none of the
 * four prefixes, appends no input event for what the old leader already logged, and holds
 * the old leader's world.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import type { Etcd3 } from 'etcd3';
import { connect } from '../../src/cluster/client.js';
import { ClusterController } from '../../src/cluster/controller.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import type { KvStore } from '../../src/cluster/store.js';
import type { VoleEvent } from '../../src/events/index.js';
import { objectKey } from '../../src/events/k8s.js';
import { UniquePodName } from '../../src/ids.js';
import { type EtcdCluster, useEtcdCluster } from '../support/etcd-cluster.js';
import { changeCluster, worldOf, writeCluster } from '../support/inputs-cluster.js';
import { eventually } from '../support/vole-procs.js';

let etcd: EtcdCluster;
let client: Etcd3;
const skip = useEtcdCluster((e, c) => ((etcd = e), (client = c)));

/** A store that notes the lists of some prefixes (their first pages), the checks of their newest key, and the prefixes watched. */
class NotingStore implements KvStore {
  readonly ranged: string[] = [];
  /** The standby's checks that its cache holds what etcd holds (the newest key of each). */
  readonly checked: string[] = [];
  readonly watched: string[] = [];
  constructor(
    private readonly inner: KvStore,
    private readonly prefixes: readonly string[],
  ) {}
  get: KvStore['get'] = (key) => this.inner.get(key);
  txn: KvStore['txn'] = (compares, then, otherwise) => this.inner.txn(compares, then, otherwise);
  grantLease: KvStore['grantLease'] = (ttlS) => this.inner.grantLease(ttlS);
  range: KvStore['range'] = (request) => {
    const start = request.start.toString(); // a list's first page starts at its prefix
    if (this.prefixes.includes(start))
      (request.byModRevision === true ? this.checked : this.ranged).push(start);
    return this.inner.range(request);
  };
  watch: KvStore['watch'] = (range, from, handlers) => {
    if ('prefix' in range) this.watched.push(range.prefix);
    return this.inner.watch(range, from, handlers);
  };
}

function replica(identity: string, store: KvStore, keys: ClusterKeys, events: VoleEvent[] = []) {
  return new ClusterController({
    client: store,
    keys,
    identity,
    plugins: [],
    logger: pino({ level: 'silent' }),
    leaseTtlS: 3,
    onLead: ({ manager }) => void manager.subscribe((event) => void events.push(event)),
  });
}

test(
  'a standby takes over the inputs it kept: no list, no input event for what the old leader logged, the same world',
  { skip },
  async () => {
    const keys = new ClusterKeys('/standby/');
    const inputPrefixes = [keys.heartbeats, keys.status, keys.objects, keys.pods];
    await writeCluster(new EtcdStore(client), keys);
    const a = replica('a', new EtcdStore(client), keys);
    const stopA = new AbortController();
    const runA = a.run(stopA.signal);
    await eventually(() => a.world?.pods.size === 12, 'a leads with every pod');

    const own = connect(etcd.urls);
    const noting = new NotingStore(new EtcdStore(own), inputPrefixes);
    const eventsB: VoleEvent[] = [];
    const b = replica('b', noting, keys, eventsB);
    const stopB = new AbortController();
    const runB = b.run(stopB.signal);
    try {
      await eventually(
        () => inputPrefixes.every((p) => noting.watched.includes(p)),
        'b watches the four prefixes',
      );
      assert.deepEqual(noting.ranged.sort(), [...inputPrefixes].sort(), 'one list of each');
      noting.ranged.length = 0;
      for (let round = 0; round < 3; round++)
        await changeCluster(new EtcdStore(client), keys, round);
      await eventually(
        () =>
          a.world?.pods.has(UniquePodName('q2')) === true &&
          !a.world.pods.has(UniquePodName('p2')) &&
          !a.world.objects.has(objectKey('PersistentVolume', 'pv-d9')),
        'a logs the changes',
      );
      const worldA = worldOf({ world: a.world! });
      stopA.abort();
      await runA;
      await eventually(() => b.world !== undefined && b.world.seq > (a.world?.seq ?? 0), 'b leads');
      await eventually(
        () => JSON.stringify(worldOf({ world: b.world! })) === JSON.stringify(worldA),
        "b holds a's world",
      );
      await new Promise((r) => setTimeout(r, 500)); // anything b would append late
      // The publisher reads status/ once for the volumesAttached it published (a listing
      // leader's inputs would have listed it a second time, and the three others).
      assert.deepEqual(noting.ranged, [keys.status], 'b listed none of its inputs');
      assert.deepEqual(noting.checked, inputPrefixes, 'b checked each cache once: fresh');
      assert.deepEqual(
        eventsB.map((e) => e.type),
        ['EngineStarted'],
        'no input event: a logged them all',
      );
      await changeCluster(new EtcdStore(client), keys, 3);
      await eventually(() => b.world!.pods.has(UniquePodName('q3')), 'b follows what changes next');
    } finally {
      stopB.abort();
      await runB;
      own.close();
    }
  },
);
