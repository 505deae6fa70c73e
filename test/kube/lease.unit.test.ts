/**
 * Leader election on a Lease against an in-memory API (one Lease, resourceVersion
 * preconditions on PUT as the API server checks them): one winner among candidates, a
 * standby takes an expired Lease, and fencing refuses a write as soon as the Lease names
 * someone else, without waiting for the next renewal.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RealClock } from '../../src/clock.js';
import { KubeApiError, type JsonObject } from '../../src/kube/http.js';
import { KubeLeadership, KubeLeadershipLost, microTime } from '../../src/kube/lease.js';

class FakeLeases {
  lease: JsonObject | undefined;
  private rv = 0;

  private stamp(object: JsonObject): JsonObject {
    const metadata = { ...(object.metadata as JsonObject), resourceVersion: String(++this.rv) };
    this.lease = structuredClone({ ...object, metadata });
    return structuredClone(this.lease);
  }

  get = (): Promise<JsonObject> =>
    this.lease === undefined
      ? Promise.reject(new KubeApiError(404, 'NotFound', 'leases "x" not found'))
      : Promise.resolve(structuredClone(this.lease));

  post = (_path: string, body: unknown): Promise<JsonObject> =>
    this.lease !== undefined
      ? Promise.reject(new KubeApiError(409, 'AlreadyExists', 'exists'))
      : Promise.resolve(this.stamp(body as JsonObject));

  put = (_path: string, body: unknown): Promise<JsonObject> => {
    const rv = ((body as JsonObject).metadata as { resourceVersion?: string }).resourceVersion;
    const held = (this.lease?.metadata as { resourceVersion?: string } | undefined)
      ?.resourceVersion;
    // As the API server: an update without a resourceVersion is unconditional.
    if (rv !== undefined && rv !== held)
      return Promise.reject(new KubeApiError(409, 'Conflict', 'modified'));
    return Promise.resolve(this.stamp(body as JsonObject));
  };

  holder(): string | undefined {
    return (this.lease?.spec as { holderIdentity?: string } | undefined)?.holderIdentity;
  }
}

const options = (http: FakeLeases, identity: string, leaseDurationMs: number) => ({
  http,
  clock: new RealClock({ holdsProcess: true }),
  namespace: 'kube-system',
  name: 'vole-attach-detach',
  identity,
  leaseDurationMs,
});

test('microTime has the six fractional digits of the API MicroTime', () => {
  assert.equal(microTime(Date.UTC(2026, 0, 2, 3, 4, 5, 678)), '2026-01-02T03:04:05.678000Z');
});

test('fencing: a write is refused once the Lease names another holder', async () => {
  const api = new FakeLeases();
  const leader = await KubeLeadership.campaign(options(api, 'a', 60_000));
  assert.equal(api.holder(), 'a');
  await leader.fence(); // holds: no rejection
  // Another candidate took the Lease (e.g. after a long pause of this process).
  api.lease = { ...api.lease!, spec: { ...(api.lease!.spec as object), holderIdentity: 'b' } };
  await assert.rejects(leader.fence(), KubeLeadershipLost);
  assert.equal(leader.isLost, true);
  await assert.rejects(leader.fence(), /leadership lost: the Lease is held by b/);
});

test('two candidates at once: one leads, the other waits', async () => {
  const api = new FakeLeases();
  const stop = new AbortController();
  const first = await KubeLeadership.campaign(options(api, 'a', 60_000));
  let secondLed = false;
  const second = KubeLeadership.campaign({ ...options(api, 'b', 60_000), signal: stop.signal })
    .then(() => (secondLed = true))
    .catch(() => undefined);
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal(secondLed, false, 'b must not lead while a holds a fresh Lease');
  assert.equal(api.holder(), 'a');
  stop.abort();
  await second;
  first.lose('test over');
});

test('a standby takes the Lease once its holder stopped renewing for the duration', async () => {
  const api = new FakeLeases();
  const first = await KubeLeadership.campaign(options(api, 'a', 1000));
  first.lose('crashed'); // renewals stop, the Lease stays as it was
  const startMs = Date.now();
  const second = await KubeLeadership.campaign(options(api, 'b', 1000));
  const waitedMs = Date.now() - startMs;
  assert.equal(api.holder(), 'b');
  assert.ok(waitedMs >= 900 && waitedMs < 2000, `took over after ${waitedMs} ms`);
  const spec = api.lease!.spec as { leaseTransitions: number };
  assert.equal(spec.leaseTransitions, 1);
  second.lose('test over');
});

test('a renewal racing a take: its PUT carries what it read, the 409 ends leadership', async () => {
  const api = new FakeLeases();
  const leader = await KubeLeadership.campaign(options(api, 'a', 600));
  const lost = new Promise<string>((resolve) => leader.onLost((e) => resolve(e.message)));
  // Between the leader's read and its write, b takes the Lease (as a standby that judged
  // it expired would): the leader's write must not overwrite b's.
  const get = api.get;
  api.get = async () => {
    const read = await get();
    api.get = get;
    const spec = { ...(api.lease!.spec as object), holderIdentity: 'b' };
    await api.put('', { ...api.lease!, spec });
    return read;
  };
  assert.match(await lost, /leadership lost: renewal refused: .*modified/);
  assert.equal(api.holder(), 'b', "b's take stands");
  await assert.rejects(leader.fence(), KubeLeadershipLost);
});
