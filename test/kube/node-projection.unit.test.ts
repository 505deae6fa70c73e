import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  nodeProjection,
  nodeUpdateChangesNothing,
  sameNodeProjection,
} from '../../src/kube/node-projection.js';

const node = (status: Record<string, unknown>, spec: Record<string, unknown> = {}) => ({
  kind: 'Node',
  metadata: { name: 'n1', resourceVersion: String(Math.random()), labels: { a: '1', b: '2' } },
  spec,
  status,
});

const ready = (heartbeat: string) => [
  { type: 'Ready', status: 'True', lastHeartbeatTime: heartbeat },
];

test('a Node update of volumesAttached or heartbeats only keeps the projection', () => {
  const before = node({ conditions: ready('t1'), volumesInUse: ['v1'] });
  const after = node({
    conditions: ready('t2'),
    volumesInUse: ['v1'],
    volumesAttached: [{ name: 'v1', devicePath: '' }],
  });
  assert.equal(sameNodeProjection(before, after), true);
});

test('what the fold reads changes the projection', () => {
  const base = node({ conditions: ready('t1'), volumesInUse: ['v1'] });
  const changes = [
    node({ conditions: ready('t1'), volumesInUse: ['v1', 'v2'] }),
    node({ conditions: [{ type: 'Ready', status: 'False' }], volumesInUse: ['v1'] }),
    node({ conditions: ready('t1'), volumesInUse: ['v1'] }, { taints: [{ key: 'k' }] }),
    { ...base, metadata: { ...base.metadata, annotations: { managed: 'true' } } },
    { ...base, metadata: { ...base.metadata, labels: { a: '1' } } },
  ];
  for (const changed of changes) assert.equal(sameNodeProjection(base, changed), false);
  assert.equal(sameNodeProjection(undefined, base), false);
});

test('key order does not change the projection', () => {
  const a = node({ conditions: ready('t1') }, { podCIDR: 'x', taints: [] });
  const b = node({ conditions: ready('t1') }, { taints: [], podCIDR: 'x' });
  assert.equal(nodeProjection(a), nodeProjection(b));
});

test('an attach assumed mounted since: the same update must be logged to say otherwise', () => {
  const logged = node({ conditions: ready('t1'), volumesInUse: [] });
  const echo = node({ conditions: ready('t1'), volumesInUse: [], volumesAttached: [] });
  const record = (inUse: string[]) => ({ exists: true, volumesInUse: new Set(inUse) });
  assert.equal(nodeUpdateChangesNothing(logged, record([]), echo), true);
  assert.equal(nodeUpdateChangesNothing(logged, record(['v1']), echo), false);
  assert.equal(nodeUpdateChangesNothing(logged, { ...record([]), exists: false }, echo), false);
  assert.equal(nodeUpdateChangesNothing(logged, undefined, echo), false);
});
