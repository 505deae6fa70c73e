/**
 * An API server's audit log as a recorded log (src/kube/audit-log.ts): each
 * successful change is the event `vole record` logs, timed by requestReceivedTimestamp and
 * signed with the user and verb; reads, failures and other stages are skipped, and a line
 * that is no JSON or no audit Event is counted, never fatal.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { coreOfLog } from '../../src/engine/cores.js';
import { parseEvent } from '../../src/events/index.js';
import { type AuditImportCounts, auditLogEvents } from '../../src/kube/audit-log.js';
import { logWorld, replayInto } from '../../src/postmortem/log-world.js';

const counts = (): AuditImportCounts => ({
  lines: 0,
  used: 0,
  skipped: 0,
  unreadable: 0,
  foreign: 0,
  refused: 0,
  problems: [],
});

let n = 0;
function entry(
  verb: string,
  resource: string,
  object: Record<string, unknown> | undefined,
  opts: { code?: number; stage?: string; group?: string; sub?: string; name?: string } = {},
): string {
  n++;
  const metadata = (object?.['metadata'] ?? {}) as { name?: string; namespace?: string };
  return JSON.stringify({
    kind: 'Event',
    apiVersion: 'audit.k8s.io/v1',
    level: 'RequestResponse',
    auditID: `id-${n}`,
    stage: opts.stage ?? 'ResponseComplete',
    verb,
    user: { username: 'system:node:node-1' },
    objectRef: {
      resource,
      ...(opts.group === undefined ? {} : { apiGroup: opts.group }),
      ...(opts.sub === undefined ? {} : { subresource: opts.sub }),
      name: opts.name ?? metadata.name,
      ...(metadata.namespace === undefined ? {} : { namespace: metadata.namespace }),
    },
    responseStatus: { code: opts.code ?? 200 },
    ...(object === undefined ? {} : { responseObject: object }),
    requestReceivedTimestamp: `2026-12-07T20:00:${String(n).padStart(2, '0')}.123456Z`,
  });
}

const pod = (rv: string, extra: Record<string, unknown> = {}) => ({
  kind: 'Pod',
  apiVersion: 'v1',
  metadata: { name: 'web-0', namespace: 'ns', uid: 'uid-a', resourceVersion: rv, ...extra },
  spec: {
    nodeName: 'node-1',
    volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'claim-1' } }],
    containers: [{ name: 'c' }],
  },
});
const pv = {
  kind: 'PersistentVolume',
  apiVersion: 'v1',
  metadata: { name: 'pv-1', uid: 'uid-pv', resourceVersion: '3' },
  spec: {
    capacity: { storage: '1Gi' },
    accessModes: ['ReadWriteOnce'],
    csi: { driver: 'disk.csi.vole.dev', volumeHandle: 'vol-1' },
  },
};

test('audit log: changes become recorded events; the rest is skipped or counted', () => {
  const lines = [
    entry('create', 'persistentvolumes', pv),
    entry('create', 'pods', pod('10')),
    entry('get', 'pods', pod('10')),
    entry('patch', 'pods', pod('11'), { sub: 'status' }),
    entry('patch', 'pods', pod('11'), { code: 409 }),
    entry('create', 'pods', pod('12'), { stage: 'RequestReceived' }),
    entry('create', 'configmaps', { kind: 'ConfigMap', metadata: { name: 'x' } }),
    entry(
      'delete',
      'pods',
      pod('13', { deletionTimestamp: 'now', deletionGracePeriodSeconds: 30 }),
    ),
    entry('delete', 'pods', pod('14', { deletionTimestamp: 'now', deletionGracePeriodSeconds: 0 })),
    entry('create', 'events', {
      kind: 'Event',
      apiVersion: 'v1',
      metadata: { name: 'web-0.1', namespace: 'ns', uid: 'ev-1', resourceVersion: '15' },
      involvedObject: { kind: 'Pod', namespace: 'ns', name: 'web-0' },
      reason: 'FailedMount',
      message: 'Unable to attach or mount volumes: timed out waiting for the condition',
      type: 'Warning',
      source: { component: 'kubelet', host: 'node-1' },
    }),
    entry(
      'delete',
      'persistentvolumes',
      { kind: 'Status', apiVersion: 'v1', status: 'Success' },
      { name: 'pv-1' },
    ),
    // Deleted at once (no finalizer, no grace): answered with its last state.
    entry(
      'delete',
      'volumeattachments',
      {
        kind: 'VolumeAttachment',
        apiVersion: 'storage.k8s.io/v1',
        metadata: { name: 'csi-1', uid: 'uid-va', resourceVersion: '16' },
        spec: {
          attacher: 'disk.csi.vole.dev',
          nodeName: 'node-1',
          source: { persistentVolumeName: 'pv-1' },
        },
        status: { attached: true },
      },
      { group: 'storage.k8s.io' },
    ),
    '{"this is": not json',
    '{"kind": "Something", "apiVersion": "v1"}',
    '',
  ];
  const c = counts();
  const events = auditLogEvents(lines, '/var/log/audit.log', c);
  assert.deepEqual(
    [c.lines, c.used, c.skipped, c.unreadable, c.foreign, c.refused],
    [14, 8, 4, 1, 1, 0],
  );
  assert.deepEqual(
    events.map((e) => e.type),
    [
      'EngineStarted',
      'ObjectUpserted',
      'PodUpserted',
      'PodUpserted',
      'PodUpserted',
      'PodUpserted',
      'PodRemoved',
      'KubeEventObserved',
      'ObjectRemoved',
      'ObjectUpserted',
      'ObjectRemoved',
    ],
  );
  const [started] = events;
  assert.ok(started?.type === 'EngineStarted');
  assert.equal(started.mode, 'recorded');
  assert.deepEqual(started.recorded, { source: 'audit-log', origin: '/var/log/audit.log' });
  assert.deepEqual(
    started.plugins.map((p) => p.name),
    ['disk.csi.vole.dev'],
  );
  const status = events[3];
  assert.ok(status?.type === 'PodUpserted');
  assert.deepEqual(status.observed, {
    at: '2026-12-07T20:00:04.123456Z',
    via: 'audit',
    verb: 'patch',
    user: 'system:node:node-1',
    resourceVersion: '11',
    uid: 'uid-a',
  });
  assert.equal(status.tsMs, Date.parse('2026-12-07T20:00:04.123Z'));
  // A valid log that folds with the controller's core.
  const log = events.map((e, i) => parseEvent({ ...e, seq: i + 1 }));
  const world = replayInto(logWorld(coreOfLog(log)), log);
  assert.equal(world.seq, log.length);
});

test('audit log: the same change twice (a duplicated line) is logged once', () => {
  const line = entry('create', 'pods', pod('10'));
  const events = auditLogEvents([line, line], 'f', counts());
  assert.deepEqual(
    events.map((e) => e.type),
    ['EngineStarted', 'PodUpserted'],
  );
});
