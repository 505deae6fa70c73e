/**
 * `vole judge` on logs built here, as a recorder writes them from a real cluster: the two
 * safety rules (an RWO volume attached to two nodes; a detach of a volume its node still
 * lists in volumesInUse, but for the forced detach) and the condition that held each
 * waiting pod. Every verdict is checked by its volume, nodes and seqs.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { judge } from '../../src/postmortem/judge.js';
import { at, Log, nodeKilled, runningOnNodeA, uniqueOf } from '../support/recorded-log.js';

test('judge: a node killed with its RWO volume in use — Multi-Attach, forced detach after 6 min, no violation', () => {
  const log = new Log();
  const { notReady, evicted, moved, forced, attachedB, ...a } = nodeKilled(log);
  const verdict = judge(log.events);
  assert.deepEqual(verdict.violations, []);
  assert.equal(verdict.forcedDetaches.length, 1);
  const detach = verdict.forcedDetaches[0]!;
  assert.equal(detach.volume, 'pvc-1');
  assert.equal(detach.node, 'node-a');
  assert.equal(detach.atSeq, forced);
  assert.equal(detach.reason, 'timeout');
  assert.equal(detach.requestedAtMs, at('12:02:40'));

  const waits = verdict.pods.filter((p) => p.uid === 'uid-web-2');
  assert.equal(waits.length, 1);
  const wait = waits[0]!;
  assert.equal(wait.node, 'node-b');
  assert.equal(wait.waitedFromSeq, moved);
  assert.equal(wait.endedBy, 'ready');
  assert.equal(wait.endedAtSeq, attachedB);
  assert.equal(wait.held.kind, 'multiAttach');
  assert.equal(wait.held.volume, 'pvc-1');
  assert.equal(wait.held.clearsAtMs, at('12:08:40'));
  // The proof: csi-a attached, node-a's last status listing it (NotReady, same event), the eviction.
  assert.deepEqual(wait.held.proofSeqs, [a.attached, notReady, evicted]);
  assert.match(wait.held.message, /csi-a/);
  // After the forced detach, web-2 waited on its own attach for the rest.
  assert.ok(wait.conditions.some((c) => c.kind === 'attachPending'));
  assert.ok(wait.held.heldMs > 6 * 60_000);
  // web-1 waited for its own first attach (12:01:01 to 12:01:07); evicted from the dead
  // node, it stays Terminating: node-a, NotReady, still lists the volume in use.
  const first = verdict.pods.filter((p) => p.uid === 'uid-web-1');
  assert.deepEqual(
    first.map((p) => [p.waitedFor, p.held.kind, p.endedAtSeq]),
    [
      ['volumes', 'attachPending', a.attached],
      ['teardown', 'teardownNodeNotReady', null],
    ],
  );
  assert.match(first[1]!.held.message, /node-a still lists pvc-1 in volumesInUse .* NotReady/);
});

test('judge: a VolumeAttachment patched by hand to attach an RWO volume to a second node is caught', () => {
  const log = new Log();
  log.cluster('pvc-1');
  const a = runningOnNodeA(log, 'pvc-1');
  log.va(at('12:03:00'), 'csi-planted', 'pvc-1', 'node-b', { attached: false });
  const planted = log.va(at('12:03:05'), 'csi-planted', 'pvc-1', 'node-b', { attached: true });
  const verdict = judge(log.events);
  assert.equal(verdict.violations.length, 1);
  const v = verdict.violations[0]!;
  assert.equal(v.rule, 'multiAttach');
  assert.equal(v.volume, 'pvc-1');
  assert.deepEqual(v.nodes, ['node-a', 'node-b']);
  assert.equal(v.atSeq, planted);
  assert.deepEqual(v.seqs, [a.attached, planted]);
});

test('judge: a ReadWriteMany volume attached to two nodes breaks no rule', () => {
  const log = new Log();
  log.cluster('pvc-1', ['ReadWriteMany']);
  runningOnNodeA(log, 'pvc-1');
  log.va(at('12:03:05'), 'csi-b', 'pvc-1', 'node-b', { attached: true });
  assert.deepEqual(judge(log.events).violations, []);
});

test('judge: a detach while the Ready node lists the volume in use is a violation; after unmount it is not', () => {
  const log = new Log();
  log.cluster('pvc-1');
  const a = runningOnNodeA(log, 'pvc-1');
  const detach = log.va(at('12:03:00'), 'csi-a', 'pvc-1', 'node-a', {
    attached: true,
    deleting: true,
  });
  const verdict = judge(log.events);
  assert.equal(verdict.violations.length, 1);
  const v = verdict.violations[0]!;
  assert.equal(v.rule, 'detachWhileInUse');
  assert.equal(v.volume, 'pvc-1');
  assert.deepEqual(v.nodes, ['node-a']);
  assert.equal(v.atSeq, detach);
  assert.deepEqual(v.seqs, [a.inUse, detach]);

  // The same detach after the kubelet unmounted (volumesInUse emptied) is the normal one.
  const clean = new Log();
  clean.cluster('pvc-1');
  runningOnNodeA(clean, 'pvc-1');
  clean.pod(at('12:02:50'), 'web-1', { node: 'node-a', claim: 'claim-pvc-1', deleting: true });
  clean.node(at('12:02:55'), 'node-a', { ready: true, inUse: [] });
  clean.va(at('12:03:00'), 'csi-a', 'pvc-1', 'node-a', { attached: true, deleting: true });
  clean.removed(at('12:03:02'), 'VolumeAttachment', 'csi-a');
  const verdictClean = judge(clean.events);
  assert.deepEqual(verdictClean.violations, []);
  assert.deepEqual(verdictClean.forcedDetaches, []);
});

test('judge: a NotReady node is force-detached only after maxWaitForUnmountDuration, or at once when out of service', () => {
  const early = new Log();
  early.cluster('pvc-1');
  runningOnNodeA(early, 'pvc-1');
  const gone = early.pod(at('12:02:40'), 'web-1', {
    node: 'node-a',
    claim: 'claim-pvc-1',
    deleting: true,
  });
  const notReady = early.node(at('12:02:45'), 'node-a', { ready: false, inUse: ['pvc-1'] });
  const detach = early.va(at('12:05:00'), 'csi-a', 'pvc-1', 'node-a', {
    attached: true,
    deleting: true,
  });
  const v = judge(early.events).violations;
  assert.equal(v.length, 1);
  assert.equal(v[0]!.rule, 'detachWhileInUse');
  assert.deepEqual(v[0]!.seqs, [gone, notReady, detach]);
  // With the cluster's own, shorter maxWaitForUnmountDuration the same detach was due.
  const shorter = judge(early.events, { maxWaitForUnmountMs: 60_000 });
  assert.deepEqual(shorter.violations, []);
  assert.equal(shorter.forcedDetaches[0]?.reason, 'timeout');

  const tainted = new Log();
  tainted.cluster('pvc-1');
  runningOnNodeA(tainted, 'pvc-1');
  tainted.pod(at('12:02:40'), 'web-1', { node: 'node-a', claim: 'claim-pvc-1', deleting: true });
  tainted.node(at('12:02:45'), 'node-a', {
    ready: false,
    inUse: ['pvc-1'],
    taint: 'node.kubernetes.io/out-of-service',
  });
  const at2 = tainted.va(at('12:03:00'), 'csi-a', 'pvc-1', 'node-a', {
    attached: true,
    deleting: true,
  });
  const verdict = judge(tainted.events);
  assert.deepEqual(verdict.violations, []);
  assert.deepEqual(
    verdict.forcedDetaches.map((f) => [f.atSeq, f.reason]),
    [[at2, 'outOfService']],
  );
});

test("judge: without VolumeAttachments, a volume leaving the node's volumesAttached is the detach", () => {
  const log = new Log();
  log.cluster('pvc-1');
  log.pod(at('12:01:00'), 'web-1', { node: 'node-a', claim: 'claim-pvc-1' });
  const listed = log.add(at('12:01:07'), {
    type: 'NodeStatusObserved',
    node: 'node-a',
    volumesAttached: [{ name: uniqueOf('pvc-1'), devicePath: '' }],
  });
  const inUse = log.node(at('12:02:10'), 'node-a', { ready: true, inUse: ['pvc-1'] });
  const second = log.add(at('12:02:20'), {
    type: 'NodeStatusObserved',
    node: 'node-b',
    volumesAttached: [{ name: uniqueOf('pvc-1'), devicePath: '' }],
  });
  const dropped = log.add(at('12:02:30'), {
    type: 'NodeStatusObserved',
    node: 'node-a',
    volumesAttached: [],
  });
  const verdict = judge(log.events);
  assert.deepEqual(
    verdict.violations.map((v) => [v.rule, v.nodes, v.seqs]),
    [
      ['multiAttach', ['node-a', 'node-b'], [listed, second]],
      ['detachWhileInUse', ['node-a'], [inUse, dropped]],
    ],
  );
});

test('judge: the condition that held a pod — a claim left Pending, an attach never confirmed', () => {
  const log = new Log();
  log.cluster('pvc-1');
  const sc = log.object(at('12:00:01'), {
    kind: 'StorageClass',
    metadata: { name: 'slow' },
    provisioner: 'nobody.example.com',
  });
  const claim = log.object(at('12:00:02'), {
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'orphan', namespace: 'default' },
    spec: { storageClassName: 'slow', accessModes: ['ReadWriteOnce'] },
    status: { phase: 'Pending' },
  });
  const pending = log.pod(at('12:00:03'), 'db', { claim: 'orphan' });
  log.pod(at('12:01:00'), 'web-1', { node: 'node-a', claim: 'claim-pvc-1' });
  const va = log.va(at('12:01:01'), 'csi-a', 'pvc-1', 'node-a', {
    attached: false,
    error: 'rpc error: code = DeadlineExceeded',
  });
  log.node(at('12:05:00'), 'node-b', { ready: true });
  const verdict = judge(log.events);
  assert.deepEqual(verdict.violations, []);
  const db = verdict.pods.find((p) => p.uid === 'uid-db')!;
  assert.equal(db.held.kind, 'claimPending');
  assert.equal(db.waitedFromSeq, pending);
  assert.equal(db.endedBy, null);
  assert.deepEqual(db.held.proofSeqs, [sc, claim]);
  assert.match(db.held.message, /nobody\.example\.com/);
  assert.equal(db.held.heldMs, at('12:05:00') - at('12:00:03'));
  const web = verdict.pods.find((p) => p.uid === 'uid-web-1')!;
  assert.equal(web.held.kind, 'attachPending');
  assert.deepEqual(web.held.proofSeqs, [va]);
  assert.match(web.held.message, /DeadlineExceeded/);
});

test("judge: a recorded log's Kubernetes Events join the proof, and a FailedMount after the attach holds a Pending pod", () => {
  const log = new Log();
  const seqs = nodeKilled(log);
  const multiAttach = log.kubeEvent(
    at('12:09:10'),
    { kind: 'Pod', name: 'web-2' },
    {
      reason: 'FailedAttachVolume',
      message:
        'Multi-Attach error for volume "pvc-1" Volume is already exclusively attached to one node',
      component: 'attachdetach-controller',
    },
  );
  // The Event came after the wait ended: it proves nothing of it.
  assert.equal(
    judge(log.events).pods.find((p) => p.uid === 'uid-web-2')!.held.kubeEvent,
    undefined,
  );

  const early = new Log();
  early.cluster('pvc-1');
  runningOnNodeA(early, 'pvc-1');
  early.pod(at('12:02:50'), 'web-2', { node: 'node-b', claim: 'claim-pvc-1' });
  const told = early.kubeEvent(
    at('12:02:55'),
    { kind: 'Pod', name: 'web-2' },
    {
      reason: 'FailedAttachVolume',
      message: 'Multi-Attach error for volume "pvc-1"',
      component: 'attachdetach-controller',
    },
  );
  const web2 = judge(early.events).pods.find((p) => p.uid === 'uid-web-2')!;
  assert.equal(web2.held.kind, 'multiAttach');
  assert.equal(web2.held.kubeEvent?.seq, told);
  assert.ok(web2.held.proofSeqs.includes(told));
  // node-a is Ready and web-1 still runs there: nothing clears it by itself.
  assert.equal(web2.held.clearsAtMs, null);
  assert.equal(multiAttach > seqs.attachedB, true);

  const mount = new Log();
  mount.cluster('pvc-1');
  mount.pod(at('12:01:00'), 'db', { node: 'node-a', claim: 'claim-pvc-1', phase: 'Pending' });
  const attached = mount.va(at('12:01:07'), 'csi-a', 'pvc-1', 'node-a', { attached: true });
  const failed = mount.kubeEvent(
    at('12:03:10'),
    { kind: 'Pod', name: 'db' },
    {
      reason: 'FailedMount',
      message: 'MountVolume.MountDevice failed for volume "pvc-1": rpc error: code = Internal',
      component: 'kubelet',
    },
  );
  const running = mount.pod(at('12:04:00'), 'db', {
    node: 'node-a',
    claim: 'claim-pvc-1',
    phase: 'Running',
  });
  const verdict = judge(mount.events);
  const waits = verdict.pods.filter((p) => p.uid === 'uid-db');
  assert.deepEqual(
    waits.map((w) => [w.endedBy, w.endedAtSeq]),
    [
      ['ready', attached],
      ['ready', running],
    ],
  );
  assert.equal(waits[1]!.held.kind, 'mountFailed');
  assert.deepEqual(waits[1]!.held.proofSeqs, [failed]);
  assert.equal(waits[1]!.waitedFromSeq, failed);
});

test('judge: a pod Terminating on a Ready node that keeps its volume in use waits on the teardown', () => {
  const log = new Log();
  log.cluster('pvc-1');
  runningOnNodeA(log, 'pvc-1');
  // Deleted at 12:03:00; its grace period (deletionTimestamp) ends then. A deletion that is
  // not overdue holds nothing: the kubelet has its grace period to tear the volume down.
  const deleted = log.pod(at('12:03:00'), 'web-1', {
    node: 'node-a',
    claim: 'claim-pvc-1',
    deleting: true,
  });
  const overdue = log.node(at('12:03:20'), 'node-a', { ready: true, inUse: ['pvc-1'] });
  const tornDown = log.node(at('12:05:00'), 'node-a', { ready: true, inUse: [] });
  log.removed(at('12:05:01'), 'Pod', 'web-1');
  const verdict = judge(log.events);
  assert.deepEqual(verdict.violations, []);
  const teardown = verdict.pods.filter((p) => p.uid === 'uid-web-1' && p.waitedFor === 'teardown');
  assert.equal(teardown.length, 1);
  const wait = teardown[0]!;
  assert.equal(wait.held.kind, 'teardownPending');
  assert.equal(wait.waitedFromSeq, overdue);
  assert.equal(wait.endedBy, 'tornDown');
  assert.equal(wait.endedAtSeq, tornDown);
  assert.ok(wait.held.proofSeqs.includes(deleted));
  assert.match(wait.held.message, /Terminating since 12:03:00 .* node-a is Ready since/);
  assert.match(wait.held.clears, /NodeUnpublishVolume/);
});

test('judge: a forced detach under the out-of-service taint that fails leaves no live attachment there', () => {
  for (const taint of [true, false]) {
    const log = new Log();
    log.cluster('pvc-1');
    runningOnNodeA(log, 'pvc-1');
    log.node(at('12:02:40'), 'node-a', {
      ready: false,
      inUse: ['pvc-1'],
      ...(taint ? { taint: 'node.kubernetes.io/out-of-service' } : {}),
    });
    // Deleted, its detach failing: the VolumeAttachment stays, attached, being deleted.
    log.va(at('12:02:41'), 'csi-a', 'pvc-1', 'node-a', { attached: true, deleting: true });
    log.va(at('12:02:42'), 'csi-b', 'pvc-1', 'node-b', { attached: false });
    const second = log.va(at('12:02:43'), 'csi-b', 'pvc-1', 'node-b', { attached: true });
    const { violations } = judge(log.events);
    // Kubernetes marks the failed detach uncertain and attaches on node-b: by design with
    // the taint (the node is declared shut down), a violation without it.
    assert.deepEqual(
      violations.filter((v) => v.rule === 'multiAttach').map((v) => v.atSeq),
      taint ? [] : [second],
    );
  }
});
