/**
 * The controller's pair record (types.ts ControllerPair: a desired attachment, an
 * attachment, or both in one record) as the fold changes it: the state the compiled
 * attachment machine reads, made from the record for each step, the record of the state a
 * step leaves, and the record as pods come to want it and cease to.
 */
import type { AttachmentContext } from '../../machines/index.js';
import { type NodeName, Seq, type UniquePodName, type UniqueVolumeName } from '../ids.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';
import type { PairState } from '../operations/compiled-machine.js';
import { attachmentPairs } from '../operations/pair-machines.js';
import { fail } from '../assert.js';
import type { OneOrMany } from '../desired/one-or-many.js';
import {
  type AttachmentDevice,
  type ControllerAttachment,
  type ControllerPair,
  type DesiredAttachment,
  isAttached,
  isDesired,
} from './types.js';

/** The device fields every attachment starts with (and the controller's keep). */
export const startingDevice: AttachmentDevice = Object.freeze({
  deviceMountPath: attachmentPairs.initial.context.deviceMountPath,
  sizeBytes: attachmentPairs.initial.context.sizeBytes,
  inUseExpansionError: attachmentPairs.initial.context.inUseExpansionError,
  deviceFrom: attachmentPairs.initial.context.deviceFrom,
});

function sameDevice(a: AttachmentDevice, c: AttachmentDevice): boolean {
  return (
    a.deviceMountPath === c.deviceMountPath &&
    a.sizeBytes === c.sizeBytes &&
    a.inUseExpansionError === c.inUseExpansionError &&
    a.deviceFrom === c.deviceFrom
  );
}

/** `c`'s device fields: `held` or the starting ones when equal, else an object of their own. */
export function deviceOf(c: AttachmentDevice, held = startingDevice): AttachmentDevice {
  if (sameDevice(held, c)) return held;
  if (sameDevice(startingDevice, c)) return startingDevice;
  const { deviceMountPath, sizeBytes, inUseExpansionError, deviceFrom } = c;
  return Object.freeze({ deviceMountPath, sizeBytes, inUseExpansionError, deviceFrom });
}

/**
 * The record's machine state, as the compiled machine steps it (a view made per step); a
 * pair not attached is in the initial state.
 */
export function attachmentState(
  a: Pick<ControllerPair, 'value' | 'devicePath' | 'callFrom' | 'device'>,
): PairState<AttachmentContext> {
  const d = a.device;
  return {
    value: a.value,
    context: {
      devicePath: a.devicePath,
      deviceMountPath: d.deviceMountPath,
      sizeBytes: d.sizeBytes,
      inUseExpansionError: d.inUseExpansionError,
      callFrom: a.callFrom,
      deviceFrom: d.deviceFrom,
    },
  };
}

/** The fields of a pair's desire. */
export type Desire = Pick<ControllerPair, 'pods' | 'desiredSpec' | 'multiAttachErrorReported'>;

/** A pair's desire when no pod wants it. */
export const undesired: Desire = Object.freeze({
  pods: null,
  desiredSpec: null,
  multiAttachErrorReported: false,
});

/** What a pair holds of its attachment while not attached: the machine's initial state. */
export const notAttached = Object.freeze({ spec: null, state: attachmentPairs.initial });

/**
 * The record of a pair wanted as `desire` and attached as `attached` (its spec null while
 * not attached; its device fields shared with `at`'s when equal): a literal of every field
 * in one order, so every record has one shape.
 */
export function pairOf(
  at: Pick<ControllerPair, 'volume' | 'node' | 'detachRequestedAtMs'> & {
    readonly device?: AttachmentDevice;
  },
  desire: Desire,
  attached: {
    readonly spec: ResolvedVolume | null;
    readonly state: PairState<Readonly<AttachmentContext>>;
  },
  seq: Seq,
): ControllerPair {
  const c = attached.state.context;
  return {
    volume: at.volume,
    node: at.node,
    pods: desire.pods,
    desiredSpec: desire.desiredSpec,
    multiAttachErrorReported: desire.multiAttachErrorReported,
    attachedSpec: attached.spec,
    value: attached.state.value,
    devicePath: c.devicePath,
    callFrom: c.callFrom,
    device: deviceOf(c, at.device),
    detachRequestedAtMs: at.detachRequestedAtMs,
    seq,
  };
}

/** The record of a pair wanted by `pods` and not attached (yet). */
export function newDesired(
  volume: UniqueVolumeName,
  node: NodeName,
  pods: OneOrMany<UniquePodName>,
  spec: ResolvedVolume,
): DesiredAttachment {
  const desire = { pods, desiredSpec: spec, multiAttachErrorReported: false };
  const at = { volume, node, detachRequestedAtMs: null };
  return pairOf(at, desire, notAttached, Seq(0)) as DesiredAttachment;
}

/** The record of a pair neither desired nor attached: the start of one (never kept). */
export function emptyPair(volume: UniqueVolumeName, node: NodeName): ControllerPair {
  return pairOf({ volume, node, detachRequestedAtMs: null }, undesired, notAttached, Seq(0));
}

/**
 * The record of `pair` attached in `state` (a step's, not `detached`) at `seq`: the spec
 * it was first attached with, or `spec` when it was not attached (then required); its
 * desire kept.
 */
export function attachmentOf(
  pair: ControllerPair,
  state: PairState<Readonly<AttachmentContext>>,
  seq: Seq,
  spec: ResolvedVolume | null,
): ControllerAttachment {
  if (state.value === notAttached.state.value)
    fail(`attachment ${pair.volume}@${pair.node}: a record of it detached (seq ${seq})`);
  const first = pair.attachedSpec ?? spec;
  if (first === null)
    fail(`attachment ${pair.volume}@${pair.node}: no spec to attach it with (seq ${seq})`);
  const attached = { spec: first, state };
  return pairOf(pair, pair, attached, seq) as ControllerAttachment;
}

/** `pair` wanted by `pods`: with `spec` as its desired spec when no pod wanted it. */
export function desiredOf(
  pair: ControllerPair,
  pods: OneOrMany<UniquePodName>,
  spec: ResolvedVolume,
): DesiredAttachment {
  const desiredSpec = pair.desiredSpec ?? spec;
  return { ...pair, pods, desiredSpec };
}

/**
 * `pair` once its attachment is detached: its desire with the machine's initial state, or
 * undefined when no pod wants it (the record goes).
 */
export function detachedPair(pair: ControllerPair): DesiredAttachment | undefined {
  if (!isDesired(pair)) return undefined;
  const at = { volume: pair.volume, node: pair.node, detachRequestedAtMs: null };
  return pairOf(at, pair, notAttached, Seq(0)) as DesiredAttachment;
}

/**
 * `pair` once no pod wants it (its Multi-Attach report goes with the desire): its
 * attachment, or undefined when not attached (the record goes).
 */
export function undesiredPair(pair: ControllerPair): ControllerAttachment | undefined {
  if (!isAttached(pair)) return undefined;
  return { ...pair, pods: null, desiredSpec: null, multiAttachErrorReported: false };
}
