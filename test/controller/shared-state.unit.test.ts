/**
 * Attachment states shared between attachments whose states are equal
 * (src/controller/shared-state.ts): equal ones are one object, unequal ones stay their own,
 * and the one shared cannot be changed through any record that holds it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AttachmentContext } from '../../machines/index.js';
import { sharedAttachmentState } from '../../src/controller/shared-state.js';

const context = (devicePath: string): AttachmentContext => ({
  devicePath,
  deviceMountPath: '',
  sizeBytes: 0,
  inUseExpansionError: false,
  callFrom: null,
  deviceFrom: null,
});

test('shared attachment state: equal states are one object, frozen; others stay their own', () => {
  const value = 'attached.deviceUnmounted.shared-state-test';
  const first = sharedAttachmentState({ value, context: context('{}') });
  const second = sharedAttachmentState({ value, context: context('{}') });
  assert.equal(second, first, 'an equal state is the one kept');
  assert.deepEqual(first, { value, context: context('{}') });
  assert.ok(Object.isFrozen(first) && Object.isFrozen(first.context), 'kept frozen');
  const other = { value, context: context('/dev/xvdf') };
  assert.equal(sharedAttachmentState(other), other, 'another device path: its own');
  const moved = { value, context: { ...context('{}'), sizeBytes: 1 } };
  assert.equal(sharedAttachmentState(moved), moved, 'any other field: its own');
  const elsewhere = { value: `${value}.other`, context: context('{}') };
  assert.notEqual(sharedAttachmentState(elsewhere), first, 'another state value: another kept');
});
