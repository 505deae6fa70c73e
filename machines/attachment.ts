/**
 * The `attachment` pair machine: one volume × one node.
 *
 * It is the actual state of world's AttachedVolume record (behaviour K1.2) as a statechart:
 * whether the volume is attached to the node and, nested inside `attached`, whether the
 * node-global device mount (deviceMountPath) exists. Uncertain states mean "may exist":
 * the planner never detaches over them and retries or tears them down (docs/design.md).
 *
 * No delayed transitions and no side effects: the fold drives it through the pure API.
 */
import { assign, setup } from 'xstate';
import type { ErrorKind } from './errors.js';

export interface AttachmentContext {
  /** Where the volume appears on the node (behaviour K0.4); sticky (behaviour K8.1 S10). */
  devicePath: string;
  /** The global mount path of the device; '' when the device is not mounted. */
  deviceMountPath: string;
  /** Actual size known to the node (ASW persistentVolumeSize); 0 = unknown. */
  sizeBytes: number;
  /** NodeExpand answered FailedPrecondition: no more expansion here (behaviour K4.13). */
  inUseExpansionError: boolean;
  /** Where an attach/detach call started from, so a failure that changed nothing returns there. */
  callFrom: 'detached' | 'attached' | 'attachUncertain' | 'attachDeviceUncertain' | null;
  /** Where a device mount started from, likewise (behaviour K4.8 markDeviceErrorState). */
  deviceFrom: 'deviceUnmounted' | 'deviceUncertain' | null;
}

export type AttachmentEvent =
  | { type: 'ATTACH_START' }
  | { type: 'ATTACH_OK'; devicePath: string }
  /** `uncertain`: the attach may have taken effect (uncertain error, or controller mode). */
  | { type: 'ATTACH_FAIL'; uncertain: boolean }
  /** VerifyControllerAttachedVolume succeeded (behaviour K4.6), or a non-attachable volume. */
  | { type: 'VERIFY_OK'; devicePath: string }
  | { type: 'DETACH_START' }
  | { type: 'DETACH_OK' }
  | { type: 'DETACH_FAIL'; uncertain: boolean }
  /** MarkVolumeAsDetached, no plugin call (behaviour K3.6: controller mode, non-attachable). */
  | { type: 'FORGET' }
  | { type: 'MOUNT_DEVICE_START'; deviceMountPath: string }
  | { type: 'MOUNT_DEVICE_OK'; deviceMountPath: string; devicePath: string }
  | { type: 'MOUNT_DEVICE_FAIL'; errorKind: ErrorKind }
  | { type: 'UNMOUNT_DEVICE_START' }
  | { type: 'UNMOUNT_DEVICE_OK' }
  | { type: 'UNMOUNT_DEVICE_FAIL' }
  | { type: 'RESIZED'; sizeBytes: number }
  | { type: 'CLAIM_SIZE_KNOWN'; sizeBytes: number }
  | { type: 'EXPANSION_IN_USE_ERROR' }
  /** The engine restarted: calls in flight were cut off (docs/design.md crash rule). */
  | { type: 'CRASH' }
  /** A host check found nothing attached: an uncertain attachment is settled as detached. */
  | { type: 'OBSERVED_DETACHED' }
  /** A host check found the device not mounted: an uncertain device mount is settled. */
  | { type: 'OBSERVED_DEVICE_UNMOUNTED' }
  /**
   * The restart found a mount intent open while the attach's answer was lost: a mount may
   * have run, so the device may be mounted too (docs/reliability.md, "Durable points").
   */
  | { type: 'DEVICE_MAY_EXIST' };

export const attachmentInitialContext: AttachmentContext = {
  devicePath: '',
  deviceMountPath: '',
  sizeBytes: 0,
  inUseExpansionError: false,
  callFrom: null,
  deviceFrom: null,
};

