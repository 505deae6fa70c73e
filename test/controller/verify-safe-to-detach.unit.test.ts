/**
 * behaviour C3.8 / S3: a detach that must verify reads the node's volumesInUse again right
 * before it runs. Between the planner's decision and the call the log may be blocked (a
 * full disk; an etcd commit in cluster mode); a node that reported the volume in use again
 * meanwhile (its pod came back) keeps it: the detach fails without a call, and is retried.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { attachmentAt } from '../../src/controller/types.js';
import type { VoleEvent } from '../../src/events/index.js';

type OperationFinished = Extract<VoleEvent, { type: 'OperationFinished' }>;
import { detachRefusedAsInUse, pod, settle } from '../support/detach-refused.js';

test('a verified detach whose node reports the volume in use again while the log was held is not called', async () => {
  const { cm, journal, sink, started } = await detachRefusedAsInUse();
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

test('a detach refused as in use puts the volume back in volumesAttached, and its pod, back, finds it there', async () => {
  const { cm, journal } = await detachRefusedAsInUse();
  // Its start took the volume out of the node's report; attached still, it is listed again.
  const listed = () => cm.volumesAttached('node-1').map((v) => v.name);
  assert.deepEqual(listed(), ['fake.disk/disk-1']);
  cm.inputs.addPod(pod); // scheduled there again: the node's agent waits on volumesAttached
  await settle();
  assert.deepEqual(listed(), ['fake.disk/disk-1']);
  assert.deepEqual(
    journal.map((c) => c.call),
    ['attach'],
    'attached already: no second attach',
  );
  cm.stop();
});

test('a node whose in-use report has not reached the world yet keeps the volume: the fresh read refuses the detach', async () => {
  const asked: string[] = [];
  const { cm, journal, sink, started } = await detachRefusedAsInUse({
    worldHearsInUse: false,
    nodeInUseCheck: async (node, volume) => {
      asked.push(`${node} ${volume}`);
      return true;
    },
  });
  assert.deepEqual(asked, ['node-1 fake.disk/disk-1'], 'read once, after the log let go');
  assert.deepEqual(
    journal.map((c) => c.call),
    ['attach'],
    'no detach call was made',
  );
  const finished = sink.events.find(
    (e): e is OperationFinished => e.type === 'OperationFinished' && e.opId === started[0]!.opId,
  );
  assert.equal(finished?.outcome, 'failed');
  assert.match(finished?.error?.message ?? '', /node node-1 reports it in use again/);
  assert.deepEqual(
    cm.volumesAttached('node-1').map((v) => v.name),
    ['fake.disk/disk-1'],
    'put back in the report',
  );
  cm.stop();
});

test('a fresh read that fails refuses the detach without a call; the retry detaches once the node is read not using it', async () => {
  const answers: (boolean | Error)[] = [new Error('etcdserver: request timed out')];
  const { cm, journal, sink, started, clock } = await detachRefusedAsInUse({
    worldHearsInUse: false,
    nodeInUseCheck: async () => {
      const answer = answers.shift() ?? false;
      if (answer instanceof Error) throw answer;
      return answer;
    },
  });
  const finished = sink.events.find(
    (e): e is OperationFinished => e.type === 'OperationFinished' && e.opId === started[0]!.opId,
  );
  assert.match(
    finished?.error?.message ?? '',
    /DetachVolume failed fetching node node-1 for volume "pv-1": etcdserver: request timed out/,
  );
  assert.equal(finished?.error?.kind, 'transient');
  assert.deepEqual(
    journal.map((c) => c.call),
    ['attach'],
  );
  // The backoff's retry: read again, not in use now, detached.
  while (!journal.some((c) => c.call === 'detach') && clock.fireNext(clock.nowMs() + 60_000))
    await settle();
  assert.deepEqual(
    journal.map((c) => c.call),
    ['attach', 'detach'],
  );
  assert.deepEqual(answers, [], 'the retry read the node again');
  cm.stop();
});
