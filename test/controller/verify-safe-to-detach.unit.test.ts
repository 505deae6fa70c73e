/**
 * spec §3.8 / S3: a detach that must verify reads the node's volumesInUse again right
 * before it runs. Between the planner's decision and the call the log may be blocked (a
 * full disk; an etcd commit in cluster mode); a node that reported the volume in use again
 * meanwhile (its pod came back) keeps it: the detach fails without a call, and is retried.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ControllerManager } from '../../src/agent/controller-manager.js';
import { VirtualClock } from '../../src/clock.js';
import { managedAnnotation } from '../../src/controller/index.js';
import { MemorySink } from '../../src/engine/sink.js';
import type { Node, Pod } from '../../src/events/k8s.js';
import { FakePlugin, type FakeCallRecord } from '../../src/plugins/fake.js';
import { caps } from '../../src/plugins/types.js';
import { attachmentAt } from '../../src/controller/types.js';

/** A log whose commits can be held back, as a full disk or a slow etcd does. */
class HeldSink extends MemorySink {
  private release: (() => void) | null = null;
  private held: Promise<void> | null = null;

  hold(): void {
    this.held = new Promise((resolve) => (this.release = resolve));
  }

  letGo(): void {
    this.release?.();
    this.held = null;
  }

  whenDurable(): Promise<void> | undefined {
    return this.held ?? undefined;
  }
}

const node = (volumesInUse: string[]): Node => ({
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name: 'node-1', annotations: { [managedAnnotation]: 'true' } },
  status: { conditions: [{ type: 'Ready', status: 'True' }], volumesInUse },
});
const pod: Pod = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'a', namespace: 'default', uid: 'uid-a' },
  spec: {
    nodeName: 'node-1',
    volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'claim-1' } }],
  },
};

const settle = async () => {
  for (let i = 0; i < 50; i++) await new Promise<void>((resolve) => setImmediate(resolve));
};

test('a verified detach whose node reports the volume in use again while the log was held is not called', async () => {
  const clock = new VirtualClock(0);
  const journal: FakeCallRecord[] = [];
  const sink = new HeldSink();
  const cm = ControllerManager.create({
    plugins: [new FakePlugin({ caps: caps('fake.disk', { attachable: true }), clock, journal })],
    log: { sink, history: [] },
    clock,
    verifyAttachments: false,
  });
  cm.start();
  cm.inputs.upsertObject(node([]));
  cm.inputs.upsertObject({
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name: 'pv-1' },
    spec: { accessModes: ['ReadWriteOnce'], csi: { driver: 'fake.disk', volumeHandle: 'disk-1' } },
  });
  cm.inputs.upsertObject({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'claim-1', namespace: 'default' },
    spec: { volumeName: 'pv-1' },
    status: { phase: 'Bound' },
  });
  cm.inputs.addPod(pod);
  await settle();
  cm.inputs.upsertObject(node([])); // the node's status after the attach: not mounted yet
  await settle();
  assert.deepEqual(
    journal.map((c) => c.call),
    ['attach'],
  );

  sink.hold();
  cm.inputs.removePod('uid-a');
  await settle();
  const started = sink.events.flatMap((e) =>
    e.type === 'OperationStarted' && e.op === 'detach' ? [e] : [],
  );
  assert.equal(started.length, 1, 'the detach was decided while the node reported nothing in use');
  cm.inputs.upsertObject(node(['fake.disk/disk-1'])); // the node reports it in use again
  sink.letGo();
  await settle();

  assert.deepEqual(
    journal.map((c) => c.call),
    ['attach'],
    'no detach call was made',
  );
  const finished = sink.events.find(
    (e) => e.type === 'OperationFinished' && e.opId === started[0]!.opId,
  );
  assert.equal(finished?.type === 'OperationFinished' && finished.outcome, 'failed');
  assert.match(JSON.stringify(finished), /reports it in use again \(verifySafeToDetach\)/);
  assert.equal(
    attachmentAt(cm.world, 'fake.disk/disk-1@node-1')?.value.startsWith('attached'),
    true,
  );
  cm.stop();
});
