/**
 * A warm standby (src/cluster/warm-world.ts) on a real etcd: it loads the controller's
 * world while the leader leads, follows the log, and on winning folds only the events
 * after what it followed — not the snapshot again — into the world a cold load gives; a
 * warm world that fell behind a compaction is dropped for a cold load; a gap in what it
 * follows, or a watch that ends, makes it load again.
 */
import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import type { Etcd3 } from 'etcd3';
import pino from 'pino';
import { ClusterController, type ClusterControllerOptions } from '../../src/cluster/controller.js';
import { loadLogHead, readLogEvents } from '../../src/cluster/etcd-log.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import type {
  KeyValue,
  KvStore,
  RangeRequest,
  StoreWatch,
  WatchHandlers,
  WatchRange,
} from '../../src/cluster/store.js';
import { RealClock } from '../../src/clock.js';
import { managedAnnotation } from '../../src/controller/index.js';
import type { ControllerWorld } from '../../src/controller/types.js';
import { controllerCore } from '../../src/engine/cores.js';
import { type FakeCallRecord, FakePlugin } from '../../src/plugins/fake.js';
import { caps } from '../../src/plugins/types.js';
import { claim, diskObjects, pod } from '../support/builders.js';
import { useEtcdCluster } from '../support/etcd-cluster.js';
import { eventually } from '../support/kube.js';

let client: Etcd3;
const skip = useEtcdCluster((_e, c) => (client = c), { members: 1 });

/**
 * The store as replica b sees it: reads of snapshot chunks counted, and its watch on the
 * log's segments able to lose one delivery or hold every later one back (a slow stream).
 */
class WatchedStore implements KvStore {
  snapshotChunkReads = 0;
  dropNextSegment = false;
  holdSegments = false;
  /** Ends the replica's last watch on the segments as etcd does once its revision is compacted. */
  endWatch: () => void = () => assert.fail('no watch on the segments yet');
  /** The highest revision of a segment delivered to the replica. */
  deliveredRevision = 0;

  constructor(
    private readonly inner: KvStore,
    private readonly keys: ClusterKeys,
  ) {}

  get(key: string) {
    return this.inner.get(key);
  }

  range(request: RangeRequest) {
    if (request.start.toString().startsWith(`${this.keys.log.snapshot}/`))
      this.snapshotChunkReads++;
    return this.inner.range(request);
  }

  txn(...args: Parameters<KvStore['txn']>) {
    return this.inner.txn(...args);
  }

  grantLease(ttlS: number) {
    return this.inner.grantLease(ttlS);
  }

  watch(range: WatchRange, from: number | undefined, handlers: WatchHandlers): Promise<StoreWatch> {
    if (!('prefix' in range) || range.prefix !== this.keys.log.segments)
      return this.inner.watch(range, from, handlers);
    this.endWatch = () => handlers.error?.(new Error('required revision has been compacted'));
    const put = (kv: KeyValue) => {
      if (this.holdSegments) return;
      if (this.dropNextSegment) return void (this.dropNextSegment = false);
      this.deliveredRevision = Math.max(this.deliveredRevision, kv.modRevision);
      handlers.put(kv);
    };
    return this.inner.watch(range, from, { ...handlers, put });
  }
}

async function putDiskPod(keys: ClusterKeys, handle: string): Promise<void> {
  for (const event of diskObjects(handle))
    if (event.type === 'ObjectUpserted')
      await client.put(keys.objectOf(event.object)).value(JSON.stringify(event.object));
  const scheduled = pod(`pod-${handle}`, [claim(handle)]);
  const onNode = { ...scheduled, spec: { ...scheduled.spec, nodeName: 'node-1' } };
  await client.put(keys.podOf(onNode)).value(JSON.stringify(onNode));
}

async function putNode(keys: ClusterKeys): Promise<void> {
  const node = {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'node-1', annotations: { [managedAnnotation]: 'true' } },
  };
  await client.put(keys.object('Node', 'node-1')).value(JSON.stringify(node));
  await client.put(keys.heartbeat('node-1')).value('{}');
}

/** Every replica a test started, stopped after it (whether it passed or not). */
const started: Replica[] = [];
afterEach(async () => {
  for (const r of started.splice(0)) {
    r.stop.abort();
    await r.running;
  }
});

interface Replica {
  readonly controller: ClusterController;
  readonly said: string[];
  readonly stop: AbortController;
  readonly running: Promise<unknown>;
  /** The world as the replica started leading (encoded before its engine started). */
  leadWorld?: { seq: number; data: Buffer };
}

