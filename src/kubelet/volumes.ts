/**
 * One record per volume: its desired-state entry, its attachment, its mounts and the cause
 * of its next decision under one map entry of `world.volumes` (four maps' entries cost
 * about 37 bytes each at 100,000 pairs, and the desired-state entry its own record).
 *
 * A VolumeRecord is the fold's own, like the maps it replaces: its fields change in place
 * (the fold writes them through the setters below); the records in them (attachment,
 * mounts, desired pods) stay immutable and are replaced whole. Readers see the world's
 * `dsw`, `attachments`, `mounts` and `causes` as read-only maps by volume, views of the
 * records (VolumeView), so the planner and everything outside src/kubelet/ read them as the
 * maps they were. A record lives while any of them holds something, or while operations
 * or operator requests name its volume (gone.ts drops it at the end of the event).
 */
import { Seq, type UniqueVolumeName } from '../ids.js';
import type { ByPod } from './by-pod.js';
import type {
  AttachmentRecord,
  DswPod,
  DswVolume,
  MountRecord,
  VolumeCounts,
  VolumeRecord,
  VolumeView as View,
} from './types.js';
import type { VolumeCauses } from '../operations/types.js';

type Volumes = Map<UniqueVolumeName, VolumeRecord>;

/** A record's cause before any event touched it (seqs start at 1). */
const noCause = Seq(0);

type Counts = VolumeCounts;

/**
 * A read-only map by volume over one field of the records (the volumes that have it).
 * Subclasses read their field; everything else is shared.
 */
abstract class VolumeView<V> implements View<V> {
  constructor(
    protected readonly volumes: Volumes,
    /** Shared by the four views of one world; written by the setters below. */
    readonly counts: Counts,
  ) {}

  abstract get(volume: UniqueVolumeName): V | undefined;
  abstract get size(): number;

  has(volume: UniqueVolumeName): boolean {
    return this.get(volume) !== undefined;
  }

  *entries(): IterableIterator<[UniqueVolumeName, V]> {
    for (const volume of this.volumes.keys()) {
      const value = this.get(volume);
      if (value !== undefined) yield [volume, value];
    }
  }

  *keys(): IterableIterator<UniqueVolumeName> {
    for (const [volume] of this.entries()) yield volume;
  }

  *values(): IterableIterator<V> {
    for (const [, value] of this.entries()) yield value;
  }

  [Symbol.iterator](): IterableIterator<[UniqueVolumeName, V]> {
    return this.entries();
  }

  forEach(
    callback: (value: V, key: UniqueVolumeName, map: ReadonlyMap<UniqueVolumeName, V>) => void,
  ): void {
    for (const [volume, value] of this.entries()) callback(value, volume, this);
  }
}

/** The desired state of world by volume: a record with pods is its DswVolume. */
export class DesiredView extends VolumeView<DswVolume> {
  get(volume: UniqueVolumeName): DswVolume | undefined {
    const record = this.volumes.get(volume);
    return record !== undefined && isDesired(record) ? record : undefined;
  }
  get size(): number {
    return this.counts.desired;
  }
}

export class AttachmentsView extends VolumeView<AttachmentRecord> {
  get(volume: UniqueVolumeName): AttachmentRecord | undefined {
    return this.volumes.get(volume)?.attachment;
  }
  get size(): number {
    return this.counts.attachments;
  }
}

export class MountsView extends VolumeView<ByPod<MountRecord>> {
  get(volume: UniqueVolumeName): ByPod<MountRecord> | undefined {
    return this.volumes.get(volume)?.mounts;
  }
  get size(): number {
    return this.counts.mounts;
  }
}

/** The cause of each volume's next decision (the operation book's `causes`). */
export class CausesView extends VolumeView<Seq> implements VolumeCauses {
  get(volume: UniqueVolumeName): Seq | undefined {
    const cause = this.volumes.get(volume)?.cause;
    return cause === 0 ? undefined : cause;
  }
  get size(): number {
    return this.counts.causes;
  }
  set(volume: UniqueVolumeName, cause: Seq): this {
    const record = recordOf(this.volumes, volume);
    if (record.cause === 0) this.counts.causes++;
    record.cause = cause;
    return this;
  }
  delete(volume: UniqueVolumeName): boolean {
    const record = this.volumes.get(volume);
    if (record === undefined || record.cause === 0) return false;
    this.counts.causes--;
    record.cause = noCause;
    return true;
  }
}

/** What a world keeps of its volumes: the records and their views. */
export interface VolumeTable {
  volumes: Volumes;
  dsw: DesiredView;
  attachments: AttachmentsView;
  mounts: MountsView;
  causes: CausesView;
}

