/**
 * A (volume, node) pair as the controller keeps it (src/controller/attachment-record.ts):
 * one record that is its desire (the pods that want it, its desired spec) and its
 * attachment machine's state (the context's fields its own, the device mount's in one
 * object shared while they are as they start), where a desired entry, an attachment, its
 * `{ value, context }` and the context were four objects in two maps.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AttachmentContext } from '../../machines/index.js';
import {
  attachmentOf,
  attachmentState,
  desiredOf,
  detachedPair,
  deviceOf,
  emptyPair,
  startingDevice,
  undesiredPair,
} from '../../src/controller/attachment-record.js';
import { type ControllerPair, isAttached, isDesired } from '../../src/controller/types.js';
import { NodeName, Seq, UniquePodName, UniqueVolumeName } from '../../src/ids.js';
import type { ResolvedVolume } from '../../src/operations/volume-spec.js';
import { attachmentPairs } from '../../src/kubelet/pairs.js';
import { keptBytesEach } from '../support/heap.js';

const count = 20_000;
const volume = UniqueVolumeName('fake.disk^disk-1');
const node = NodeName('node-1');
const spec = { volume, traits: { pluginName: 'fake.disk' } } as unknown as ResolvedVolume;
const pod = UniquePodName('uid-1');
const devicePath = '/dev/disk/by-id/fake-disk-1';

/** The context an attach leaves (each a fresh object, as each step makes one). */
const attached = (): AttachmentContext => ({
  ...attachmentPairs.initial.context,
  devicePath,
  callFrom: null,
});

const attachedState = () => ({ value: 'attached.deviceUnmounted', context: attached() });

/** A pair a pod wants, attached. */
const both = (seq = Seq(2)) =>
  attachmentOf(desiredOf(emptyPair(volume, node), pod, spec), attachedState(), seq, spec);

test("a pair record steps as its machine state and keeps the step's context and its desire", () => {
  const record = desiredOf(emptyPair(volume, node), pod, spec);
  assert.equal(record.value, 'detached', 'a pair not attached is in the initial state');
  assert.ok(isDesired(record) && !isAttached(record));
  const attaching = attachmentPairs.transition(attachmentState(record), { type: 'ATTACH_START' });
  assert.ok(attaching !== undefined, 'the machine accepts an attach from detached');
  const started = attachmentOf(record, attaching, Seq(2), spec);
  const done = attachmentPairs.transition(attachmentState(started), {
    type: 'ATTACH_OK',
    devicePath,
  });
  assert.ok(done !== undefined, 'and its success');
  const next = attachmentOf(started, done, Seq(2), spec);
  assert.ok(next.value.startsWith('attached'), next.value);
  assert.equal(next.devicePath, devicePath, 'the context stepped is the record own');
  assert.deepEqual(attachmentState(next), done, 'the state read back is the one stepped');
  assert.deepEqual(
    {
      volume: next.volume,
      node: next.node,
      attachedSpec: next.attachedSpec,
      desiredSpec: next.desiredSpec,
      pods: next.pods,
      seq: next.seq,
    },
    { volume, node, attachedSpec: spec, desiredSpec: spec, pods: pod, seq: 2 },
  );
});

test('a pair keeps the spec it was first attached with; its desire comes and goes beside it', () => {
  const other = { ...spec } as ResolvedVolume;
  const a = both();
  const again = attachmentOf(a, attachedState(), Seq(3), other);
  assert.equal(again.attachedSpec, spec, 'attached with the first spec');
  const unwanted = undesiredPair({ ...a, multiAttachErrorReported: true });
  assert.ok(unwanted !== undefined && isAttached(unwanted) && !isDesired(unwanted));
  assert.equal(unwanted.desiredSpec, null);
  assert.equal(unwanted.multiAttachErrorReported, false, 'the report goes with the desire');
  assert.equal(unwanted.value, a.value, 'the attachment stays');
  const wanted = desiredOf(unwanted, pod, other);
  assert.equal(wanted.desiredSpec, other, "desired again with its new pod's spec");
  assert.equal(wanted.attachedSpec, spec);
  const detached = detachedPair({ ...wanted, detachRequestedAtMs: 5 });
  assert.ok(detached !== undefined && !isAttached(detached));
  assert.deepEqual(
    {
      value: detached.value,
      seq: detached.seq,
      at: detached.detachRequestedAtMs,
      device: detached.device,
    },
    { value: 'detached', seq: 0, at: null, device: startingDevice },
    'detached: the machine state a pair not attached has, whatever it was',
  );
  assert.equal(detached.pods, pod, 'the desire stays');
  assert.equal(undesiredPair(detached), undefined, 'neither desired nor attached: it goes');
  assert.equal(detachedPair(unwanted), undefined);
});

test('a pair desired and attached is one record in one map entry: no desired entry of its own', () => {
  const keys = Array.from({ length: count }, (_, i) => `fake.disk^disk-${i}@node-1`);
  const measure = () =>
    keptBytesEach(() => [new Map(keys.map((key, i) => [key, both(Seq(i))]))]) / count;
  // The shape before: a desired entry (its key, six fields) and an attachment (nine fields)
  // keyed by the same string in two maps.
  const before = () =>
    (keptBytesEach(() => {
      const dsw = new Map();
      const attachments = new Map();
      keys.forEach((key, i) => {
        dsw.set(key, { key, volume, node, spec, pods: pod, multiAttachErrorReported: false });
        const a = both(Seq(i));
        attachments.set(key, {
          volume,
          node,
          spec,
          value: a.value,
          devicePath: a.devicePath,
          callFrom: a.callFrom,
          device: a.device,
          detachRequestedAtMs: null,
          seq: a.seq,
        });
      });
      return [dsw, attachments];
    }) *
      2) /
    count;
  measure(); // a first round grows what the measured ones would be charged for
  const one = measure();
  const two = before();
  // 120 bytes (twelve fields) and an entry of the map (~46 at this size), 166 measured,
  // against 72 + 96 and two entries before, 260: the bound leaves room for noise only.
  assert.ok(one <= 200, `a pair keeps ${Math.round(one)} bytes with its map entry`);
  assert.ok(two > 230, `the old shape kept ${Math.round(two)} bytes (the bound tells them apart)`);
});

test('every pair record has the fields of the one the fold makes, in its order', () => {
  const keys = (a: ControllerPair) => Object.keys(a).join(',');
  const made = emptyPair(volume, node);
  const desired = desiredOf(made, pod, spec);
  const stepped = attachmentOf(desired, attachedState(), Seq(2), spec);
  for (const record of [desired, stepped, undesiredPair(stepped)!, detachedPair(stepped)!])
    assert.equal(keys(record), keys(made));
});

test("the device fields are one shared object while they are as they start, else the step's", () => {
  const made = emptyPair(volume, node);
  assert.equal(made.device, startingDevice);
  assert.ok(Object.isFrozen(startingDevice), 'no record can change it');
  const resized = { value: 'attached.deviceUnmounted', context: { ...attached(), sizeBytes: 5 } };
  const own = attachmentOf(made, resized, Seq(2), spec);
  assert.notEqual(own.device, startingDevice);
  assert.equal(attachmentState(own).context.sizeBytes, 5);
  assert.equal(attachmentOf(own, resized, Seq(3), spec).device, own.device, 'kept while equal');
  assert.equal(attachmentOf(own, attachedState(), Seq(4), spec).device, startingDevice);
  assert.equal(deviceOf({ ...startingDevice }), startingDevice);
});
