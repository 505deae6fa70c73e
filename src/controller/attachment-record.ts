/**
 * The controller's attachment record (types.ts ControllerAttachment) as the compiled
 * attachment machine steps it: the state the machine reads, made from the record for each
 * step, and the record of the state a step leaves.
 */
import type { AttachmentContext } from '../../machines/index.js';
import type { NodeName, Seq, UniqueVolumeName } from '../ids.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';
import type { PairState } from '../world/compiled-machine.js';
import { attachmentPairs } from '../world/pairs.js';
import type { AttachmentDevice, ControllerAttachment } from './types.js';

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

/** The record's machine state, as the compiled machine steps it (a view made per step). */
export function attachmentState(a: ControllerAttachment): PairState<AttachmentContext> {
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

/**
 * The record of a pair in `state` (its device fields shared with `pair`'s when equal): a
 * literal of every field in one order, so every record has one shape.
 */
export function attachmentOf(
  pair: Pick<ControllerAttachment, 'volume' | 'node' | 'spec' | 'detachRequestedAtMs'> & {
    readonly device?: AttachmentDevice;
  },
  state: PairState<Readonly<AttachmentContext>>,
  seq: Seq,
): ControllerAttachment {
  const c = state.context;
  return {
    volume: pair.volume,
    node: pair.node,
    spec: pair.spec,
    value: state.value,
    devicePath: c.devicePath,
    callFrom: c.callFrom,
    device: deviceOf(c, pair.device),
    detachRequestedAtMs: pair.detachRequestedAtMs,
    seq,
  };
}

/** The record of a pair not attached yet (the machine's initial state), made at `seq`. */
export function newAttachment(
  volume: UniqueVolumeName,
  node: NodeName,
  spec: ResolvedVolume,
  seq: Seq,
): ControllerAttachment {
  return attachmentOf(
    { volume, node, spec, detachRequestedAtMs: null },
    attachmentPairs.initial,
    seq,
  );
}
