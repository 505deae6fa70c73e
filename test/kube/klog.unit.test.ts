/**
 * The klog parser of `vole import --kubelet-log/--controller-log` on lines a real hollow
 * kubelet (kubemark) and a real kube-controller-manager wrote (test/fixtures/klog: a pod
 * with a CSI volume, a configMap and an emptyDir on node-a, whose kubelet attaches itself;
 * one on node-b, attached by the controller once its VolumeAttachment was marked attached;
 * both deleted), and on lines of the shapes Kubernetes' format strings give that the run
 * did not produce. Lines about anything else are counted; broken ones are counted and
 * named, never thrown.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { NewEvent } from '../../src/events/index.js';
import {
  type KlogImportCounts,
  klogEvents,
  klogTime,
  mergeInTime,
  parseKlogLine,
  volumeOperationOf,
} from '../../src/kube/klog.js';

const fixture = (name: string) =>
  readFileSync(new URL(`../fixtures/klog/${name}`, import.meta.url), 'utf8').split('\n');
const counts = (): KlogImportCounts => ({
  lines: 0,
  used: 0,
  other: 0,
  unreadable: 0,
  problems: [],
});
const uidA = 'd770ff8e-bdc4-4634-9dd1-0204cd971bbc';
const csiA = 'kubernetes.io/csi/hollow.csi.example^vol-1';

/** One fixture line's operation (lines count from 1). */
function opAt(file: string, line: number) {
  const parsed = parseKlogLine(fixture(file)[line - 1] ?? '');
  assert.ok(parsed !== undefined, `${file}:${line} is a klog line`);
  return volumeOperationOf(parsed);
}

