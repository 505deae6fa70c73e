/**
 * The call table: for every call name, which machine event its start, its success and
 * its failure drive, on which pair, and what it leaves on a host (the fakes' pretend
 * host). One table for the kubelet fold, the controller fold and the fakes; it is typed
 * `satisfies Record<CallName, CallEffects>`, so a new call name does not compile until
 * the table says what it does.
 */
import type { AttachmentEvent, MountEvent } from '../../machines/index.js';
import type { CallName, EventOf, OperationStep } from '../events/index.js';
import type { RunningOp } from './types.js';

/** One step of a pair machine a call event drives. */
export type PairStep =
  | {
      readonly pair: 'attachment';
      readonly event: AttachmentEvent;
      /** May create the attachment from the operation's spec when it is missing. */
      readonly create: boolean;
      /** Ignored when the machine does not accept it (an observation, not a command). */
      readonly observation: boolean;
    }
  | {
      readonly pair: 'mount';
      readonly event: MountEvent;
      readonly create: boolean;
      readonly observation: boolean;
    };

/**
 * How a call's failure reads: the kubelet trusts a final error (nothing took effect);
 * the controller treats any failed attach or detach as uncertain (behaviour C3.8).
 */
export interface FailureReading {
  readonly uncertainOnAnyFailure: boolean;
}

type Effect<E> = (event: E, op: RunningOp, reading: FailureReading) => PairStep | null;

/** What a call that succeeded leaves on the host, and which set of the host it is in. */
export interface HostMark {
  readonly set: 'attached' | 'devicesMounted' | 'setUp';
  /** Success adds to the set (a final failure rolls it back) or deletes from it. */
  readonly ok: 'add' | 'delete';
}

export interface CallEffects {
  readonly started: Effect<EventOf<'CallStarted'>> | null;
  readonly succeeded: Effect<EventOf<'CallSucceeded'>> | null;
  readonly failed: Effect<EventOf<'CallFailed'>> | null;
  /** After success, the attachment learns the claim's size (behaviour K4.13). */
  readonly claimSizeAfterSuccess: boolean;
  readonly host: HostMark | null;
}

const attachment = (event: AttachmentEvent, create: boolean): PairStep => ({
  pair: 'attachment',
  event,
  create,
  observation: false,
});
const mount = (event: MountEvent, create: boolean, observation = false): PairStep => ({
  pair: 'mount',
  event,
  create,
  observation,
});

const none: CallEffects = {
  started: null,
  succeeded: null,
  failed: null,
  claimSizeAfterSuccess: false,
  host: null,
};

/** mountDevice and setUpDevice: a Block volume's device set-up is its device mount. */
const deviceMount: CallEffects = {
  started: (e) =>
    attachment({ type: 'MOUNT_DEVICE_START', deviceMountPath: e.deviceMountPath ?? '' }, false),
  succeeded: (e) =>
    attachment(
      {
        type: 'MOUNT_DEVICE_OK',
        deviceMountPath: e.deviceMountPath ?? '',
        devicePath: e.devicePath ?? '',
      },
      true,
    ),
  failed: (e) => attachment({ type: 'MOUNT_DEVICE_FAIL', errorKind: e.error.kind }, false),
  claimSizeAfterSuccess: false,
  host: { set: 'devicesMounted', ok: 'add' },
};

const deviceUnmount: CallEffects = {
  started: () => attachment({ type: 'UNMOUNT_DEVICE_START' }, false),
  succeeded: () => attachment({ type: 'UNMOUNT_DEVICE_OK' }, true),
  failed: () => attachment({ type: 'UNMOUNT_DEVICE_FAIL' }, false),
  claimSizeAfterSuccess: false,
  host: { set: 'devicesMounted', ok: 'delete' },
};

const setUp: CallEffects = {
  // A missing spec leaves the mount uncreatable: the fold names the operation.
  started: (_e, op) =>
    mount(
      {
        type: 'SETUP_START',
        outerVolumeSpecName: op.spec?.outerVolumeSpecName ?? '',
        volumeGidValue: op.spec?.traits.volumeGidValue ?? '',
      },
      op.spec !== null,
    ),
  succeeded: () => mount({ type: 'SETUP_OK' }, false),
  failed: (e) => mount({ type: 'SETUP_FAIL', errorKind: e.error.kind }, false),
  claimSizeAfterSuccess: false,
  host: { set: 'setUp', ok: 'add' },
};

