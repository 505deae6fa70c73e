/**
 * Volume traits shared: every resolved spec of equal traits holds one frozen object (see
 * VolumeTraits in volume-spec.ts). A spec held 17 fields, 160 bytes, one a pod volume in
 * the controller's world; 11 of them are alike for every volume of a plugin and PV shape,
 * so a spec now holds 7 (80 bytes) and the traits are made once for them all.
 *
 * Snapshots written before the traits were shared hold specs of the flat shape (the 11
 * fields in the spec itself): `SpecReviver` reads both.
 */
import { assert } from '../assert.js';
import { volumeTraitsMax } from '../constants.js';
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

/** A spec as snapshots written before the traits were shared held it: the traits flat in it. */
type FlatSpec = Omit<ResolvedVolume, 'traits'> & VolumeTraits;

/**
 * Specs read from a snapshot, as the fold holds them: their traits the shared ones. A spec
 * of this shape keeps its object (its traits replaced in place: the decode's own copy, held
 * by nothing else), so what shared it still does; one of the flat shape is made anew, once
 * for all its holders (a pod record, its desired entry, its attachment).
 */
export class SpecReviver {
  private readonly made = new Map<object, ResolvedVolume>();

  /** `read` as the fold holds it (the same object unless it was of the flat shape). */
  spec(read: ResolvedVolume): ResolvedVolume {
    const traits: unknown = (read as Partial<ResolvedVolume>).traits;
    if (traits !== undefined) {
      (read as { traits: VolumeTraits }).traits = volumeTraits(traits as VolumeTraits);
      return read;
    }
    const known = this.made.get(read);
    if (known !== undefined) return known;
    const spec = specOfFlat(read as unknown as FlatSpec);
    this.made.set(read, spec);
    return spec;
  }

  /** A running operation's spec (null: none), as `spec`. */
  maybe(read: ResolvedVolume | null): ResolvedVolume | null {
    return read === null ? null : this.spec(read);
  }
}

function specOfFlat(flat: FlatSpec): ResolvedVolume {
  assert(
    typeof flat.pluginName === 'string' && Array.isArray(flat.accessModes),
    `snapshot: volume spec ${String(flat.volume)} has neither traits nor the flat fields`,
  );
  return {
    outerVolumeSpecName: flat.outerVolumeSpecName,
    innerVolumeSpecName: flat.innerVolumeSpecName,
    volume: flat.volume,
    traits: volumeTraits(flat),
    source: flat.source,
    claim: flat.claim,
    claimNamespace: flat.claimNamespace,
  };
}
