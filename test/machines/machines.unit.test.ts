import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type AnyStateMachine, initialTransition, transition } from 'xstate';
import {
  type AttachmentContext,
  type AttachmentEvent,
  attachmentMachine,
  type MountContext,
  type MountEvent,
  mountMachine,
} from '../../machines/index.js';
import {
  compileMachine,
  fromStateValue,
  type PairState,
  toStateValue,
} from '../../src/operations/compiled-machine.js';

const errorKinds = ['transient', 'uncertain', 'final'] as const;

const attachmentEvents: AttachmentEvent[] = [
  { type: 'ATTACH_START' },
  { type: 'ATTACH_OK', devicePath: '/dev/loop7' },
  { type: 'ATTACH_FAIL', uncertain: true },
  { type: 'ATTACH_FAIL', uncertain: false },
  { type: 'VERIFY_OK', devicePath: '/dev/sdb' },
  { type: 'DETACH_START' },
  { type: 'DETACH_OK' },
  { type: 'DETACH_FAIL', uncertain: true },
  { type: 'DETACH_FAIL', uncertain: false },
  { type: 'FORGET' },
  { type: 'MOUNT_DEVICE_START', deviceMountPath: '/g/disk-1' },
  { type: 'MOUNT_DEVICE_OK', deviceMountPath: '/g/disk-1', devicePath: '' },
  { type: 'MOUNT_DEVICE_OK', deviceMountPath: '/g/disk-1', devicePath: '/dev/loop9' },
  ...errorKinds.map((errorKind) => ({ type: 'MOUNT_DEVICE_FAIL' as const, errorKind })),
  { type: 'UNMOUNT_DEVICE_START' },
  { type: 'UNMOUNT_DEVICE_OK' },
  { type: 'UNMOUNT_DEVICE_FAIL' },
  { type: 'RESIZED', sizeBytes: 2048 },
  { type: 'CLAIM_SIZE_KNOWN', sizeBytes: 1024 },
  { type: 'EXPANSION_IN_USE_ERROR' },
  { type: 'CRASH' },
  { type: 'OBSERVED_DETACHED' },
  { type: 'OBSERVED_DEVICE_UNMOUNTED' },
  { type: 'DEVICE_MAY_EXIST' },
];

const mountEvents: MountEvent[] = [
  { type: 'SETUP_START', outerVolumeSpecName: 'data', volumeGidValue: '' },
  { type: 'SETUP_START', outerVolumeSpecName: 'other', volumeGidValue: '1234' },
  { type: 'SETUP_OK' },
  ...errorKinds.map((errorKind) => ({ type: 'SETUP_FAIL' as const, errorKind })),
  { type: 'TEARDOWN_START' },
  { type: 'TEARDOWN_OK' },
  { type: 'TEARDOWN_FAIL' },
  { type: 'EXPAND_IN_MOUNT_FAIL' },
  { type: 'REMOUNT_REQUIRED' },
  { type: 'CRASH' },
  { type: 'OBSERVED_UNMOUNTED' },
];

/**
 * Breadth-first over every (state, context) reachable with the sample events, applying
 * every event in every one: the compiled table must give xstate's answer each time,
 * including "not accepted".
 */
function walkBoth<C extends object, E extends { type: string }>(
  machine: AnyStateMachine,
  events: readonly E[],
) {
  const compiled = compileMachine<C, E>(machine);
  const [initialSnapshot] = initialTransition(machine);
  const initial: PairState<C> = {
    value: fromStateValue(initialSnapshot.value),
    context: initialSnapshot.context as C,
  };
  assert.deepEqual(compiled.initial, initial, 'initial state');
  const seen = new Map<string, PairState<C>>();
  const queue: PairState<C>[] = [initial];
  let checks = 0;
  const visitedValues = new Set<string>();
  while (queue.length > 0) {
    const state = queue.shift()!;
    const key = JSON.stringify(state);
    if (seen.has(key)) continue;
    seen.set(key, state);
    visitedValues.add(state.value);
    const snapshot = machine.resolveState({
      value: toStateValue(state.value),
      context: state.context,
    });
    for (const event of events) {
      const fast = compiled.transition(state, event);
      const accepted = snapshot.can(event);
      assert.equal(fast !== undefined, accepted, `${state.value} can ${JSON.stringify(event)}`);
      checks++;
      if (!accepted || fast === undefined) continue;
      const [next] = transition(machine, snapshot, event);
      const slow = { value: fromStateValue(next.value), context: next.context };
      assert.deepEqual(fast, slow, `${state.value} + ${JSON.stringify(event)}`);
      queue.push(fast);
    }
  }
  return { compiled, states: seen.size, checks, visitedValues };
}