const tearDown: CallEffects = {
  started: () => mount({ type: 'TEARDOWN_START' }, false),
  succeeded: () => mount({ type: 'TEARDOWN_OK' }, false),
  failed: () => mount({ type: 'TEARDOWN_FAIL' }, false),
  claimSizeAfterSuccess: false,
  host: { set: 'setUp', ok: 'delete' },
};

export const callTable = {
  attach: {
    started: () => attachment({ type: 'ATTACH_START' }, true),
    succeeded: (e) => attachment({ type: 'ATTACH_OK', devicePath: e.devicePath ?? '' }, true),
    // Kubelet attach mode: only an uncertain error may have attached (docs/scenarios.md).
    failed: (e, _op, reading) =>
      attachment(
        {
          type: 'ATTACH_FAIL',
          uncertain: reading.uncertainOnAnyFailure || e.error.kind === 'uncertain',
        },
        false,
      ),
    claimSizeAfterSuccess: true,
    host: { set: 'attached', ok: 'add' },
  },
  verifyControllerAttached: {
    ...none,
    succeeded: (e) => attachment({ type: 'VERIFY_OK', devicePath: e.devicePath ?? '' }, true),
    claimSizeAfterSuccess: true,
  },
  waitForAttach: none, // read-only (spec §4.7 step 7)
  volumesAreAttached: none,
  detach: {
    started: () => attachment({ type: 'DETACH_START' }, false),
    succeeded: () => attachment({ type: 'DETACH_OK' }, true),
    failed: (e, _op, reading) =>
      attachment(
        {
          type: 'DETACH_FAIL',
          uncertain: reading.uncertainOnAnyFailure || e.error.kind === 'uncertain',
        },
        false,
      ),
    claimSizeAfterSuccess: false,
    host: { set: 'attached', ok: 'delete' },
  },
  markDetached: { ...none, succeeded: () => attachment({ type: 'FORGET' }, true) },
  mountDevice: deviceMount,
  setUpDevice: deviceMount,
  unmountDevice: deviceUnmount,
  tearDownDevice: deviceUnmount,
  setUp,
  mapPodDevice: setUp,
  tearDown,
  unmapPodDevice: tearDown,
  nodeExpand: {
    ...none,
    succeeded: (e) => attachment({ type: 'RESIZED', sizeBytes: e.sizeBytes ?? 0 }, true),
    failed: (e, op) => {
      // FailedPrecondition: never retried on this node (behaviour K4.13).
      if (e.error.failedPrecondition === true)
        return attachment({ type: 'EXPANSION_IN_USE_ERROR' }, false);
      // behaviour K4.7 step 12: mounted, but not to be used until the expansion succeeds.
      return op.op === 'mount' && op.pod !== null
        ? mount({ type: 'EXPAND_IN_MOUNT_FAIL' }, false, true)
        : null;
    },
  },
  // Provisioning acts on no pair: the fold records its volumes and PVs (provisioning.ts).
  createVolume: none,
  deleteVolume: none,
  controllerExpand: none,
} as const satisfies Record<CallName, CallEffects>;

/** The table entry of a call (typed as the general shape). */
export function callEffects(call: CallName): CallEffects {
  return callTable[call];
}

/** The call each step of an operation makes (one call a step, in the steps' order). */
export const stepCalls = {
  waitForAttach: 'waitForAttach',
  mountDevice: 'mountDevice',
  setUp: 'setUp',
  expand: 'nodeExpand',
  setUpDevice: 'setUpDevice',
  map: 'mapPodDevice',
  tearDown: 'tearDown',
  unmap: 'unmapPodDevice',
  unmountDevice: 'unmountDevice',
  tearDownDevice: 'tearDownDevice',
} as const satisfies Record<OperationStep, CallName>;
