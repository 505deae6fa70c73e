/**
 * The etcd client's member health (src/cluster/etcd-hosts.ts) against a real etcd and a
 * member that never answers: a TCP listener that accepts and stays silent, as a member
 * behind a partition looks to gRPC (the connection never comes up, nothing is refused).
 * etcd3's own switch puts the members in the order given, the silent one first.
 */
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import type { Etcd3 } from 'etcd3';
import { connect } from '../../src/cluster/client.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import { EtcdCluster, etcdSkipReason } from '../support/etcd-cluster.js';

const skip = etcdSkipReason();
const dialTimeoutMs = 1_000;
/** Without the health tracking a call sent to the silent member never ends. */
const answerWithinMs = 15_000;
let etcd: EtcdCluster;
let silent: Server;
let silentUrl: string;
const accepted: Socket[] = [];
const clients: Etcd3[] = [];

before(async () => {
  if (skip !== false) return;
  etcd = await EtcdCluster.start({ members: 1 });
  silent = createServer((socket) => accepted.push(socket));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const address = silent.address();
  assert.ok(typeof address === 'object' && address !== null, 'the silent member listens');
  silentUrl = `http://127.0.0.1:${address.port}`;
});

after(async () => {
  for (const client of clients) client.close();
  setPoolOrder(undefined, false);
  for (const socket of accepted) socket.destroy();
  await new Promise((resolve) => silent?.close(resolve));
  await etcd?.stop();
});

/** etcd3's ConnectionPool.deterministicOrder (the class is not exported). */
function setPoolOrder(client: Etcd3 | undefined, inOrder: boolean): void {
  const pools = (client ?? clients[0]) as unknown as
    { pool: { constructor: { deterministicOrder: boolean } } } | undefined;
  if (pools !== undefined) pools.pool.constructor.deterministicOrder = inOrder;
}

function silentFirst(): Etcd3 {
  const client = connect(`${silentUrl},${etcd.urls}`, { dialTimeoutMs });
  clients.push(client);
  setPoolOrder(client, true);
  return client;
}

async function within<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what}: no answer in ${answerWithinMs} ms`)),
      answerWithinMs,
    );
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

test(
  'a call sent first to a member that never answers is answered by another',
  { skip },
  async () => {
    const store = new EtcdStore(silentFirst());
    const triedBefore = accepted.length;
    const startMs = Date.now();
    assert.equal(await within(store.get('vole-hosts/none'), 'the first get'), undefined);
    const tookMs = Date.now() - startMs;
    assert.ok(accepted.length > triedBefore, 'the silent member was tried first');
    assert.ok(tookMs >= dialTimeoutMs, `given up after its dial timeout, answered in ${tookMs} ms`);
    const triedSilent = accepted.length;
    for (let i = 0; i < 5; i++) await within(store.get('vole-hosts/none'), `get ${i + 2}`);
    assert.equal(
      accepted.length,
      triedSilent,
      'the member known dead is not tried again while others answer',
    );
  },
);

test(
  'a watch whose stream went to a member that never answers gets its events',
  { skip },
  async () => {
    const store = new EtcdStore(silentFirst());
    const triedBefore = accepted.length;
    const seen: string[] = [];
    const watch = await within(
      store.watch({ key: 'vole-hosts/watched' }, undefined, {
        put: (kv) => seen.push(kv.value.toString()),
        delete: () => undefined,
      }),
      'the watch',
    );
    assert.ok(accepted.length > triedBefore, 'the watch stream went to the silent member first');
    const writer = connect(etcd.urls);
    clients.push(writer);
    await new EtcdStore(writer).txn([], [{ put: 'vole-hosts/watched', value: 'v1' }]);
    const deadlineMs = Date.now() + answerWithinMs;
    while (seen.length === 0 && Date.now() < deadlineMs)
      await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(seen, ['v1']);
    await watch.cancel();
  },
);
