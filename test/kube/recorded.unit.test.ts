/**
 * A recorded log's format (src/kube/recorded.ts): each observed change becomes one event
 * carrying its resourceVersion and time seen, a relist or a restart adds nothing already
 * logged, a Node heartbeat is no change, and the log folds with the controller's core.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { coreOfLog } from '../../src/engine/cores.js';
import { parseEvent, type NewEvent, type VoleEvent } from '../../src/events/index.js';
import type { ApiObject } from '../../src/kube/informer.js';
import { isVolumeEvent, RecordedState, recordedEngineStarted } from '../../src/kube/recorded.js';
import { logWorld, replayInto } from '../../src/postmortem/log-world.js';

const seen = (at: string, via: 'list' | 'watch' | 'audit' = 'watch') => ({ at, via });

function podObject(name: string, uid: string, rv: string, nodeName = 'node-1'): ApiObject {
  return {
    kind: 'Pod',
    apiVersion: 'v1',
    metadata: { name, namespace: 'ns', uid, resourceVersion: rv },
    spec: {
      nodeName,
      volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'claim-1' } }],
      containers: [{ name: 'c' }],
    },
  };
}

function nodeObject(rv: string, inUse: string[], ready: string, heartbeat: string): ApiObject {
  return {
    kind: 'Node',
    apiVersion: 'v1',
    metadata: { name: 'node-1', uid: 'node-uid', resourceVersion: rv },
    status: {
      volumesInUse: inUse,
      conditions: [{ type: 'Ready', status: ready, lastHeartbeatTime: heartbeat }],
    },
  };
}

/** The events as a log holds them: numbered from 1, each validated by its schema. */
function numbered(events: readonly NewEvent[]): VoleEvent[] {
  return events.map((e, i) => parseEvent({ ...e, seq: i + 1 }));
}

test('recorded: a change is logged once with its resourceVersion; a relist adds nothing', () => {
  const state = new RecordedState();
  const first = state.upsert(
    'Pod',
    podObject('web-0', 'uid-a', '10'),
    seen('2026-12-07T20:00:00.5Z', 'list'),
  );
  assert.equal(first.events.length, 1);
  const [event] = first.events;
  assert.equal(event?.type, 'PodUpserted');
  assert.deepEqual(event?.type === 'PodUpserted' ? event.observed : undefined, {
    at: '2026-12-07T20:00:00.5Z',
    via: 'list',
    resourceVersion: '10',
    uid: 'uid-a',
  });
  assert.equal(event?.tsMs, Date.parse('2026-12-07T20:00:00.5Z'));
  const relisted = state.upsert(
    'Pod',
    podObject('web-0', 'uid-a', '10'),
    seen('2026-12-07T20:05:00Z', 'list'),
  );
  assert.deepEqual(relisted.events, []);
  const changed = state.upsert(
    'Pod',
    podObject('web-0', 'uid-a', '11'),
    seen('2026-12-07T20:06:00Z'),
  );
  assert.equal(changed.events.length, 1);
});

test('recorded: the same name with a new uid logs the old one removed first', () => {
  const state = new RecordedState();
  state.upsert('Pod', podObject('web-0', 'uid-a', '10'), seen('2026-12-07T20:00:00Z'));
  const again = state.upsert(
    'Pod',
    podObject('web-0', 'uid-b', '20'),
    seen('2026-12-07T20:01:00Z', 'list'),
  );
  assert.deepEqual(
    again.events.map((e) => [e.type, e.type === 'PodRemoved' ? e.uid : '']),
    [
      ['PodRemoved', 'uid-a'],
      ['PodUpserted', ''],
    ],
  );
  const gone = state.remove('Pod', podObject('web-0', 'uid-b', '21'), seen('2026-12-07T20:02:00Z'));
  assert.deepEqual(
    gone.events.map((e) => e.type),
    ['PodRemoved'],
  );
  assert.deepEqual(state.remove('Pod', podObject('web-0', 'uid-b', '21'), seen('x')).events, []);
});

