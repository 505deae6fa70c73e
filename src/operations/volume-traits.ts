/**
 * Volume traits shared: every resolved spec of equal traits holds one frozen object (see
 * VolumeTraits in volume-spec.ts). A spec held 17 fields, 160 bytes, one a pod volume in
 * the controller's world; 11 of them are alike for every volume of a plugin and PV shape,
 * so a spec now holds 7 (80 bytes) and the traits are made once for them all.
 */
import { assert } from '../assert.js';
import { volumeTraitsMax } from '../constants.js';
import type { OperationBook } from './types.js';
import type { ResolvedVolume, VolumeTraits } from './volume-spec.js';

/** The traits met so far, by a key of their fields (equal fields checked on a hit). */
const known = new Map<string, VolumeTraits>();

/** The traits `volumeTraits` gave last: most resolutions in a row are of one kind. */
let last: VolumeTraits | undefined;

/** The one shared, frozen object of traits equal to `t` (a new one if none is held yet). */
export function volumeTraits(t: VolumeTraits): VolumeTraits {
  if (last !== undefined && sameTraits(last, t)) return last;
  last = shared(t);
  return last;
}

function shared(t: VolumeTraits): VolumeTraits {
  const key = keyOf(t);
  const held = known.get(key);
  if (held !== undefined && sameTraits(held, t)) return held;
  const made = frozenTraits(t);
  if (held !== undefined) return made; // a key two unequal traits share: this one unshared
  if (known.size >= volumeTraitsMax) known.clear();
  known.set(key, made);
  return made;
}

/** How many traits are held for sharing (for tests and measurements). */
export function volumeTraitsHeld(): number {
  return known.size;
}

/**
 * The key of `t`'s fields: equal traits have equal keys. Unequal ones may share one (a
 * plugin name or gid with a newline in it): `volumeTraits` compares the fields on a hit.
 */
function keyOf(t: VolumeTraits): string {
  const flags =
    (t.attachable ? 1 : 0) |
    (t.deviceMountable ? 2 : 0) |
    (t.requiresRemount ? 4 : 0) |
    (t.multiAttachAllowed ? 8 : 0) |
    (t.readOnly ? 16 : 0);
  const modes = t.accessModes.length === 1 ? t.accessModes[0] : t.accessModes.join('\n');
  return `${t.pluginName}\n${flags}${t.volumeMode}\n${t.sizeBytes}\n${t.claimSizeBytes}\n${t.volumeGidValue}\n${modes}`;
}

function sameTraits(a: VolumeTraits, b: VolumeTraits): boolean {
  return (
    a.pluginName === b.pluginName &&
    a.attachable === b.attachable &&
    a.deviceMountable === b.deviceMountable &&
    a.requiresRemount === b.requiresRemount &&
    a.multiAttachAllowed === b.multiAttachAllowed &&
    a.volumeMode === b.volumeMode &&
    a.sizeBytes === b.sizeBytes &&
    a.claimSizeBytes === b.claimSizeBytes &&
    a.volumeGidValue === b.volumeGidValue &&
    a.readOnly === b.readOnly &&
    a.accessModes.length === b.accessModes.length &&
    a.accessModes.every((mode, i) => b.accessModes[i] === mode)
  );
}

/** A frozen literal of `t`'s fields, always in this order (one shape for all traits). */
function frozenTraits(t: VolumeTraits): VolumeTraits {
  assert(t.sizeBytes >= 0 && t.claimSizeBytes >= 0, `volume traits: a negative size`);
  const accessModes = Object.isFrozen(t.accessModes)
    ? t.accessModes
    : Object.freeze([...t.accessModes]);
  return Object.freeze({
    pluginName: t.pluginName,
    attachable: t.attachable,
    deviceMountable: t.deviceMountable,
    requiresRemount: t.requiresRemount,
    multiAttachAllowed: t.multiAttachAllowed,
    volumeMode: t.volumeMode,
    sizeBytes: t.sizeBytes,
    claimSizeBytes: t.claimSizeBytes,
    volumeGidValue: t.volumeGidValue,
    readOnly: t.readOnly,
    accessModes,
  });
}

/**
 * A spec read from a snapshot, as the fold holds it: its traits the shared ones (structured
 * clone reads back a copy for each spec). The spec keeps its object (its traits replaced in
 * place: the decode's own copy, held by nothing else), so what shared it still does.
 */
export function shareTraits(read: ResolvedVolume | null): void {
  if (read === null) return;
  assert(
    typeof read.traits === 'object',
    `snapshot: volume spec ${String(read.volume)} has no traits; replay the log (the snapshot is of an older shape)`,
  );
  (read as { traits: VolumeTraits }).traits = volumeTraits(read.traits);
}

/** The running operations' specs of a world read from a snapshot, their traits shared again. */
export function shareRunningTraits(book: Pick<OperationBook, 'running'>): void {
  for (const op of book.running.values()) shareTraits(op.spec);
}