/** The views over `volumes` (a fresh map, or one a snapshot gave back: counted again). */
export function volumeTable(volumes: Volumes = new Map()): VolumeTable {
  const counts: Counts = { desired: 0, attachments: 0, mounts: 0, causes: 0 };
  for (const record of volumes.values()) {
    if (record.pods !== undefined) counts.desired++;
    if (record.attachment !== undefined) counts.attachments++;
    if (record.mounts !== undefined) counts.mounts++;
    if (record.cause !== 0) counts.causes++;
  }
  return {
    volumes,
    dsw: new DesiredView(volumes, counts),
    attachments: new AttachmentsView(volumes, counts),
    mounts: new MountsView(volumes, counts),
    causes: new CausesView(volumes, counts),
  };
}

/** The record of `volume`, made empty (a literal: one shape for all) when there is none. */
function recordOf(volumes: Volumes, volume: UniqueVolumeName): VolumeRecord {
  let record = volumes.get(volume);
  if (record === undefined) {
    record = {
      volume,
      reportedInUse: false,
      pods: undefined,
      attachment: undefined,
      mounts: undefined,
      cause: noCause,
    };
    volumes.set(volume, record);
  }
  return record;
}

/** The part of the world the setters write. */
interface VolumeWorld {
  readonly volumes: Volumes;
  readonly dsw: View<DswVolume>;
}

function countsOf(world: VolumeWorld): Counts {
  return world.dsw.counts;
}

/** A record some pod wants is its volume's desired-state entry. */
function isDesired(record: VolumeRecord): record is VolumeRecord & DswVolume {
  return record.pods !== undefined;
}

/** Sets (or, with undefined, clears) the pods that want `volume`. */
export function setDesiredPods(
  world: VolumeWorld,
  volume: UniqueVolumeName,
  pods: ByPod<DswPod> | undefined,
): void {
  const record = pods === undefined ? world.volumes.get(volume) : recordOf(world.volumes, volume);
  if (record === undefined) return;
  const counts = countsOf(world);
  if (record.pods === undefined && pods !== undefined) counts.desired++;
  else if (record.pods !== undefined && pods === undefined) counts.desired--;
  record.pods = pods;
  // A volume wanted again starts as not reported (a new DSW entry, behaviour K2.3).
  if (pods === undefined) record.reportedInUse = false;
}

export function setReportedInUse(world: VolumeWorld, volume: UniqueVolumeName, inUse: boolean) {
  const record = world.volumes.get(volume);
  if (record !== undefined && record.pods !== undefined) record.reportedInUse = inUse;
}

/** Sets the cause of the next decision about `volume` (touch). */
export function setCause(world: VolumeWorld, volume: UniqueVolumeName, cause: Seq): void {
  const record = recordOf(world.volumes, volume);
  if (record.cause === noCause) countsOf(world).causes++;
  record.cause = cause;
}

/** Sets (or clears) the attachment of `volume`. */
export function setAttachment(
  world: VolumeWorld,
  volume: UniqueVolumeName,
  attachment: AttachmentRecord | undefined,
): void {
  const record =
    attachment === undefined ? world.volumes.get(volume) : recordOf(world.volumes, volume);
  if (record === undefined) return;
  const counts = countsOf(world);
  if (record.attachment === undefined && attachment !== undefined) counts.attachments++;
  else if (record.attachment !== undefined && attachment === undefined) counts.attachments--;
  record.attachment = attachment;
}

/** Sets (or clears) the mount records of `volume`. */
export function setMounts(
  world: VolumeWorld,
  volume: UniqueVolumeName,
  mounts: ByPod<MountRecord> | undefined,
): void {
  const record = mounts === undefined ? world.volumes.get(volume) : recordOf(world.volumes, volume);
  if (record === undefined) return;
  const counts = countsOf(world);
  if (record.mounts === undefined && mounts !== undefined) counts.mounts++;
  else if (record.mounts !== undefined && mounts === undefined) counts.mounts--;
  record.mounts = mounts;
}

/** Is the record empty of desired pods, attachment and mounts? */
export function holdsNothing(record: VolumeRecord): boolean {
  const { pods, attachment, mounts } = record;
  return pods === undefined && attachment === undefined && mounts === undefined;
}

/** Drops the record of a volume gone from the world (its cause with it). */
export function forgetVolume(world: VolumeWorld, volume: UniqueVolumeName): void {
  const record = world.volumes.get(volume);
  if (record === undefined) return;
  const counts = countsOf(world);
  if (record.pods !== undefined) counts.desired--;
  if (record.attachment !== undefined) counts.attachments--;
  if (record.mounts !== undefined) counts.mounts--;
  if (record.cause !== 0) counts.causes--;
  world.volumes.delete(volume);
}