test('machines: attachment: compiled fast path equals xstate transition() on every reachable state', () => {
  const { compiled, checks, visitedValues } = walkBoth<AttachmentContext, AttachmentEvent>(
    attachmentMachine,
    attachmentEvents,
  );
  assert.deepEqual(
    [...visitedValues].sort(),
    [...compiled.atomicStates].sort(),
    'every state reached',
  );
  assert.ok(checks > 500, `walked ${checks} transitions`);
});

test('machines: mount: compiled fast path equals xstate transition() on every reachable state', () => {
  const { compiled, checks, visitedValues } = walkBoth<MountContext, MountEvent>(
    mountMachine,
    mountEvents,
  );
  assert.deepEqual(
    [...visitedValues].sort(),
    [...compiled.atomicStates].sort(),
    'every state reached',
  );
  assert.ok(checks > 100, `walked ${checks} transitions`);
});

test('machines: mount: setUp failure truth table of behaviour K4.8 markVolumeErrorState', () => {
  const compiled = compileMachine<MountContext, MountEvent>(mountMachine);
  const start = { type: 'SETUP_START', outerVolumeSpecName: 'data', volumeGidValue: '' } as const;
  const after = (from: string, errorKind: (typeof errorKinds)[number]) => {
    const base = { value: from, context: compiled.initial.context };
    const mounting = compiled.transition(base, start);
    assert.ok(mounting, `${from} accepts SETUP_START`);
    return compiled.transition(mounting, { type: 'SETUP_FAIL', errorKind })?.value;
  };
  assert.equal(after('unmounted', 'transient'), 'unmounted');
  assert.equal(after('unmounted', 'uncertain'), 'mountUncertain');
  assert.equal(after('unmounted', 'final'), 'unmounted');
  assert.equal(after('mountUncertain', 'transient'), 'mountUncertain');
  assert.equal(after('mountUncertain', 'uncertain'), 'mountUncertain');
  assert.equal(after('mountUncertain', 'final'), 'unmounted');
  for (const kind of errorKinds) assert.equal(after('mounted', kind), 'mounted', `remount ${kind}`);
});

test('machines: attachment: device mount failure truth table of behaviour K4.8 markDeviceErrorState', () => {
  const compiled = compileMachine<AttachmentContext, AttachmentEvent>(attachmentMachine);
  const after = (from: string, errorKind: (typeof errorKinds)[number]) => {
    const base = { value: from, context: compiled.initial.context };
    const mounting = compiled.transition(base, {
      type: 'MOUNT_DEVICE_START',
      deviceMountPath: '/g',
    });
    assert.ok(mounting);
    return compiled.transition(mounting, { type: 'MOUNT_DEVICE_FAIL', errorKind })?.value;
  };
  assert.equal(after('attached.deviceUnmounted', 'transient'), 'attached.deviceUnmounted');
  assert.equal(after('attached.deviceUnmounted', 'uncertain'), 'attached.deviceUncertain');
  assert.equal(after('attached.deviceUnmounted', 'final'), 'attached.deviceUnmounted');
  assert.equal(after('attached.deviceUncertain', 'transient'), 'attached.deviceUncertain');
  assert.equal(after('attached.deviceUncertain', 'uncertain'), 'attached.deviceUncertain');
  assert.equal(after('attached.deviceUncertain', 'final'), 'attached.deviceUnmounted');
});

test('machines: attachment: a crash turns every call in flight uncertain', () => {
  const compiled = compileMachine<AttachmentContext, AttachmentEvent>(attachmentMachine);
  // CRASH is an observation: a state that does not take it is simply unaffected.
  const crash = (value: string) =>
    compiled.transition({ value, context: compiled.initial.context }, { type: 'CRASH' })?.value ??
    value;
  assert.equal(crash('attaching'), 'attachUncertain');
  assert.equal(crash('detaching'), 'attachUncertain');
  assert.equal(crash('attached.deviceMounting'), 'attached.deviceUncertain');
  assert.equal(crash('attached.deviceUnmounting'), 'attached.deviceUncertain');
  assert.equal(crash('attached.deviceMounted'), 'attached.deviceMounted');
  assert.equal(crash('detached'), 'detached');
});

test('machines: attachment: detach is refused while the device may be mounted', () => {
  const compiled = compileMachine<AttachmentContext, AttachmentEvent>(attachmentMachine);
  for (const value of [
    'attached.deviceMounted',
    'attached.deviceUncertain',
    'attached.deviceMounting',
  ]) {
    const next = compiled.transition(
      { value, context: compiled.initial.context },
      { type: 'DETACH_START' },
    );
    assert.equal(next, undefined, `${value} must not accept DETACH_START`);
  }
});