test('recorded: a Node heartbeat is no change; volumesInUse and Ready are', () => {
  const state = new RecordedState();
  const at = '2026-12-07T20:00:00Z';
  assert.equal(state.upsert('Node', nodeObject('1', [], 'True', 'h1'), seen(at)).events.length, 1);
  assert.deepEqual(state.upsert('Node', nodeObject('2', [], 'True', 'h2'), seen(at)).events, []);
  const inUse = state.upsert(
    'Node',
    nodeObject('3', ['kubernetes.io/csi/d^v'], 'True', 'h3'),
    seen(at),
  );
  assert.equal(inUse.events.length, 1);
  const notReady = state.upsert(
    'Node',
    nodeObject('4', ['kubernetes.io/csi/d^v'], 'False', 'h4'),
    seen(at),
  );
  assert.equal(notReady.events.length, 1);
  const removed = state.remove('Node', nodeObject('5', [], 'False', 'h5'), seen(at));
  assert.deepEqual(
    removed.events.map((e) => [e.type, e.type === 'ObjectRemoved' ? e.kind : '']),
    [['ObjectRemoved', 'Node']],
  );
});

test('recorded: Events about volumes are kept, others are not', () => {
  const event = (reason: string, message: string, kind = 'Pod'): ApiObject => ({
    kind: 'Event',
    apiVersion: 'v1',
    metadata: { name: `e-${reason}`, namespace: 'ns', uid: `u-${reason}`, resourceVersion: '5' },
    involvedObject: { kind, namespace: 'ns', name: 'web-0' },
    reason,
    message,
    type: 'Warning',
    source: { component: 'kubelet', host: 'node-1' },
    count: 2,
    firstTimestamp: '2026-12-07T20:00:00Z',
    lastTimestamp: '2026-12-07T20:01:00Z',
  });
  assert.ok(isVolumeEvent(event('FailedAttachVolume', 'Multi-Attach error for volume "pv-1"')));
  assert.ok(isVolumeEvent(event('FailedMount', 'Unable to attach or mount volumes')));
  assert.ok(isVolumeEvent(event('ProvisioningFailed', 'x', 'PersistentVolumeClaim')));
  assert.ok(
    isVolumeEvent(event('FailedScheduling', 'pod has unbound immediate PersistentVolumeClaims')),
  );
  assert.ok(!isVolumeEvent(event('FailedScheduling', '0/3 nodes are available: Insufficient cpu')));
  assert.ok(!isVolumeEvent(event('Pulled', 'image pulled')));
  const state = new RecordedState();
  const kept = state.upsert(
    'Event',
    event('FailedMount', 'timed out'),
    seen('2026-12-07T20:01:01Z'),
  );
  const [e] = numbered(kept.events);
  assert.equal(e?.type, 'KubeEventObserved');
  if (e?.type !== 'KubeEventObserved') return;
  assert.deepEqual(
    [e.reason, e.component, e.host, e.count, e.involvedObject.name],
    ['FailedMount', 'kubelet', 'node-1', 2, 'web-0'],
  );
  assert.deepEqual(
    state.upsert('Event', event('Pulled', 'x'), seen('2026-12-07T20:01:01Z')).events,
    [],
  );
});

test('recorded: a state folded from the log (a restart) logs nothing already there', () => {
  const writer = new RecordedState();
  const at = '2026-12-07T20:00:00Z';
  const events: NewEvent[] = [
    recordedEngineStarted(
      new Map([['disk.csi.vole.dev', true]]),
      { source: 'api-server', origin: 'https://127.0.0.1:6443' },
      0,
    ),
    ...writer.upsert('Pod', podObject('web-0', 'uid-a', '10'), seen(at)).events,
    ...writer.upsert('Node', nodeObject('1', [], 'True', 'h1'), seen(at)).events,
  ];
  const log = numbered(events);
  const restarted = new RecordedState();
  for (const e of log) restarted.fold(e);
  assert.deepEqual(restarted.drivers, ['disk.csi.vole.dev']);
  assert.deepEqual(
    restarted.upsert('Pod', podObject('web-0', 'uid-a', '10'), seen(at, 'list')).events,
    [],
  );
  assert.deepEqual(
    restarted.upsert('Node', nodeObject('7', [], 'True', 'h9'), seen(at, 'list')).events,
    [],
  );
  assert.deepEqual(restarted.keysOf('Pod'), ['Pod/ns/web-0']);
  // The log names mode `recorded` and folds with the controller's core.
  const logCore = coreOfLog(log);
  assert.equal(logCore.mode, 'controller');
  const world = replayInto(logWorld(logCore), log);
  assert.equal(world.seq, log.length);
});
