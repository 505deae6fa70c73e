/**
 * The objects a node may only get by name (src/kube/named-gets.ts), against an API server
 * played by a map: each is got when first named and again while named, handed on only
 * when its resourceVersion changes, forgotten on 404 and with its last owner, and a get
 * answered after that changes nothing. No list or watch is ever asked for.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RealClock } from '../../src/clock.js';
import { KubeApiError, type JsonObject } from '../../src/kube/http.js';
import type { ApiObject } from '../../src/kube/informer.js';
import { NamedGets, type NamedRef, namedRefPath } from '../../src/kube/named-gets.js';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
async function until(what: string, probe: () => boolean): Promise<void> {
  for (let i = 0; i < 2_000; i++) {
    if (probe()) return;
    await turn();
  }
  assert.fail(`never: ${what}`);
}

const claim: NamedRef = { kind: 'PersistentVolumeClaim', name: 'data', namespace: 'shop' };
const volume: NamedRef = { kind: 'PersistentVolume', name: 'pv-1' };

function setup() {
  const server = new Map<string, JsonObject>();
  const asked: string[] = [];
  const upserted: ApiObject[] = [];
  const forgotten: string[] = [];
  const trouble: string[] = [];
  const gets = new NamedGets({
    get: async (path) => {
      asked.push(path);
      const found = server.get(path);
      if (found === undefined) throw new KubeApiError(404, 'NotFound', `${path} not found`);
      if (found.forbidden === true) throw new KubeApiError(403, 'Forbidden', 'forbidden');
      return found;
    },
    clock: new RealClock({ holdsProcess: true }), // the test awaits its retries
    periodMs: () => 1,
    upsert: (o) => upserted.push(o),
    forget: (ref) => forgotten.push(`${ref.kind}/${ref.name}`),
    trouble: (m) => trouble.push(m),
  });
  const put = (ref: NamedRef, resourceVersion: string, extra: JsonObject = {}) =>
    server.set(namedRefPath(ref), {
      metadata: { name: ref.name, resourceVersion, managedFields: [{}] },
      ...extra,
    });
  return { server, asked, upserted, forgotten, trouble, gets, put };
}

test('named gets: got by its own path, handed on once per version, kind set, managedFields dropped', async () => {
  const { asked, upserted, gets, put } = setup();
  put(claim, '1', { spec: { volumeName: 'pv-1' } });
  await gets.follow('pod-a', [claim]);
  assert.equal(asked[0], '/api/v1/namespaces/shop/persistentvolumeclaims/data');
  assert.deepEqual(upserted, [
    {
      kind: 'PersistentVolumeClaim',
      apiVersion: 'v1',
      metadata: { name: 'data', resourceVersion: '1' },
      spec: { volumeName: 'pv-1' },
    },
  ]);
  await until('three more gets', () => asked.length >= 4);
  assert.equal(upserted.length, 1, 'the same version is not handed on again');
  put(claim, '2', { spec: { volumeName: 'pv-1' }, status: { phase: 'Bound' } });
  await until('the new version', () => upserted.length === 2);
  assert.ok(
    asked.every((p) => !p.endsWith('persistentvolumeclaims')),
    'never a list',
  );
  gets.stop();
});

test('named gets: a 404 forgets it and still lets the owner go on; created later, it comes', async () => {
  const { upserted, forgotten, gets, put } = setup();
  await gets.follow('pod-a', [volume]);
  assert.deepEqual(forgotten, ['PersistentVolume/pv-1']);
  put(volume, '7');
  await until('the volume once created', () => upserted.length === 1);
  gets.stop();
});

test('named gets: one get loop per object for all its owners, forgotten with the last', async () => {
  const { asked, forgotten, gets, put } = setup();
  put(volume, '1');
  await gets.follow('claim-a', [volume]);
  await gets.follow('claim-b', [volume]);
  await gets.follow('claim-a', []);
  assert.deepEqual(forgotten, []);
  assert.ok(gets.follows(volume));
  await gets.follow('claim-b', []);
  assert.deepEqual(forgotten, ['PersistentVolume/pv-1']);
  assert.equal(gets.follows(volume), false);
  const after = asked.length;
  for (let i = 0; i < 50; i++) await turn();
  assert.ok(asked.length <= after + 1, 'no get loop left (at most one answer in flight)');
  gets.stop();
});

test('named gets: a refused get is said and tried again; the owner waits for an answer', async () => {
  const { server, trouble, upserted, gets, put } = setup();
  put(volume, '1', { forbidden: true });
  let answered = false;
  const followed = gets.follow('pod-a', [volume]).then(() => (answered = true));
  await until('the refusal said', () => trouble.length >= 2);
  assert.match(trouble[0]!, /^PersistentVolume pv-1: forbidden/);
  assert.equal(answered, false);
  delete server.get(namedRefPath(volume))!.forbidden;
  await followed;
  assert.equal(upserted.length, 1);
  gets.stop();
});