function replica(
  identity: string,
  store: KvStore,
  keys: ClusterKeys,
  journal: FakeCallRecord[],
  extra: Pick<ClusterControllerOptions, 'warmStandby'> = {},
): Replica {
  const said: string[] = [];
  const stop = new AbortController();
  const r: { -readonly [K in keyof Replica]: Replica[K] } = { said, stop } as Replica;
  r.controller = new ClusterController({
    client: store,
    keys,
    identity,
    plugins: [
      new FakePlugin({
        caps: caps('fake.disk', { attachable: true }),
        clock: new RealClock(),
        journal,
      }),
    ],
    logger: pino({ level: 'silent' }),
    leaseTtlS: 3,
    say: (line) => said.push(line),
    onLead: ({ manager }) => {
      r.leadWorld = { seq: manager.world.seq, data: controllerCore.snapshot.encode(manager.world) };
    },
    ...extra,
  });
  r.running = r.controller.run(stop.signal);
  started.push(r);
  return r;
}

/** The world a cold load gives at `seq`: the latest snapshot, then the log up to `seq`. */
async function coldWorldAt(keys: ClusterKeys, seq: number): Promise<ControllerWorld> {
  const store = new EtcdStore(client);
  const loaded = await loadLogHead(store, keys);
  const codec = controllerCore.snapshot;
  const world =
    loaded.snapshot === undefined
      ? controllerCore.initialWorld()
      : codec.decode(loaded.snapshot.data, loaded.snapshot.meta.format)!;
  assert.ok(world.seq <= seq, `the snapshot (seq ${world.seq}) is not past seq ${seq}`);
  await readLogEvents(store, keys, world.seq + 1, (event) => {
    if (event.seq <= seq) controllerCore.fold(world, event);
  });
  assert.equal(world.seq, seq);
  return world;
}

/** Worlds compared through one encode and decode each (indexes rebuilt alike), dirty set aside. */
function assertSameWorld(actual: Buffer, expected: ControllerWorld, message: string): void {
  const codec = controllerCore.snapshot;
  const strip = (world: ControllerWorld | undefined) => {
    assert.ok(world !== undefined, 'the world decodes');
    const {
      dirty: _dirty,
      touched: _touched,
      ...rest
    } = world as ControllerWorld & {
      dirty?: unknown;
    };
    return rest;
  };
  const a = strip(codec.decode(actual, codec.format));
  const b = strip(codec.decode(codec.encode(expected), codec.format));
  assert.deepStrictEqual(a, b, message);
}

const until = <T>(probe: () => Promise<T | undefined>, what: string) =>
  eventually(what, probe, { timeoutMs: 20_000 });

const attaches = (journal: FakeCallRecord[]) => journal.filter((r) => r.call === 'attach').length;

/** Under `prefix`: a node, a pod with its disk, and replica a leading once it attached it. */
async function leaderWithDisk(prefix: string) {
  const keys = new ClusterKeys(prefix);
  const journal: FakeCallRecord[] = [];
  await putNode(keys);
  await putDiskPod(keys, 'd1');
  const a = replica('a', new EtcdStore(client), keys, journal);
  await until(async () => (attaches(journal) === 1 ? true : undefined), 'a attaches d1');
  return { keys, journal, a };
}

function seqIn(said: readonly string[], pattern: RegExp): number[] {
  return said.flatMap((line) => {
    const m = pattern.exec(line);
    return m === null ? [] : [Number(m[1])];
  });
}

