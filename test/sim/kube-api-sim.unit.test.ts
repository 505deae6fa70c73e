/**
 * The simulated API server (src/sim/kube-api-sim.ts) against what src/kube relies on:
 * resourceVersions, list and watch with field selectors, 410 Gone after compaction,
 * 409 on a stale update and on an existing name, patches and the status subresource,
 * finalizers, delete preconditions, faults that fail requests, drop watches and restart.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { VirtualClock } from '../../src/clock.js';
import { KubeApiError, type JsonObject } from '../../src/kube/http.js';
import { prng } from '../../src/sim/chaos.js';
import { SimKubeApi } from '../../src/sim/kube-api-sim.js';

function setup(seed = 1) {
  const clock = new VirtualClock(0);
  const api = new SimKubeApi(clock, prng(seed));
  const client = api.client('test');
  /** Runs the clock until `promise` settles (it never sleeps). */
  async function run<T>(promise: Promise<T>): Promise<T> {
    let settled = false;
    const tracked = promise.finally(() => (settled = true));
    tracked.catch(() => undefined);
    while (!settled) {
      await new Promise((resolve) => setImmediate(resolve));
      if (!settled && !clock.fireNext(clock.nowMs() + 60_000)) break;
    }
    return tracked;
  }
  const advance = async (ms: number) => {
    const target = clock.nowMs() + ms;
    while (clock.fireNext(target)) await new Promise((resolve) => setImmediate(resolve));
    clock.moveTo(target);
  };
  return { clock, api, client, run, advance };
}

const pod = (name: string, nodeName?: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name },
  spec: { ...(nodeName === undefined ? {} : { nodeName }), containers: [] },
});
const rvOf = (o: JsonObject) => Number((o.metadata as { resourceVersion: string }).resourceVersion);
const namesOf = (list: JsonObject) =>
  (list.items as JsonObject[]).map((o) => (o.metadata as { name: string }).name).sort();

test('kube api sim: one resourceVersion counter; list by field selector; 409 on a taken name', async () => {
  const { client, run } = setup();
  const a = await run(client.post('/api/v1/namespaces/default/pods', pod('a', 'node-1')));
  const b = await run(client.post('/api/v1/namespaces/default/pods', pod('b', 'node-2')));
  const node = await run(client.post('/api/v1/nodes', { kind: 'Node', metadata: { name: 'n' } }));
  assert.ok(rvOf(a) < rvOf(b) && rvOf(b) < rvOf(node), 'one counter across kinds');
  const onNode1 = await run(client.get('/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1'));
  assert.deepEqual(namesOf(onNode1), ['a']);
  assert.equal(rvOf(onNode1), rvOf(node), "the list's resourceVersion is the server's");
  const scheduled = await run(client.get('/api/v1/pods?fieldSelector=spec.nodeName!%3D'));
  assert.deepEqual(namesOf(scheduled), ['a', 'b']);
  const byName = await run(client.get('/api/v1/nodes?fieldSelector=metadata.name%3Dn'));
  assert.deepEqual(namesOf(byName), ['n']);
  await assert.rejects(
    run(client.post('/api/v1/namespaces/default/pods', pod('a'))),
    (e: unknown) => e instanceof KubeApiError && e.statusCode === 409,
  );
  await assert.rejects(
    run(client.get('/api/v1/namespaces/default/pods/nope')),
    (e: unknown) => e instanceof KubeApiError && e.statusCode === 404,
  );
});

test('kube api sim: an update with a stale resourceVersion is refused with 409', async () => {
  const { client, run } = setup();
  const path = '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases';
  const lease = { kind: 'Lease', metadata: { name: 'l' }, spec: { holderIdentity: 'a' } };
  const created = await run(client.post(path, lease));
  const taken = await run(client.put(`${path}/l`, { ...created, spec: { holderIdentity: 'b' } }));
  assert.ok(rvOf(taken) > rvOf(created));
  await assert.rejects(
    run(client.put(`${path}/l`, { ...created, spec: { holderIdentity: 'c' } })),
    (e: unknown) => e instanceof KubeApiError && e.statusCode === 409 && e.reason === 'Conflict',
  );
  const now = await run(client.get(`${path}/l`));
  assert.deepEqual(now.spec, { holderIdentity: 'b' });
});

