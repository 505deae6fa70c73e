/** The controller's log in etcd: fenced group commits, failover, snapshots with compaction. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Etcd3 } from 'etcd3';
import type { Compare } from '../../src/cluster/store.js';
import { EtcdEventLog, loadLogHead, readLogEvents } from '../../src/cluster/etcd-log.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import { Leadership } from '../../src/cluster/leadership.js';
import type { NewEvent, VoleEvent } from '../../src/events/index.js';
import { ControllerManager } from '../../src/agent/controller-manager.js';
import { loadControllerWorld } from '../../src/cluster/controller.js';
import { ControllerInputs } from '../../src/cluster/controller-inputs.js';
import { RealClock } from '../../src/clock.js';
import { managedAnnotation } from '../../src/controller/index.js';
import { type FakeCallRecord, FakePlugin } from '../../src/plugins/fake.js';
import { caps } from '../../src/plugins/types.js';
import { claim, diskObjects, pod } from '../support/builders.js';
import { type EtcdCluster, useEtcdCluster } from '../support/etcd-cluster.js';

const realClock = new RealClock();

let etcd: EtcdCluster;
let client: Etcd3;
const skip = useEtcdCluster((e, c) => ((etcd = e), (client = c)));

function nodeEvent(name: string, tsMs: number): NewEvent {
  return {
    type: 'ObjectUpserted',
    tsMs,
    object: { apiVersion: 'v1', kind: 'Node', metadata: { name } },
  } as NewEvent;
}

async function readAll(keys: ClusterKeys, from = 1): Promise<VoleEvent[]> {
  const events: VoleEvent[] = [];
  await readLogEvents(new EtcdStore(client), keys, from, (e) => events.push(e));
  return events;
}

test(
  'a leader commits the log in fenced transactions; the next leader resumes at its head; the old one is refused',
  { skip },
  async () => {
    const keys = new ClusterKeys('/t1/');
    const a = await Leadership.campaign(new EtcdStore(client), keys, {
      identity: 'a',
      ttlS: 3,
      clock: realClock,
    });
    const fatalA: Error[] = [];
    const logA = new EtcdEventLog({
      store: new EtcdStore(client),
      clock: realClock,
      keys,
      leadership: a,
      head: 0,
      onFatal: (e) => fatalA.push(e),
    });
    for (let i = 1; i <= 250; i++) assert.equal(logA.push(nodeEvent(`n${i}`, i)), i);
    await logA.durable();
    assert.equal(logA.stats.txns, 1, '250 small events in one transaction');
    assert.equal(etcd.etcdctl('get', keys.log.head, '--print-value-only').trim(), '250');

    const bCampaign = Leadership.campaign(new EtcdStore(client), keys, {
      identity: 'b',
      ttlS: 3,
      clock: realClock,
    });
    await new Promise((r) => setTimeout(r, 300));
    // A is deposed behind its back: its key is deleted, B takes over. A still holds its old
    // term; its next commit must be refused by etcd itself, whatever A believes.
    const stale = {
      term: a.term,
      fence: (): Compare[] => [{ key: keys.leader, createRevision: a.term }],
      onLost: () => undefined,
      lose: () => undefined,
    };
    etcd.etcdctl('del', keys.leader);
    const b = await bCampaign;
    assert.notEqual(b.term, a.term);
    const head = await loadLogHead(new EtcdStore(client), keys);
    assert.equal(head.head, 250);
    const logB = new EtcdEventLog({
      store: new EtcdStore(client),
      clock: realClock,
      keys,
      leadership: b,
      head: head.head,
      onFatal: () => undefined,
    });
    logB.push(nodeEvent('from-b', 251));
    await logB.durable();

    const fatal: Error[] = [];
    const deposed = new EtcdEventLog({
      store: new EtcdStore(client),
      clock: realClock,
      keys,
      leadership: stale as unknown as Leadership,
      head: 250,
      onFatal: (e) => fatal.push(e),
    });
    deposed.push(nodeEvent('from-a', 252));
    await assert.rejects(deposed.durable(), /no longer leads/);
    assert.equal(fatal.length, 1);
    // Even with the right head, a stale term cannot write; and a right term with a wrong head neither.
    const events = await readAll(keys);
    assert.equal(events.length, 251);
    assert.deepEqual(
      events.map((e) => e.seq),
      Array.from({ length: 251 }, (_, i) => i + 1),
    );
    assert.equal(
      (events[250] as unknown as { object: { metadata: { name: string } } }).object.metadata.name,
      'from-b',
    );

    const racing = new EtcdEventLog({
      store: new EtcdStore(client),
      clock: realClock,
      keys,
      leadership: b,
      head: 249,
      onFatal: () => undefined,
    });
    racing.push(nodeEvent('second-writer', 253));
    await assert.rejects(racing.durable(), /another writer moved the head/);
    await a.resign();
    await b.resign();
  },
);

test(
  'a snapshot with compaction deletes the entries before it; loading gives the snapshot and the tail',
  { skip },
  async () => {
    const keys = new ClusterKeys('/t2/');
    const leader = await Leadership.campaign(new EtcdStore(client), keys, {
      identity: 'a',
      ttlS: 3,
      clock: realClock,
    });
    const log = new EtcdEventLog({
      store: new EtcdStore(client),
      clock: realClock,
      keys,
      leadership: leader,
      head: 0,
      onFatal: () => undefined,
    });
    // Three commits, three segments: 1–15, 16–25 (it holds the snapshot's seq 20), 26–30.
    for (const [from, to] of [
      [1, 15],
      [16, 25],
      [26, 30],
    ] as const) {
      for (let i = from; i <= to; i++) log.push(nodeEvent(`n${i}`, i));
      await log.durable();
    }
    const segments = () =>
      etcd
        .etcdctl('get', keys.log.segments, '--prefix', '--keys-only')
        .split('\n')
        .filter((k) => k !== '');
    assert.deepEqual(
      segments(),
      [1, 16, 26].map((seq) => keys.log.segment(seq)),
    );
    assert.deepEqual(
      (await readAll(keys, 20)).map((e) => e.seq),
      Array.from({ length: 11 }, (_, i) => 20 + i),
      'read from inside a segment',
    );
    const data = Buffer.alloc(2.5 * 1024 * 1024, 7); // three chunks
    await log.saveSnapshot({ seq: 20, tsMs: 20, format: 99, data }, { compact: true });
    const loaded = await loadLogHead(new EtcdStore(client), keys);
    assert.equal(loaded.head, 30);
    assert.equal(loaded.firstSeq, 16, 'the segment holding seq 21 is kept whole');
    assert.equal(loaded.snapshot?.meta.seq, 20);
    assert.equal(loaded.snapshot?.meta.chunks, 3);
    assert.ok(loaded.snapshot?.data.equals(data));
    assert.deepEqual(
      (await readAll(keys, 21)).map((e) => e.seq),
      Array.from({ length: 10 }, (_, i) => 21 + i),
    );
    assert.deepEqual(
      segments(),
      [16, 26].map((seq) => keys.log.segment(seq)),
      'compacted: the segment before it is gone',
    );
    await leader.resign();
  },
);

function bigNodeEvent(name: string, tsMs: number, bytes: number): NewEvent {
  const event = nodeEvent(name, tsMs) as {
    object: { metadata: { annotations?: Record<string, string> } };
  };
  event.object.metadata.annotations = { note: 'x'.repeat(bytes) };
  return event as unknown as NewEvent;
}

test(
  'a group commit carries up to 1 MiB of events in segments of up to 32 KiB; a row larger than a segment goes in parts; all read back',
  { skip },
  async () => {
    const keys = new ClusterKeys('/t3/');
    const leader = await Leadership.campaign(new EtcdStore(client), keys, {
      identity: 'a',
      ttlS: 3,
      clock: realClock,
    });
    const log = new EtcdEventLog({
      store: new EtcdStore(client),
      clock: realClock,
      keys,
      leadership: leader,
      head: 0,
      onFatal: () => undefined,
    });
    for (let i = 1; i <= 1_500; i++) log.push(bigNodeEvent(`n${i}`, i, 1_000)); // ~1.1 KiB rows
    await log.durable();
    assert.equal(log.stats.events, 1_500);
    assert.equal(log.stats.txns, 2, '1.6 MiB of rows in two transactions');
    assert.ok(
      log.stats.segments >= 50 && log.stats.segments <= 60,
      `${log.stats.segments} segments of ~32 KiB`,
    );
    // Rows of 900 KiB: a transaction each, in parts of 32 KiB (every key stays small, so a
    // read page of them stays under gRPC's 4 MiB message limit); a small row after them.
    for (let i = 1; i <= 5; i++) log.push(bigNodeEvent(`big${i}`, 1_500 + i, 900 * 1024));
    log.push(nodeEvent('small', 1_506));
    await log.durable();
    assert.equal(log.stats.txns, 7);
    const parts = etcd
      .etcdctl('get', keys.log.segment(1_501), '--prefix', '--keys-only')
      .split('\n')
      .filter((k) => k !== '');
    assert.deepEqual(
      parts,
      Array.from({ length: 29 }, (_, i) => keys.log.segmentPart(1_501, i, 29)),
    );
    const events = await readAll(keys);
    assert.deepEqual(
      events.map((e) => e.seq),
      Array.from({ length: 1_506 }, (_, i) => i + 1),
    );
    const names = events
      .slice(1_500)
      .map(
        (e) => (e as unknown as { object: { metadata: { name: string } } }).object.metadata.name,
      );
    assert.deepEqual(names, ['big1', 'big2', 'big3', 'big4', 'big5', 'small']);
    assert.deepEqual(
      (await readAll(keys, 1_503)).map((e) => e.seq),
      [1_503, 1_504, 1_505, 1_506],
      'read from a row in parts',
    );
    assert.throws(() => log.push(bigNodeEvent('huge', 1_507, 1_100 * 1024)), /rows up to 1048576/);
    assert.equal(log.push(nodeEvent('after', 1_507)), 1_507, 'a refused row takes no seq');
    // Sizes are UTF-8 bytes, and parts are cut between characters: 225,000 characters of
    // 1, 2 and 4 bytes (~513 KiB) in parts that each stay within 32 KiB and read back whole.
    const text = 'aé😀'.repeat(75_000);
    const wide = nodeEvent('wide', 1_508) as unknown as {
      object: { metadata: { annotations?: Record<string, string> } };
    };
    wide.object.metadata.annotations = { text };
    log.push(wide as unknown as NewEvent);
    await log.durable();
    const wideParts = etcd
      .etcdctl('get', keys.log.segment(1_508), '--prefix', '--keys-only')
      .split('\n')
      .filter((k) => k !== '');
    assert.ok(
      wideParts.length >= 17 && wideParts.length <= 18,
      `${wideParts.length} parts of up to 32 KiB`,
    );
    const partBytes = Object.values(
      await client.getAll().prefix(keys.log.segment(1_508)).buffers(),
    ).map((b) => b.length);
    assert.ok(
      Math.max(...partBytes) <= 32 * 1024,
      `parts of ${Math.max(...partBytes)} bytes at most`,
    );
    const readBack = (await readAll(keys, 1_508))[0] as unknown as {
      object: { metadata: { annotations: Record<string, string> } };
    };
    assert.equal(readBack.object.metadata.annotations.text, text);
    await leader.resign();
  },
);

test(
  'whenDurable: undefined once the log is in etcd, a promise while a commit is in flight, rejected once fenced; the engine waits on it before a plugin call',
  { skip },
  async () => {
    const keys = new ClusterKeys('/t4/');
    const leader = await Leadership.campaign(new EtcdStore(client), keys, {
      identity: 'a',
      ttlS: 3,
      clock: realClock,
    });
    const log = new EtcdEventLog({
      store: new EtcdStore(client),
      clock: realClock,
      keys,
      leadership: leader,
      head: 0,
      onFatal: () => undefined,
    });
    assert.equal(log.whenDurable(), undefined, 'nothing pushed');
    log.push(nodeEvent('n1', 1));
    const waiting = log.whenDurable();
    assert.ok(waiting instanceof Promise, 'the commit is in flight');
    assert.equal(log.head, 0);
    await waiting;
    assert.equal(log.head, 1);
    assert.equal(log.whenDurable(), undefined);
    assert.equal(etcd.etcdctl('get', keys.log.head, '--print-value-only').trim(), '1');

    // The engine (through the ControllerManager, with no fenced plugins) calls attach only
    // once the events announcing it are in etcd: the log's head is past CallStarted.
    const headsAtAttach: { head: number; seq: number }[] = [];
    const journal: FakeCallRecord[] = [];
    const cm = ControllerManager.create({
      plugins: [
        new FakePlugin({
          caps: caps('fake.disk', { attachable: true }),
          clock: new RealClock(),
          journal,
        }),
      ],
      log: {
        sink: log,
        history: [],
        world: await loadControllerWorld(new EtcdStore(client), keys).then((l) => l.world),
      },
      verifyAttachments: false,
    });
    journal.push = (...records: FakeCallRecord[]) => {
      for (const r of records)
        if (r.call === 'attach') headsAtAttach.push({ head: log.head, seq: cm.world.seq });
      return Array.prototype.push.apply(journal, records);
    };
    cm.start();
    cm.upsertObject({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'node-1', annotations: { [managedAnnotation]: 'true' } },
      status: { conditions: [{ type: 'Ready', status: 'True' }], volumesInUse: [] },
    });
    for (const e of diskObjects('disk-1'))
      if (e.type === 'ObjectUpserted') cm.upsertObject(e.object);
    const scheduled = pod('uid-a', [claim('disk-1')]);
    cm.upsertPod({ ...scheduled, spec: { ...scheduled.spec, nodeName: 'node-1' } });
    await cm.waitUntilSettled({ timeoutMs: 10_000 });
    assert.equal(headsAtAttach.length, 1);
    assert.ok(
      headsAtAttach[0]!.head >= headsAtAttach[0]!.seq,
      `attach ran at log head ${headsAtAttach[0]!.head}, world at seq ${headsAtAttach[0]!.seq}`,
    );
    cm.stop();

    // A deposed writer: whenDurable rejects (the engine it served is stopped by then).
    const stale = {
      term: leader.term,
      fence: (): Compare[] => [{ key: keys.leader, createRevision: 1 }],
      onLost: () => undefined,
      lose: () => undefined,
    };
    const deposed = new EtcdEventLog({
      store: new EtcdStore(client),
      clock: realClock,
      keys,
      leadership: stale as unknown as Leadership,
      head: log.head,
      onFatal: () => undefined,
    });
    deposed.push(nodeEvent('late', 2));
    await assert.rejects(deposed.whenDurable() ?? Promise.resolve(), /no longer leads/);
    await leader.resign();
  },
);

test(
  'a pod too large for a log row is skipped with a message; the leader goes on with the others',
  { skip },
  async () => {
    const keys = new ClusterKeys('/t5/');
    const leader = await Leadership.campaign(new EtcdStore(client), keys, {
      identity: 'a',
      ttlS: 3,
      clock: realClock,
    });
    const log = new EtcdEventLog({
      store: new EtcdStore(client),
      clock: realClock,
      keys,
      leadership: leader,
      head: 0,
      onFatal: () => undefined,
    });
    const cm = ControllerManager.create({
      plugins: [],
      log: { sink: log, history: [] },
      verifyAttachments: false,
    });
    cm.start();
    const big = pod('uid-big', []);
    big.metadata.annotations = { note: 'x'.repeat(1_100 * 1024) };
    for (const p of [big, pod('uid-small', [])])
      await client.put(keys.podOf(p)).value(JSON.stringify(p));
    const said: string[] = [];
    const inputs = new ControllerInputs(
      new EtcdStore(client),
      keys,
      cm,
      (line) => said.push(line),
      realClock,
    );
    try {
      await inputs.start();
      assert.deepEqual([...cm.world.pods.keys()], ['uid-small']);
      assert.equal(said.length, 1);
      assert.match(
        said[0]!,
        /skipped pod default\/uid-big: PodUpserted is \d+ bytes as a log row; .* rows up to 1048576/,
      );
      await log.durable();
      assert.equal(log.head, cm.world.seq, 'nothing half-appended');
    } finally {
      await inputs.stop();
      cm.stop();
      await leader.resign();
    }
  },
);
