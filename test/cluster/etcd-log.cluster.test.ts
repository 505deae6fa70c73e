/** The controller's log in etcd: fenced group commits, failover, snapshots with compaction. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { ComparatorBuilder, Etcd3 } from 'etcd3';
import { connect } from '../../src/cluster/client.js';
import { EtcdEventLog, loadLogHead, readLogEvents } from '../../src/cluster/etcd-log.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { Leadership } from '../../src/cluster/leadership.js';
import type { NewEvent, VoleEvent } from '../../src/events/index.js';
import { EtcdCluster, etcdSkipReason } from '../support/etcd-cluster.js';

const skip = etcdSkipReason();
let etcd: EtcdCluster;
let client: Etcd3;
before(async () => {
  if (skip !== false) return;
  etcd = await EtcdCluster.start();
  client = connect(etcd.urls);
});
after(async () => {
  client?.close();
  await etcd?.stop();
});

function nodeEvent(name: string, tsMs: number): NewEvent {
  return {
    type: 'ObjectUpserted',
    tsMs,
    object: { apiVersion: 'v1', kind: 'Node', metadata: { name } },
  } as NewEvent;
}

async function readAll(keys: ClusterKeys, from = 1): Promise<VoleEvent[]> {
  const events: VoleEvent[] = [];
  await readLogEvents(client, keys, from, (e) => events.push(e));
  return events;
}

test('a leader commits the log in fenced transactions; the next leader resumes at its head; the old one is refused', { skip }, async () => {
  const keys = new ClusterKeys('/t1/');
  const a = await Leadership.campaign(client, keys, { identity: 'a', ttlS: 3 });
  const fatalA: Error[] = [];
  const logA = new EtcdEventLog({ client, keys, leadership: a, head: 0, onFatal: (e) => fatalA.push(e) });
  for (let i = 1; i <= 250; i++) assert.equal(logA.push(nodeEvent(`n${i}`, i)), i);
  await logA.durable();
  assert.equal(logA.stats.txns, 3, '250 events in 3 transactions of at most 100');
  assert.equal(etcd.etcdctl('get', keys.logHead, '--print-value-only').trim(), '250');

  const bCampaign = Leadership.campaign(client, keys, { identity: 'b', ttlS: 3 });
  await new Promise((r) => setTimeout(r, 300));
  // A is deposed behind its back: its key is deleted, B takes over. A still holds its old
  // term; its next commit must be refused by etcd itself, whatever A believes.
  const stale = { term: a.term, fence: (): ComparatorBuilder => client.if(keys.leader, 'Create', '==', a.term), onLost: () => undefined, lose: () => undefined };
  etcd.etcdctl('del', keys.leader);
  const b = await bCampaign;
  assert.notEqual(b.term, a.term);
  const head = await loadLogHead(client, keys);
  assert.equal(head.head, 250);
  const logB = new EtcdEventLog({ client, keys, leadership: b, head: head.head, onFatal: () => undefined });
  logB.push(nodeEvent('from-b', 251));
  await logB.durable();

  const fatal: Error[] = [];
  const deposed = new EtcdEventLog({ client, keys, leadership: stale as unknown as Leadership, head: 250, onFatal: (e) => fatal.push(e) });
  deposed.push(nodeEvent('from-a', 252));
  await assert.rejects(deposed.durable(), /no longer leads/);
  assert.equal(fatal.length, 1);
  // Even with the right head, a stale term cannot write; and a right term with a wrong head neither.
  const events = await readAll(keys);
  assert.equal(events.length, 251);
  assert.deepEqual(events.map((e) => e.seq), Array.from({ length: 251 }, (_, i) => i + 1));
  assert.equal((events[250] as unknown as { object: { metadata: { name: string } } }).object.metadata.name, 'from-b');

  const racing = new EtcdEventLog({ client, keys, leadership: b, head: 249, onFatal: () => undefined });
  racing.push(nodeEvent('second-writer', 253));
  await assert.rejects(racing.durable(), /another writer moved the head/);
  await a.resign();
  await b.resign();
});

test('a snapshot with compaction deletes the entries before it; loading gives the snapshot and the tail', { skip }, async () => {
  const keys = new ClusterKeys('/t2/');
  const leader = await Leadership.campaign(client, keys, { identity: 'a', ttlS: 3 });
  const log = new EtcdEventLog({ client, keys, leadership: leader, head: 0, onFatal: () => undefined });
  for (let i = 1; i <= 30; i++) log.push(nodeEvent(`n${i}`, i));
  const data = Buffer.alloc(2.5 * 1024 * 1024, 7); // three chunks
  await log.saveSnapshot({ seq: 20, tsMs: 20, format: 99, data }, { compact: true });
  const loaded = await loadLogHead(client, keys);
  assert.equal(loaded.head, 30);
  assert.equal(loaded.firstSeq, 21);
  assert.equal(loaded.snapshot?.meta.seq, 20);
  assert.equal(loaded.snapshot?.meta.chunks, 3);
  assert.ok(loaded.snapshot?.data.equals(data));
  assert.deepEqual((await readAll(keys, 21)).map((e) => e.seq), Array.from({ length: 10 }, (_, i) => 21 + i));
  assert.equal(etcd.etcdctl('get', keys.logEntry(20)).trim(), '', 'compacted');
  await leader.resign();
});