test('kube api sim: patches — merge, strategic conditions by type, status only on /status', async () => {
  const { client, run } = setup();
  await run(client.post('/api/v1/nodes', { kind: 'Node', metadata: { name: 'n' } }));
  const ready = (status: string, at: string) => ({
    status: { conditions: [{ type: 'Ready', status, lastHeartbeatTime: at }] },
  });
  await run(client.patch('/api/v1/nodes/n/status', ready('True', 't1'), 'strategic'));
  await run(
    client.patch(
      '/api/v1/nodes/n/status',
      { status: { conditions: [{ type: 'DiskPressure', status: 'False' }] } },
      'strategic',
    ),
  );
  await run(client.patch('/api/v1/nodes/n/status', ready('True', 't2'), 'strategic'));
  await run(client.patch('/api/v1/nodes/n/status', { status: { volumesInUse: ['v'] } }, 'merge'));
  await run(client.patch('/api/v1/nodes/n', { status: { volumesInUse: ['x'] } }, 'merge'));
  await run(client.patch('/api/v1/nodes/n', { metadata: { labels: { a: 'b' } } }, 'merge'));
  const node = await run(client.get('/api/v1/nodes/n'));
  const status = node.status as { conditions: JsonObject[]; volumesInUse: string[] };
  assert.deepEqual(
    status.conditions.map((c) => [c.type, c.lastHeartbeatTime ?? '']),
    [
      ['Ready', 't2'],
      ['DiskPressure', ''],
    ],
  );
  assert.deepEqual(status.volumesInUse, ['v'], 'status changes only through /status');
  assert.deepEqual((node.metadata as { labels: object }).labels, { a: 'b' });
  await run(client.patch('/api/v1/nodes/n/status', { status: { volumesInUse: null } }, 'merge'));
  const cleared = await run(client.get('/api/v1/nodes/n'));
  assert.equal((cleared.status as { volumesInUse?: string[] }).volumesInUse, undefined);
});

test('kube api sim: finalizers hold a delete; a uid precondition refuses another object', async () => {
  const { client, run } = setup();
  const path = '/apis/storage.k8s.io/v1/volumeattachments';
  const va = { kind: 'VolumeAttachment', metadata: { name: 'va', finalizers: ['attacher'] } };
  await run(client.post(path, va));
  await run(client.delete(`${path}/va`));
  const marked = await run(client.get(`${path}/va`));
  assert.ok((marked.metadata as { deletionTimestamp?: string }).deletionTimestamp);
  await run(client.patch(`${path}/va`, { metadata: { finalizers: null } }, 'merge'));
  await assert.rejects(run(client.get(`${path}/va`)), (e: unknown) => {
    return e instanceof KubeApiError && e.statusCode === 404;
  });
  const pods = '/api/v1/namespaces/default/pods';
  await run(client.post(pods, pod('p', 'node-1')));
  await run(client.delete(`${pods}/p`, { gracePeriodSeconds: 30 }));
  const deleting = await run(client.get(`${pods}/p`));
  assert.ok((deleting.metadata as { deletionTimestamp?: string }).deletionTimestamp);
  await assert.rejects(
    run(client.delete(`${pods}/p`, { gracePeriodSeconds: 0, preconditions: { uid: 'other' } })),
    (e: unknown) => e instanceof KubeApiError && e.statusCode === 409,
  );
  await run(client.delete(`${pods}/p`, { gracePeriodSeconds: 0 }));
  assert.equal((await run(client.get(pods))).items instanceof Array, true);
  assert.deepEqual(namesOf(await run(client.get(pods))), []);
});

