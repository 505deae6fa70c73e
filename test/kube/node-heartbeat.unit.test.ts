/**
 * The node heartbeat against an in-memory API: the Lease in kube-node-lease is created as
 * the kubelet's (holder the Node, 40 s, owned by the Node), renewed every 10 s with a later
 * renewTime, read again after a conflict, retried with a doubling wait; the Ready condition
 * is posted at start and again only after five minutes, by a strategic merge patch, or at
 * the next beat once the Node shows a Ready that is not True (the node lifecycle controller
 * set it Unknown).
 */
import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import { RealClock } from '../../src/clock.js';
import { nodeLeaseRenewMs, nodeStatusReportMs } from '../../src/constants.js';
import { KubeApiError, type JsonObject, type KubeHttp } from '../../src/kube/http.js';
import { NodeHeartbeat } from '../../src/kube/node-heartbeat.js';

class FakeApi {
  lease: JsonObject | undefined;
  readonly calls: string[] = [];
  readonly patches: { path: string; body: unknown; type: string }[] = [];
  conflictNextPut = false;
  failPuts = 0;
  private rv = 0;

  private stamp(object: JsonObject): JsonObject {
    const metadata = { ...(object.metadata as JsonObject), resourceVersion: String(++this.rv) };
    this.lease = structuredClone({ ...object, metadata });
    return structuredClone(this.lease);
  }

  get = async (path: string): Promise<JsonObject> => {
    this.calls.push(`GET ${path}`);
    if (this.lease === undefined) throw new KubeApiError(404, 'NotFound', 'not found');
    return structuredClone(this.lease);
  };

  post = async (path: string, body: unknown): Promise<JsonObject> => {
    this.calls.push(`POST ${path}`);
    return this.stamp(body as JsonObject);
  };

  put = async (path: string, body: unknown): Promise<JsonObject> => {
    this.calls.push(`PUT ${path}`);
    if (this.failPuts > 0) {
      this.failPuts -= 1;
      throw new KubeApiError(503, 'ServiceUnavailable', 'unavailable');
    }
    if (this.conflictNextPut) {
      this.conflictNextPut = false;
      this.stamp(this.lease!); // someone else wrote it
      throw new KubeApiError(409, 'Conflict', 'modified');
    }
    return this.stamp(body as JsonObject);
  };

  patch = async (path: string, body: unknown, type: string): Promise<JsonObject> => {
    this.calls.push(`PATCH ${path}`);
    this.patches.push({ path, body, type });
    return {};
  };
}

const leases = '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases';

