/**
 * The pods an informer lists, by key (src/cluster/pods-by-key.ts): which UID each key holds,
 * a replaced pod removed, a reset removing what it no longer lists; and the map's heap.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PodsByKey } from '../../src/cluster/pods-by-key.js';
import type { KeyValue } from '../../src/cluster/store.js';
import type { Pod } from '../../src/events/k8s.js';
import { heapUsedAfterGc } from '../../scripts/bench/util.js';

const keyOf = (node: string, name: string) => `/vole/pods/${node}/default/${name}`;

function kv(node: string, name: string, uid: string): KeyValue {
  const pod: Pod = {
    metadata: { name, namespace: 'default', uid },
    spec: { nodeName: node, volumes: [] },
  };
  const value = Buffer.from(JSON.stringify(pod));
  return { key: keyOf(node, name), value, createRevision: 1, modRevision: 1, lease: '0' };
}

function recorder() {
  const added: string[] = [];
  const removed: string[] = [];
  const pods = new PodsByKey({
    add: (pod) => void added.push(pod.metadata.uid!),
    remove: (uid) => void removed.push(uid),
    say: () => {},
  });
  return { pods, handlers: pods.handlers(), added, removed };
}

test('pods by key: a put adds, a delete removes, a new UID under a key replaces the pod', () => {
  const { pods, handlers, added, removed } = recorder();
  handlers.put(kv('node-0', 'web-0', 'u-1'));
  handlers.put(kv('node-1', 'web-0', 'u-2')); // the same name on another node: another key
  assert.deepEqual(added, ['u-1', 'u-2']);
  assert.equal(pods.size, 2);
  handlers.put(kv('node-0', 'web-0', 'u-3'));
  assert.deepEqual(removed, ['u-1'], 'the pod the key held before is gone');
  handlers.delete(keyOf('node-1', 'web-0'));
  handlers.delete(keyOf('node-1', 'web-0'));
  handlers.delete(keyOf('node-9', 'web-0'));
  assert.deepEqual(removed, ['u-1', 'u-2'], 'each removed once; an unknown key removes nothing');
  assert.equal(pods.size, 1);
});

test('pods by key: a reset removes the known pods it no longer lists', async () => {
  const { pods, handlers, added, removed } = recorder();
  pods.know(keyOf('node-0', 'a'), 'u-a', 'a');
  pods.know(keyOf('node-0', 'b'), 'u-b', 'b');
  pods.know(keyOf('node-1', 'c'), 'u-c', 'c');
  await handlers.reset([kv('node-0', 'a', 'u-a'), kv('node-2', 'd', 'u-d')], 1);
  assert.deepEqual(added, ['u-a', 'u-d']);
  assert.deepEqual(removed.sort(), ['u-b', 'u-c']);
  assert.equal(pods.size, 2);
  handlers.delete(keyOf('node-0', 'a'));
  assert.deepEqual(removed.sort(), ['u-a', 'u-b', 'u-c'], 'a known key removes its UID');
});

test("pods by key: no key string a pod, only the pod's name", () => {
  const count = 20_000;
  const nodes = 500;
  // As a new leader knows them from its log: keys built from the pods' records, the names
  // the records' own.
  const names = Array.from({ length: count }, (_, i) => `web-${'x'.repeat(20)}-${i}`);
  const knowAll = () => {
    const { pods } = recorder();
    for (let i = 0; i < count; i++)
      pods.know(keyOf(`node-${i % nodes}`, names[i]!), 'u', names[i]!);
    return pods;
  };
  knowAll(); // a first round grows what the measured one would be charged for
  const before = heapUsedAfterGc();
  const pods = knowAll();
  const bytes = (heapUsedAfterGc() - before) / count;
  assert.equal(pods.size, count);
  // 72 bytes a pod (its entry in its node's folder map, 40 pods a node); 125 keyed by the
  // whole key (a copy of the key, 56 bytes with this name, and an entry of one large map).
  assert.ok(bytes < 95, `${Math.round(bytes)} bytes a pod`);
});
