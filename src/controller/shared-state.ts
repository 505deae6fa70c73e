/**
 * Attachment states shared between the attachments whose states are equal. Each step of
 * an attachment makes a new `{ value, context }` (40 bytes) and a new context (72
 * bytes), and most of a large world's attachments sit in one state with one context: a
 * CSI driver that answers ControllerPublishVolume without a publish context attaches
 * every volume with the same device path (`{}`), so 150,000 attachments held 150,000
 * equal pairs. A state equal to the one kept for its state value is replaced by it; the
 * one kept is the first of each value (as many as the machine has states). States are
 * immutable (a step makes new ones), so sharing one changes no other record.
 */
import type { AttachmentContext } from '../../machines/index.js';
import type { PairState } from '../world/compiled-machine.js';

type AttachmentState = PairState<AttachmentContext>;

/** The first state of each value, frozen: a record that holds it cannot change it. */
const kept = new Map<string, AttachmentState>();

/** Every field of the context (the type check below fails when one is added and not listed). */
const contextFields = [
  'devicePath',
  'deviceMountPath',
  'sizeBytes',
  'inUseExpansionError',
  'callFrom',
  'deviceFrom',
] as const satisfies readonly (keyof AttachmentContext)[];
type Unlisted = Exclude<keyof AttachmentContext, (typeof contextFields)[number]>;
const allListed: [Unlisted] extends [never] ? true : never = true;

function sameContext(a: AttachmentContext, b: AttachmentContext): boolean {
  for (const field of contextFields) if (a[field] !== b[field]) return false;
  return allListed;
}

/** `state`, or the equal one kept for its value (see above). */
export function sharedAttachmentState(state: AttachmentState): AttachmentState {
  const known = kept.get(state.value);
  if (known === undefined) {
    const context = Object.freeze({ ...state.context });
    const frozen = Object.freeze({ value: state.value, context });
    kept.set(state.value, frozen);
    return frozen;
  }
  return known === state || sameContext(known.context, state.context) ? known : state;
}