test('a structured kubelet line: the message unquoted, the pod from its key and the message', () => {
  const line = parseKlogLine(fixture('kubelet-node-a.log')[20] ?? '');
  assert.ok(line !== undefined);
  assert.equal(line.severity, 'I');
  assert.deepEqual([line.month, line.day, line.time], [12, 7, '23:11:10.414252']);
  assert.equal(line.keys.get('pod'), 'default/web-1');
  assert.match(line.message, /^MountVolume\.SetUp succeeded for volume "config" \(UniqueName: /);
  assert.deepEqual(volumeOperationOf(line), {
    operation: 'MountVolume.SetUp',
    outcome: 'succeeded',
    volume: `kubernetes.io/configmap/${uidA}-config`,
    volumeSpecName: 'config',
    pod: { uid: uidA, namespace: 'default', name: 'web-1' },
  });
  assert.deepEqual(opAt('kubelet-node-a.log', 14), {
    operation: 'operationExecutor.AttachVolume',
    outcome: 'started',
    volume: csiA,
    volumeSpecName: 'pv-data',
    pod: { uid: uidA, namespace: 'default', name: 'web-1' },
  });
});

test('a failure as nestedpendingoperations logs it: the operation, its volume and node, the error', () => {
  assert.deepEqual(opAt('kubelet-node-a.log', 17), {
    operation: 'AttachVolume.Attach',
    outcome: 'failed',
    volume: csiA,
    volumeSpecName: 'pv-data',
    node: 'node-a',
    error: 'attaching volumes from the kubelet is not supported',
  });
});

test('printf lines: a TearDown names the pod by UID and its inner volume name', () => {
  assert.deepEqual(opAt('kubelet-node-a.log', 38), {
    operation: 'UnmountVolume.TearDown',
    outcome: 'succeeded',
    volume: `kubernetes.io/configmap/${uidA}-config`,
    volumeSpecName: 'config',
    pod: { uid: uidA },
  });
});

test("the controller's lines: its reconciler's key=value starts and the generator's outcomes", () => {
  const file = 'kube-controller-manager.log';
  const csiB = 'kubernetes.io/csi/hollow.csi.example^vol-2';
  assert.deepEqual(opAt(file, 13), {
    operation: 'attacherDetacher.AttachVolume',
    outcome: 'started',
    volume: csiB,
    node: 'node-b',
  });
  assert.deepEqual(opAt(file, 14), {
    operation: 'AttachVolume.Attach',
    outcome: 'succeeded',
    volume: csiB,
    volumeSpecName: 'pv-b',
    node: 'node-b',
  });
  // Its Event line quotes an attach's words, and "Verified volume is safe to detach" is
  // a check, not an operation: neither is taken.
  assert.equal(opAt(file, 15), undefined);
  assert.equal(opAt(file, 17), undefined);
  assert.deepEqual(opAt(file, 16), {
    operation: 'attacherDetacher.DetachVolume',
    outcome: 'started',
    volume: csiB,
    node: 'node-b',
  });
  assert.equal(opAt(file, 18)?.operation, 'DetachVolume.Detach');
});

test("lines of the format strings' other shapes: a device mount, a reconciler error with err=", () => {
  // operation_generator.go logs MountDevice's success with InfoS and a pod key;
  // reconciler_common.go logs a start that failed with logger.Error (err=, then pod=).
  const device =
    'I1207 23:11:12.000001    4242 operation_generator.go:560] "MountVolume.MountDevice succeeded for volume \\"pv-b\\" (UniqueName: \\"kubernetes.io/csi/d^h\\") pod \\"web-2\\" (UID: \\"u-2\\") device mount path \\"/var/lib/kubelet/plugins/kubernetes.io/csi/d/abc/globalmount\\"" pod="default/web-2"';
  const device2 = parseKlogLine(device);
  assert.ok(device2 !== undefined);
  assert.deepEqual(volumeOperationOf(device2), {
    operation: 'MountVolume.MountDevice',
    outcome: 'succeeded',
    volume: 'kubernetes.io/csi/d^h',
    volumeSpecName: 'pv-b',
    pod: { uid: 'u-2', namespace: 'default', name: 'web-2' },
  });
  const failed =
    'E1207 23:11:12.000002    4242 reconciler_common.go:221] "operationExecutor.MountVolume failed (controllerAttachDetachEnabled true) for volume \\"pv-b\\" (UniqueName: \\"kubernetes.io/csi/d^h\\") pod \\"web-2\\" (UID: \\"u-2\\") : no plugin" err="no plugin" pod="default/web-2"';
  const op = volumeOperationOf(parseKlogLine(failed)!);
  assert.equal(op?.operation, 'operationExecutor.MountVolume');
  assert.equal(op?.outcome, 'failed');
  assert.equal(op?.error, 'no plugin');
});

test('a whole fixture: operations taken, the rest counted as other, the node from the flag', () => {
  const c = counts();
  const events = klogEvents(
    {
      component: 'kubelet',
      node: 'node-a',
      file: 'kubelet-node-a.log',
      lines: fixture('kubelet-node-a.log'),
    },
    2026,
    c,
  );
  assert.equal(c.lines, 39);
  assert.equal(c.used, 27);
  assert.equal(c.other, 12);
  assert.equal(c.unreadable, 0);
  assert.equal(events.length, 27);
  const first = events[0]!;
  assert.equal(first.type, 'NodeOperationObserved');
  if (first.type !== 'NodeOperationObserved') return;
  assert.equal(first.node, 'node-a');
  assert.equal(first.component, 'kubelet');
  assert.deepEqual(first.logged, {
    file: 'kubelet-node-a.log',
    line: 13,
    at: '2026-12-07T23:11:10.311115Z',
  });
  assert.equal(first.tsMs, Date.parse('2026-12-07T23:11:10.311Z'));
});

test('unreadable and foreign lines are counted and named, never thrown', () => {
  const c = counts();
  const lines = [
    'I1207 23:11:10.311115   24649 reconciler_common.go:251] "operationExecutor.MountVolume started for volume \\"x',
    '{"kind":"Event","apiVersion":"audit.k8s.io/v1"}',
    '\u0000\u0001 binary \uFFFD',
    'I1307 99:99:99.000000   1 x.go:1] "MountVolume.SetUp succeeded for volume \\"a\\" (UniqueName: \\"k/a\\") pod \\"p\\" (UID: \\"u\\") "',
    'W1207 23:11:10.000000   1 x.go:1] some warning about nothing',
    '',
  ];
  const events = klogEvents({ component: 'kubelet', node: 'n', file: 'f.log', lines }, 2026, c);
  assert.deepEqual(events, []);
  assert.deepEqual([c.lines, c.used, c.other, c.unreadable], [5, 0, 1, 4]);
  assert.equal(c.problems.length, 4);
  assert.match(c.problems[3]!, /^f\.log:4: no such time: I1307/);
  assert.match(c.problems[0]!, /^f\.log:1: I1207/);
});

test('klog has no year: the given one, moved by a year when the line is half a year off', () => {
  const line = parseKlogLine('I1231 23:59:59.500000   1 x.go:1] msg')!;
  assert.equal(klogTime(line, 2027).at, '2027-12-31T23:59:59.500000Z');
  // An audit log begun on 2 January 2027, a kubelet log begun on 31 December.
  assert.equal(
    klogTime(line, 2027, Date.parse('2027-01-02T00:00:00Z')).at,
    '2026-12-31T23:59:59.500000Z',
  );
  const january = parseKlogLine('I0101 00:00:01.000000   1 x.go:1] msg')!;
  assert.equal(
    klogTime(january, 2026, Date.parse('2026-12-31T23:00:00Z')).at,
    '2027-01-01T00:00:01.000000Z',
  );
});

test('runs merge in time order; ties and steps back keep each run in its own order', () => {
  const ev = (tsMs: number, name: string): NewEvent => ({
    tsMs,
    type: 'PodRemoved',
    uid: name,
  });
  const merged = mergeInTime([
    [ev(1, 'a1'), ev(5, 'a2'), ev(5, 'a3')],
    [ev(0, 'b1'), ev(5, 'b2'), ev(2, 'b3')],
  ]);
  assert.deepEqual(
    merged.map((e) => (e.type === 'PodRemoved' ? e.uid : '')),
    ['b1', 'a1', 'a2', 'a3', 'b2', 'b3'],
  );
});
