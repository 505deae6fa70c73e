/**
 * The pair machines compiled for the folds (compiled-machine.ts): the attachment pair, a
 * (volume, node) pair both cores step (the kubelet's attachments, the controller's pairs),
 * and the mount pair, a (volume, pod) pair the kubelet steps. One compilation each, shared.
 */
import {
  type AttachmentContext,
  type AttachmentEvent,
  attachmentMachine,
  type MountContext,
  type MountEvent,
  mountMachine,
} from '../../machines/index.js';
import { compileMachine } from './compiled-machine.js';

export const attachmentPairs = compileMachine<AttachmentContext, AttachmentEvent>(
  attachmentMachine,
  (c) => ({
    devicePath: c.devicePath,
    deviceMountPath: c.deviceMountPath,
    sizeBytes: c.sizeBytes,
    inUseExpansionError: c.inUseExpansionError,
    callFrom: c.callFrom,
    deviceFrom: c.deviceFrom,
  }),
);
export const mountPairs = compileMachine<MountContext, MountEvent>(mountMachine);
