/**
 * An attachment as the controller keeps it (src/controller/attachment-record.ts): one
 * record that is its machine state (the context's fields its own, the device mount's in one
 * object shared while they are as they start), where a record, its `{ value, context }`
 * and the context were three objects.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AttachmentContext } from '../../machines/index.js';
import {
  attachmentOf,
  attachmentState,
  deviceOf,
  startingDevice,
} from '../../src/controller/attachment-record.js';
import type { ControllerAttachment } from '../../src/controller/types.js';
import { NodeName, Seq, UniqueVolumeName } from '../../src/ids.js';
import type { ResolvedVolume } from '../../src/operations/volume-spec.js';
import { attachmentPairs } from '../../src/world/pairs.js';
import { keptBytesEach } from '../support/heap.js';

const count = 20_000;
const volume = UniqueVolumeName('fake.disk^disk-1');
const node = NodeName('node-1');
const spec = { volume, traits: { pluginName: 'fake.disk' } } as unknown as ResolvedVolume;
const pair = { volume, node, spec, detachRequestedAtMs: null };
const devicePath = '/dev/disk/by-id/fake-disk-1';

/** The context an attach leaves (each a fresh object, as each step makes one). */
const attached = (): AttachmentContext => ({
  ...attachmentPairs.initial.context,
  devicePath,
  callFrom: null,
});

test("an attachment record steps as its machine state and keeps the step's context", () => {
  const record = attachmentOf(pair, attachmentPairs.initial, Seq(1));
  assert.equal(record.value, 'detached');
  const attaching = attachmentPairs.transition(attachmentState(record), { type: 'ATTACH_START' });
  assert.ok(attaching !== undefined, 'the machine accepts an attach from detached');
  const started = attachmentOf(record, attaching, Seq(2));
  const done = attachmentPairs.transition(attachmentState(started), {
    type: 'ATTACH_OK',
    devicePath,
  });
  assert.ok(done !== undefined, 'and its success');
  const next = attachmentOf(started, done, Seq(2));
  assert.ok(next.value.startsWith('attached'), next.value);
  assert.equal(next.devicePath, devicePath, 'the context stepped is the record own');
  assert.deepEqual(attachmentState(next), done, 'the state read back is the one stepped');
  assert.deepEqual(
    { volume: next.volume, node: next.node, spec: next.spec, seq: next.seq },
    { volume, node, spec, seq: 2 },
  );
});

test('an attachment record is one object: no state or context of its own', () => {
  const measure = () =>
    keptBytesEach(() =>
      Array.from({ length: count }, (_, i) =>
        attachmentOf(pair, { value: 'attached.deviceUnmounted', context: attached() }, Seq(i)),
      ),
    );
  // The shape before: a record of seven fields holding `{ value, context }` and the context.
  const before = () =>
    keptBytesEach(() =>
      Array.from({ length: count }, (_, i) => ({
        volume,
        node,
        pluginName: spec.traits.pluginName,
        spec,
        state: { value: 'attached.deviceUnmounted', context: attached() },
        detachRequestedAtMs: null,
        seq: i,
      })),
    );
  measure(); // a first round grows what the measured ones would be charged for
  const flat = measure();
  const three = before();
  // 96 bytes (nine fields) against 80 + 40 + 72 = 192 before, and 8 a slot of the array.
  assert.ok(flat <= 115, `an attachment record keeps ${Math.round(flat)} bytes`);
  assert.ok(
    three > 180,
    `the old shape kept ${Math.round(three)} bytes (the bound tells them apart)`,
  );
});

test('every attachment record has the fields of the one the fold makes, in its order', () => {
  const keys = (a: ControllerAttachment) => Object.keys(a).join(',');
  const made = attachmentOf(pair, attachmentPairs.initial, Seq(1));
  const stepped = attachmentOf(
    made,
    { value: 'attached.deviceUnmounted', context: attached() },
    Seq(2),
  );
  assert.equal(keys(stepped), keys(made));
});

test("the device fields are one shared object while they are as they start, else the step's", () => {
  const made = attachmentOf(pair, attachmentPairs.initial, Seq(1));
  assert.equal(made.device, startingDevice);
  assert.ok(Object.isFrozen(startingDevice), 'no record can change it');
  const resized = { value: 'attached.deviceUnmounted', context: { ...attached(), sizeBytes: 5 } };
  const own = attachmentOf(made, resized, Seq(2));
  assert.notEqual(own.device, startingDevice);
  assert.equal(attachmentState(own).context.sizeBytes, 5);
  assert.equal(attachmentOf(own, resized, Seq(3)).device, own.device, 'kept while equal');
  assert.equal(
    attachmentOf(own, { ...resized, context: attached() }, Seq(4)).device,
    startingDevice,
  );
  assert.equal(deviceOf({ ...startingDevice }), startingDevice);
});
