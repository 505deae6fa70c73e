/**
 * The `mount` pair machine: one volume × one pod (behaviour K1.2 MountedPodRec).
 *
 * `mounted` is the pod's volume set up in its volume directory (or, for Block volumes,
 * mapped into its device directory). `mountUncertain` means "may be mounted": it is torn
 * down like a mounted one, and retried as a mount while desired (behaviour K8.1 S4, S5).
 *
 * No delayed transitions and no side effects: the fold drives it through the pure API.
 */
import { assign, setup } from 'xstate';
import type { ErrorKind } from './errors.js';

export interface MountContext {
  /** pod.spec.volumes[i].name through which the pod uses the volume. */
  outerVolumeSpecName: string;
  /** PV annotation pv.beta.kubernetes.io/gid, '' when absent. */
  volumeGidValue: string;
  /** Set for plugins that RequiresRemount when the pod is re-processed (behaviour K4.9). */
  remountRequired: boolean;
  /** Where a setUp started from: a failure returns there (behaviour K4.8 markVolumeErrorState). */
  mountFrom: 'unmounted' | 'mounted' | 'mountUncertain' | null;
}

export type MountEvent =
  | { type: 'SETUP_START'; outerVolumeSpecName: string; volumeGidValue: string }
  | { type: 'SETUP_OK' }
  | { type: 'SETUP_FAIL'; errorKind: ErrorKind }
  | { type: 'TEARDOWN_START' }
  | { type: 'TEARDOWN_OK' }
  | { type: 'TEARDOWN_FAIL' }
  /** Expansion at mount failed after SetUp: mounted, not to be used (behaviour K4.7 step 12). */
  | { type: 'EXPAND_IN_MOUNT_FAIL' }
  | { type: 'REMOUNT_REQUIRED' }
  | { type: 'CRASH' }
  /** A host check found nothing set up: an uncertain mount is settled as unmounted. */
  | { type: 'OBSERVED_UNMOUNTED' };

export const mountInitialContext: MountContext = {
  outerVolumeSpecName: '',
  volumeGidValue: '',
  remountRequired: false,
  mountFrom: null,
};

export const mountMachine = setup({
  types: {
    context: {} as MountContext,
    events: {} as MountEvent,
  },
  guards: {
    keepUncertain: ({ context, event }) =>
      context.mountFrom === 'mountUncertain' &&
      event.type === 'SETUP_FAIL' &&
      event.errorKind !== 'final',
    failUncertain: ({ event }) => event.type === 'SETUP_FAIL' && event.errorKind === 'uncertain',
    fromMounted: ({ context }) => context.mountFrom === 'mounted',
  },
  actions: {
    startSetUp: assign(({ event }) =>
      event.type === 'SETUP_START'
        ? { outerVolumeSpecName: event.outerVolumeSpecName, volumeGidValue: event.volumeGidValue }
        : {},
    ),
    fromUnmounted: assign({ mountFrom: 'unmounted' }),
    fromMounted: assign({ mountFrom: 'mounted' }),
    fromUncertain: assign({ mountFrom: 'mountUncertain' }),
    // behaviour K2.1 AddPodToVolume: remountRequired cleared on every successful mount.
    setUpDone: assign({ remountRequired: false, mountFrom: null }),
    clearFrom: assign({ mountFrom: null }),
    requireRemount: assign({ remountRequired: true }),
  },
}).createMachine({
  id: 'mount',
  initial: 'unmounted',
  context: mountInitialContext,
  states: {
    unmounted: {
      on: {
        SETUP_START: { target: 'mounting', actions: ['fromUnmounted', 'startSetUp'] },
      },
    },
    // behaviour K4.7 step 11: SetUp in flight.
    mounting: {
      on: {
        SETUP_OK: { target: 'mounted', actions: 'setUpDone' },
        // behaviour K4.8 markVolumeErrorState: transient changes nothing; uncertain only
        // NotMounted → Uncertain; final only Uncertain → NotMounted; Mounted never drops.
        SETUP_FAIL: [
          { guard: 'fromMounted', target: 'mounted', actions: 'clearFrom' },
          { guard: 'keepUncertain', target: 'mountUncertain', actions: 'clearFrom' },
          { guard: 'failUncertain', target: 'mountUncertain', actions: 'clearFrom' },
          { target: 'unmounted', actions: 'clearFrom' },
        ],
        CRASH: { target: 'mountUncertain', actions: 'clearFrom' },
      },
    },
    mounted: {
      on: {
        SETUP_START: { target: 'mounting', actions: ['fromMounted', 'startSetUp'] },
        TEARDOWN_START: { target: 'unmounting' },
        EXPAND_IN_MOUNT_FAIL: { target: 'mountUncertain' },
        REMOUNT_REQUIRED: { actions: 'requireRemount' },
      },
    },
    // behaviour K4.11 TearDown in flight.
    unmounting: {
      on: {
        TEARDOWN_OK: { target: 'unmounted' },
        TEARDOWN_FAIL: { target: 'mountUncertain' },
        CRASH: { target: 'mountUncertain' },
      },
    },
    mountUncertain: {
      on: {
        SETUP_START: { target: 'mounting', actions: ['fromUncertain', 'startSetUp'] },
        TEARDOWN_START: { target: 'unmounting' },
        OBSERVED_UNMOUNTED: { target: 'unmounted' },
      },
    },
  },
});