export const attachmentMachine = setup({
  types: {
    context: {} as AttachmentContext,
    events: {} as AttachmentEvent,
  },
  guards: {
    failedUncertain: ({ event }) =>
      (event.type === 'ATTACH_FAIL' || event.type === 'DETACH_FAIL') && event.uncertain,
    startedFromUncertain: ({ context }) => context.callFrom === 'attachUncertain',
    startedFromDeviceUncertain: ({ context }) => context.callFrom === 'attachDeviceUncertain',
    startedFromAttached: ({ context }) => context.callFrom === 'attached',
    deviceFailUncertain: ({ event }) =>
      event.type === 'MOUNT_DEVICE_FAIL' && event.errorKind === 'uncertain',
    deviceFailFinal: ({ event }) =>
      event.type === 'MOUNT_DEVICE_FAIL' && event.errorKind === 'final',
    deviceStartedFromUncertain: ({ context }) => context.deviceFrom === 'deviceUncertain',
  },
  actions: {
    fromDetached: assign({ callFrom: 'detached' }),
    fromAttached: assign({ callFrom: 'attached' }),
    fromAttachUncertain: assign({ callFrom: 'attachUncertain' }),
    fromAttachDeviceUncertain: assign({ callFrom: 'attachDeviceUncertain' }),
    clearFrom: assign({ callFrom: null }),
    setDevicePath: assign(({ event }) =>
      event.type === 'ATTACH_OK' || event.type === 'VERIFY_OK'
        ? { devicePath: event.devicePath, callFrom: null }
        : {},
    ),
    fromDeviceUnmounted: assign({ deviceFrom: 'deviceUnmounted' }),
    fromDeviceUncertain: assign({ deviceFrom: 'deviceUncertain' }),
    startDeviceMount: assign(({ event }) =>
      event.type === 'MOUNT_DEVICE_START' ? { deviceMountPath: event.deviceMountPath } : {},
    ),
    // behaviour K2.1 SetDeviceMountState: devicePath only replaced when the new one is non-empty.
    deviceMounted: assign(({ context, event }) =>
      event.type === 'MOUNT_DEVICE_OK'
        ? {
            deviceMountPath: event.deviceMountPath,
            devicePath: event.devicePath === '' ? context.devicePath : event.devicePath,
            deviceFrom: null,
          }
        : {},
    ),
    // behaviour K2.1 MarkDeviceAsUnmounted: deviceMountPath cleared, devicePath kept.
    deviceUnmounted: assign({ deviceMountPath: '', deviceFrom: null }),
    clearDeviceFrom: assign({ deviceFrom: null }),
    setSize: assign(({ event }) =>
      event.type === 'RESIZED' ? { sizeBytes: event.sizeBytes } : {},
    ),
    // behaviour K2.1 InitializeClaimSize: only when still unknown.
    initSize: assign(({ context, event }) =>
      event.type === 'CLAIM_SIZE_KNOWN' && context.sizeBytes === 0
        ? { sizeBytes: event.sizeBytes }
        : {},
    ),
    markInUseExpansionError: assign({ inUseExpansionError: true }),
  },
}).createMachine({
  id: 'attachment',
  initial: 'detached',
  context: attachmentInitialContext,
  states: {
    detached: {
      on: {
        ATTACH_START: { target: 'attaching', actions: 'fromDetached' },
        VERIFY_OK: { target: 'attached', actions: 'setDevicePath' },
      },
    },
    // behaviour K4.3 AttachVolume: the plugin's Attach call is in flight.
    attaching: {
      on: {
        ATTACH_OK: [
          // Attached again, but the device a lost mount may have mounted is still uncertain.
          {
            guard: 'startedFromDeviceUncertain',
            target: '#attachment.attached.deviceUncertain',
            actions: 'setDevicePath',
          },
          { target: 'attached', actions: 'setDevicePath' },
        ],
        ATTACH_FAIL: [
          {
            guard: 'startedFromDeviceUncertain',
            target: 'attachDeviceUncertain',
            actions: 'clearFrom',
          },
          { guard: 'failedUncertain', target: 'attachUncertain', actions: 'clearFrom' },
          { guard: 'startedFromUncertain', target: 'attachUncertain', actions: 'clearFrom' },
          { target: 'detached', actions: 'clearFrom' },
        ],
        CRASH: [
          {
            guard: 'startedFromDeviceUncertain',
            target: 'attachDeviceUncertain',
            actions: 'clearFrom',
          },
          { target: 'attachUncertain', actions: 'clearFrom' },
        ],
      },
    },
    // The attach or detach may have taken effect: retried while desired, detached when not.
    attachUncertain: {
      on: {
        ATTACH_START: { target: 'attaching', actions: 'fromAttachUncertain' },
        VERIFY_OK: { target: 'attached', actions: 'setDevicePath' },
        DETACH_START: { target: 'detaching', actions: 'fromAttachUncertain' },
        FORGET: { target: 'detached' },
        OBSERVED_DETACHED: { target: 'detached' },
        DEVICE_MAY_EXIST: { target: 'attachDeviceUncertain' },
      },
    },
    // The attach may have taken effect and an intended mount may have mounted the device
    // (a crash lost their answers): attached again while desired, the device then
    // uncertain; unmounted first when not, never detached under it.
    attachDeviceUncertain: {
      on: {
        ATTACH_START: { target: 'attaching', actions: 'fromAttachDeviceUncertain' },
        UNMOUNT_DEVICE_START: { target: '#attachment.attached.deviceUnmounting' },
        OBSERVED_DETACHED: { target: 'detached' },
        OBSERVED_DEVICE_UNMOUNTED: { target: 'attachUncertain' },
      },
    },
    attached: {
      initial: 'deviceUnmounted',
      on: {
        RESIZED: { actions: 'setSize' },
        CLAIM_SIZE_KNOWN: { actions: 'initSize' },
        EXPANSION_IN_USE_ERROR: { actions: 'markInUseExpansionError' },
      },
      states: {
        deviceUnmounted: {
          on: {
            MOUNT_DEVICE_START: {
              target: 'deviceMounting',
              actions: ['fromDeviceUnmounted', 'startDeviceMount'],
            },
            DETACH_START: { target: '#attachment.detaching', actions: 'fromAttached' },
            FORGET: { target: '#attachment.detached' },
            // The controller's periodic verify: storage reports it gone (never with a device mounted).
            OBSERVED_DETACHED: { target: '#attachment.detached' },
          },
        },
        // behaviour K4.7 step 9: MountDevice in flight.
        deviceMounting: {
          on: {
            MOUNT_DEVICE_OK: { target: 'deviceMounted', actions: 'deviceMounted' },
            // behaviour K4.8 markDeviceErrorState.
            MOUNT_DEVICE_FAIL: [
              {
                guard: 'deviceFailUncertain',
                target: 'deviceUncertain',
                actions: 'clearDeviceFrom',
              },
              { guard: 'deviceFailFinal', target: 'deviceUnmounted', actions: 'deviceUnmounted' },
              {
                guard: 'deviceStartedFromUncertain',
                target: 'deviceUncertain',
                actions: 'clearDeviceFrom',
              },
              { target: 'deviceUnmounted', actions: 'deviceUnmounted' },
            ],
            CRASH: { target: 'deviceUncertain', actions: 'clearDeviceFrom' },
          },
        },
        deviceMounted: {
          on: {
            UNMOUNT_DEVICE_START: { target: 'deviceUnmounting' },
          },
        },
        // behaviour K4.12 UnmountDevice in flight.
        deviceUnmounting: {
          on: {
            UNMOUNT_DEVICE_OK: { target: 'deviceUnmounted', actions: 'deviceUnmounted' },
            UNMOUNT_DEVICE_FAIL: { target: 'deviceUncertain' },
            CRASH: { target: 'deviceUncertain' },
          },
        },
        // The device may be mounted: new pods re-run MountDevice, unused ones unmount it.
        deviceUncertain: {
          on: {
            MOUNT_DEVICE_START: {
              target: 'deviceMounting',
              actions: ['fromDeviceUncertain', 'startDeviceMount'],
            },
            UNMOUNT_DEVICE_START: { target: 'deviceUnmounting' },
            OBSERVED_DEVICE_UNMOUNTED: { target: 'deviceUnmounted', actions: 'deviceUnmounted' },
          },
        },
      },
    },
    // behaviour K4.5 DetachVolume: the plugin's Detach call is in flight.
    detaching: {
      on: {
        DETACH_OK: { target: 'detached', actions: 'clearFrom' },
        DETACH_FAIL: [
          { guard: 'failedUncertain', target: 'attachUncertain', actions: 'clearFrom' },
          { guard: 'startedFromAttached', target: 'attached', actions: 'clearFrom' },
          { target: 'attachUncertain', actions: 'clearFrom' },
        ],
        CRASH: { target: 'attachUncertain', actions: 'clearFrom' },
      },
    },
  },
});