test('kube api sim: a watch replays from its resourceVersion, follows its selector, gets bookmarks', async () => {
  const { client, run, advance } = setup();
  const pods = '/api/v1/namespaces/default/pods';
  const first = await run(client.post(pods, pod('a')));
  await run(client.post(pods, pod('b', 'node-2')));
  const seen: string[] = [];
  let ended: unknown = 'no';
  await client.watch(
    '/api/v1/pods',
    { resourceVersion: String(rvOf(first)), fieldSelector: 'spec.nodeName=node-1' },
    (type, o) => seen.push(`${type} ${(o.metadata as { name?: string }).name ?? ''}`),
    (error) => (ended = error),
  );
  // Bound to node-1 now: it enters the selection (ADDED), then is deleted.
  await run(client.post(`${pods}/a/binding`, { target: { name: 'node-1' } }));
  await run(client.delete(`${pods}/a`, { gracePeriodSeconds: 0 }));
  await advance(11_000);
  assert.deepEqual(seen, ['ADDED a', 'DELETED a', 'BOOKMARK ']);
  assert.equal(ended, 'no');
});

test('kube api sim: 410 Gone after compaction; dropped watches and a restart end streams', async () => {
  const { api, client, run, advance } = setup();
  const pods = '/api/v1/namespaces/default/pods';
  const first = await run(client.post(pods, pod('a', 'n')));
  await run(client.post(pods, pod('b', 'n')));
  api.compact();
  const events: [string, JsonObject][] = [];
  const done: unknown[] = [];
  await client.watch(
    '/api/v1/pods',
    { resourceVersion: String(rvOf(first)) },
    (type, o) => events.push([type, o]),
    (e) => done.push(e),
  );
  await advance(100);
  assert.deepEqual(
    events.map(([type, o]) => [type, o.code]),
    [['ERROR', 410]],
  );
  assert.deepEqual(done, [null]);
  const live: string[] = [];
  const liveDone: unknown[] = [];
  await client.watch(
    '/api/v1/pods',
    { resourceVersion: String(api.resourceVersion) },
    (type) => live.push(type),
    (e) => liveDone.push(e),
  );
  api.dropWatches();
  await advance(100);
  assert.deepEqual([...liveDone], [null], 'a dropped watch ends cleanly: the client watches again');
  await client.watch(
    '/api/v1/pods',
    { resourceVersion: '0' },
    () => 0,
    (e) => liveDone.push(e),
  );
  api.restart(5_000);
  await advance(100);
  assert.match(String(liveDone[1]), /connection reset/);
  const during = run(client.get(pods));
  await assert.rejects(during, /no answer from the API server in time/);
  await advance(5_000);
  assert.deepEqual(namesOf(await run(client.get(pods))), ['a', 'b']);
});

test('kube api sim: with a fail rate, requests fail by 5xx or time out, some applied anyway', async () => {
  const { api, client, run } = setup(7);
  api.setFailRate(0.9);
  const outcomes = new Map<string, number>();
  for (let i = 0; i < 60; i++) {
    const outcome = await run(
      client.post('/api/v1/namespaces/default/configmaps', {
        kind: 'ConfigMap',
        metadata: { name: `c${i}` },
      }),
    ).then(
      () => 'ok',
      (e: Error) => (e instanceof KubeApiError ? `${e.statusCode}` : 'timeout'),
    );
    outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
  }
  assert.ok((outcomes.get('503') ?? 0) > 0 && (outcomes.get('timeout') ?? 0) > 0);
  const stored = api.all('v1/configmaps').length;
  assert.ok(stored > (outcomes.get('ok') ?? 0), 'some timed-out creates were applied');
  // The same seed, the same outcomes: a run replays.
  const again = setup(7);
  again.api.setFailRate(0.9);
  for (let i = 0; i < 60; i++)
    await again
      .run(
        again.client.post('/api/v1/namespaces/default/configmaps', {
          kind: 'ConfigMap',
          metadata: { name: `c${i}` },
        }),
      )
      .catch(() => undefined);
  assert.equal(again.api.all('v1/configmaps').length, stored);
});