test(
  'a warm standby takes over folding only the tail: no snapshot read after it was warm, the world a cold load gives',
  { skip, timeout: 60_000 },
  async () => {
    const { keys, journal, a } = await leaderWithDisk('/warm1/');
    await a.controller.snapshotNow();

    const store = new WatchedStore(new EtcdStore(client), keys);
    const b = replica('b', store, keys, journal);
    await until(async () => seqIn(b.said, /^standby: warm at seq (\d+)/)[0], 'b warm');
    const warmSeq = seqIn(b.said, /^standby: warm at seq (\d+)/)[0]!;
    assert.ok(store.snapshotChunkReads > 0, 'b read the snapshot to become warm');
    store.snapshotChunkReads = 0;

    // a goes on; b follows what a commits.
    await putDiskPod(keys, 'd2');
    await until(async () => (attaches(journal) === 2 ? true : undefined), 'a attaches d2');
    const headRevision = (await client.get(keys.log.head).exec()).kvs[0]!.mod_revision;
    await until(
      async () => (store.deliveredRevision >= Number(headRevision) ? true : undefined),
      'b follows up to the head',
    );

    a.stop.abort(); // a resigns: b wins at once
    await a.running;
    await until(async () => b.leadWorld, 'b leads');
    const took = /^standby: took over warm at seq (\d+) \((\d+) events read after the win/.exec(
      b.said.find((l) => l.startsWith('standby: took over warm')) ?? '',
    );
    assert.ok(took !== null, `b took over warm: ${b.said.join(' | ')}`);
    const [seq, tail] = [Number(took[1]), Number(took[2])];
    assert.equal(seq, b.leadWorld!.seq);
    assert.ok(seq > warmSeq, `a wrote after b was warm (${warmSeq} → ${seq})`);
    assert.ok(
      tail < seq - warmSeq,
      `b followed: ${tail} of ${seq - warmSeq} events read at the win`,
    );
    assert.equal(store.snapshotChunkReads, 0, 'b did not read the snapshot again');
    assertSameWorld(b.leadWorld!.data, await coldWorldAt(keys, seq), 'warm world = cold load');
  },
);

test(
  'a gap in what a standby follows makes it load again; a warm world the log was compacted past falls back to a cold load',
  { skip, timeout: 60_000 },
  async () => {
    const { keys, journal, a } = await leaderWithDisk('/warm2/');

    const store = new WatchedStore(new EtcdStore(client), keys);
    const b = replica('b', store, keys, journal);
    const warmLines = () => seqIn(b.said, /^standby: warm at seq (\d+)/);
    await until(async () => warmLines()[0], 'b warm');

    // One commit of a never reaches b: the next one is a gap, and b loads again.
    store.dropNextSegment = true;
    await putDiskPod(keys, 'd2');
    await until(async () => (attaches(journal) === 2 ? true : undefined), 'a attaches d2');
    await putDiskPod(keys, 'd3');
    await until(async () => (warmLines().length === 2 ? true : undefined), 'b warm again');
    assert.ok(
      b.said.some((l) => /^standby: warm world dropped \(the log's segment .* holds seq/.test(l)),
      `b dropped its world for the gap: ${b.said.join(' | ')}`,
    );

    // Its watch ends (compacted): b loads again.
    store.endWatch();
    await until(async () => (warmLines().length === 3 ? true : undefined), 'b warm a third time');
    assert.ok(
      b.said.some((l) => l.startsWith('standby: warm world dropped (the watch on the log ended')),
      `b dropped its world when its watch ended: ${b.said.join(' | ')}`,
    );

    // b's stream falls behind while a snapshots and compacts the log past b's world.
    store.holdSegments = true;
    await putDiskPod(keys, 'd4');
    await until(async () => (attaches(journal) === 4 ? true : undefined), 'a attaches d4');
    await a.controller.snapshotNow();
    store.snapshotChunkReads = 0;
    a.stop.abort();
    await a.running;
    await until(async () => b.leadWorld, 'b leads');
    assert.ok(
      b.said.some(
        (l) => l.includes("the warm world's tail cannot be read") && l.endsWith('loading cold'),
      ),
      `b fell back to a cold load: ${b.said.join(' | ')}`,
    );
    assert.ok(store.snapshotChunkReads > 0, 'the cold load read the snapshot');
    assertSameWorld(
      b.leadWorld!.data,
      await coldWorldAt(keys, b.leadWorld!.seq),
      'cold fallback = cold load',
    );
  },
);

test(
  'a snapshot being encoded when the replica stops is abandoned at its next turn, not written',
  { skip, timeout: 60_000 },
  async () => {
    const { keys, journal, a } = await leaderWithDisk('/warm3/');
    const headBefore = (await loadLogHead(new EtcdStore(client), keys)).snapshot?.meta.seq;
    const taken = a.controller.snapshotNow();
    a.stop.abort(); // before the encode's first turn comes back
    await a.running;
    assert.equal(await taken, undefined, 'no snapshot saved');
    assert.ok(
      a.said.some((l) => /^snapshot at seq \d+ not saved: abandoned/.test(l)),
      `a said it abandoned the snapshot: ${a.said.join(' | ')}`,
    );
    assert.equal(
      (await loadLogHead(new EtcdStore(client), keys)).snapshot?.meta.seq,
      headBefore,
      'etcd holds no new snapshot',
    );
  },
);

test(
  'a cold standby (vole controller --cold-standby) holds nothing while it waits and loads the log when it wins',
  { skip, timeout: 60_000 },
  async () => {
    const { keys, journal, a } = await leaderWithDisk('/warm4/');
    await a.controller.snapshotNow();
    const store = new WatchedStore(new EtcdStore(client), keys);
    const b = replica('b', store, keys, journal, { warmStandby: false });
    await until(
      async () => (b.said.some((l) => l.startsWith('standby:')) ? true : undefined),
      'b campaigns',
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(store.snapshotChunkReads, 0, 'b read nothing of the log while standing by');
    assert.ok(!b.said.some((l) => /warm/.test(l)), `b kept no warm world: ${b.said.join(' | ')}`);
    a.stop.abort();
    await a.running;
    await until(async () => b.leadWorld, 'b leads');
    assert.ok(store.snapshotChunkReads > 0, 'b read the snapshot once it won');
    assertSameWorld(b.leadWorld!.data, await coldWorldAt(keys, b.leadWorld!.seq), 'a cold load');
  },
);