/** Lets the beat's awaited API calls run after a timer fired. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

test('node heartbeat: a kubelet-shaped Lease renewed every 10 s, Ready every 5 min', async () => {
  // The clock reads the mocked Date: its timers and its time move together.
  mock.timers.enable({ apis: ['setTimeout', 'Date'], now: Date.parse('2026-11-27T08:00:00Z') });
  try {
    const api = new FakeApi();
    const said: string[] = [];
    const heartbeat = new NodeHeartbeat({
      http: api as unknown as KubeHttp,
      node: 'node-1',
      nodeUid: 'uid-1',
      say: (line) => said.push(line),
      clock: new RealClock(),
    });
    await heartbeat.start();
    assert.deepEqual(api.calls, [
      `GET ${leases}/node-1`,
      `POST ${leases}`,
      'PATCH /api/v1/nodes/node-1/status',
    ]);
    const lease = api.lease as {
      metadata: { ownerReferences: { kind: string; name: string; uid: string }[] };
      spec: { holderIdentity: string; leaseDurationSeconds: number; renewTime: string };
    };
    assert.equal(lease.spec.holderIdentity, 'node-1');
    assert.equal(lease.spec.leaseDurationSeconds, 40);
    assert.equal(lease.spec.renewTime, '2026-11-27T08:00:00.000000Z');
    assert.deepEqual(
      lease.metadata.ownerReferences.map((o) => [o.kind, o.name, o.uid]),
      [['Node', 'node-1', 'uid-1']],
    );
    const ready = api.patches[0]!;
    assert.equal(ready.type, 'strategic');
    const conditions = (ready.body as { status: { conditions: Record<string, string>[] } }).status
      .conditions;
    assert.deepEqual(
      conditions.map((c) => [c.type, c.status, c.reason, c.lastHeartbeatTime]),
      [['Ready', 'True', 'VoleReady', '2026-11-27T08:00:00Z']],
    );

    // Ten seconds on: renewed with the new time, no Ready yet.
    api.calls.length = 0;
    mock.timers.tick(nodeLeaseRenewMs);
    await settle();
    assert.deepEqual(api.calls, [`PUT ${leases}/node-1`]);
    assert.equal(
      (api.lease!.spec as { renewTime: string }).renewTime,
      '2026-11-27T08:00:10.000000Z',
    );

    // A conflict: said, the Lease read again, renewed on the next beat.
    api.calls.length = 0;
    api.conflictNextPut = true;
    mock.timers.tick(nodeLeaseRenewMs);
    await settle();
    assert.match(said.join('\n'), /node heartbeat failed, retrying in 500 ms: .*modified/);
    mock.timers.tick(1_000);
    await settle();
    assert.deepEqual(api.calls, [
      `PUT ${leases}/node-1`,
      `GET ${leases}/node-1`,
      `PUT ${leases}/node-1`,
    ]);

    // An API server that refuses: the retries back off, doubling.
    said.length = 0;
    api.failPuts = 2;
    mock.timers.tick(nodeLeaseRenewMs);
    await settle();
    mock.timers.tick(500);
    await settle();
    mock.timers.tick(1_000);
    await settle();
    assert.deepEqual(
      said.map((l) => /retrying in (\d+) ms/.exec(l)?.[1]),
      ['500', '1000'],
    );
    assert.equal(api.failPuts, 0);

    // Five minutes after the first, Ready is posted again.
    api.patches.length = 0;
    for (let t = 0; t < nodeStatusReportMs; t += nodeLeaseRenewMs) {
      mock.timers.tick(nodeLeaseRenewMs);
      await settle();
    }
    assert.equal(api.patches.length, 1, 'Ready once more in five minutes');
    heartbeat.stop();
    api.calls.length = 0;
    mock.timers.tick(nodeLeaseRenewMs * 3);
    await settle();
    assert.deepEqual(api.calls, [], 'stopped: no more beats');
  } finally {
    mock.timers.reset();
  }
});

test('node heartbeat: Ready carries the allocatable as capacity and allocatable, pods 110', async () => {
  const api = new FakeApi();
  const heartbeat = new NodeHeartbeat({
    http: api as unknown as KubeHttp,
    node: 'node-1',
    nodeUid: 'uid-1',
    say: () => undefined,
    clock: new RealClock(),
    allocatable: { cpuMillis: 3500, memoryBytes: 2 ** 34, ephemeralStorageBytes: 10 ** 11 },
  });
  await heartbeat.start();
  heartbeat.stop();
  const status = (api.patches[0]!.body as { status: Record<string, unknown> }).status;
  const resources = {
    cpu: '3500m',
    memory: '17179869184',
    'ephemeral-storage': '100000000000',
    pods: '110',
  };
  assert.deepEqual(status.capacity, resources);
  assert.deepEqual(status.allocatable, resources);

  const bare = new FakeApi();
  const without = new NodeHeartbeat({
    http: bare as unknown as KubeHttp,
    ...{ node: 'node-1', nodeUid: 'uid-1', say: () => undefined, clock: new RealClock() },
  });
  await without.start();
  without.stop();
  const bareStatus = (bare.patches[0]!.body as { status: Record<string, unknown> }).status;
  assert.equal(bareStatus.capacity, undefined, 'no allocatable given: none published');
});

test('node heartbeat: a Ready the node lifecycle controller set Unknown is posted again at the next beat', async () => {
  // The clock reads the mocked Date: its timers and its time move together.
  mock.timers.enable({ apis: ['setTimeout', 'Date'], now: Date.parse('2026-11-27T08:00:00Z') });
  try {
    const api = new FakeApi();
    const said: string[] = [];
    const heartbeat = new NodeHeartbeat({
      http: api as unknown as KubeHttp,
      ...{ node: 'node-1', nodeUid: 'uid-1', clock: new RealClock() },
      say: (line) => said.push(line),
    });
    await heartbeat.start();
    assert.equal(api.patches.length, 1);
    const ready = (status: string) => ({
      conditions: [
        { type: 'MemoryPressure', status: 'False' },
        { type: 'Ready', status },
      ],
    });
    heartbeat.nodeSeen(ready('True'));
    mock.timers.tick(nodeLeaseRenewMs);
    await settle();
    assert.equal(api.patches.length, 1, 'its own Ready seen: nothing to post before five minutes');

    // The link was cut past the grace period: the controller said Unknown.
    for (let i = 0; i < 3; i++) {
      mock.timers.tick(nodeLeaseRenewMs);
      await settle();
    }
    assert.equal(api.patches.length, 1, 'lease renewals only meanwhile');
    heartbeat.nodeSeen(ready('Unknown'));
    assert.match(said.join('\n'), /node Ready is Unknown on the API server: posting Ready again/);
    const seenMs = Date.now();
    mock.timers.tick(nodeLeaseRenewMs);
    await settle();
    assert.equal(api.patches.length, 2, 'Ready posted again at the next beat');
    const conditions = (
      api.patches[1]!.body as { status: { conditions: Record<string, string>[] } }
    ).status.conditions;
    assert.deepEqual(
      conditions.map((c) => [c.type, c.status, c.lastTransitionTime]),
      [['Ready', 'True', new Date(seenMs).toISOString().replace(/\.\d+Z$/, 'Z')]],
    );
    mock.timers.tick(nodeLeaseRenewMs);
    await settle();
    assert.equal(api.patches.length, 2, 'once');
    heartbeat.stop();
  } finally {
    mock.timers.reset();
  }
});
