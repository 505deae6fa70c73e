/**
 * The questions Kubernetes asks of the desired and actual state of world (behaviour K2.2, K2.4, K2.5).
 * Pure reads: none changes the world.
 */
import type { UniquePodName, UniqueVolumeName } from '../ids.js';
import { fail } from '../assert.js';
import type { AttachmentRecord, DswVolume, MountRecord, World } from './types.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';
import type { ClusterObject } from '../events/k8s.js';
import { boundVolumes, type ClaimBinding } from '../binding/claims.js';
import { podCount, podEntries, podEntry } from './by-pod.js';

/** behaviour K2.2 PodExistsInVolume, as a discriminated union instead of (bool, string, error). */
export type PodInVolume =
  | { kind: 'volumeNotAttached' }
  /** Pod record absent or uncertain: "keep trying to mount". */
  | { kind: 'notMounted'; devicePath: string }
  | { kind: 'remountRequired'; devicePath: string }
  | { kind: 'fsResizeRequired'; devicePath: string; currentSizeBytes: number }
  | { kind: 'mounted'; devicePath: string };

export function isAttached(record: AttachmentRecord | undefined): record is AttachmentRecord {
  return record !== undefined && record.value.startsWith('attached');
}

/**
 * Missing attachment (or one not attached yet) → volumeNotAttached; a pod record absent
 * or uncertain → notMounted; otherwise remount, resize or mounted, in Kubernetes' order.
 */
export function podExistsInVolume(
  world: World,
  pod: UniquePodName,
  volume: UniqueVolumeName,
  desiredSizeBytes: number,
): PodInVolume {
  const attachment = world.attachments.get(volume);
  if (!isAttached(attachment)) return { kind: 'volumeNotAttached' };
  const devicePath = attachment.context.devicePath;
  const mount = podEntry(world.mounts.get(volume), pod);
  if (mount === undefined || mount.value !== 'mounted') return { kind: 'notMounted', devicePath };
  if (mount.context.remountRequired) return { kind: 'remountRequired', devicePath };
  const currentSizeBytes = attachment.context.sizeBytes;
  if (volumeNeedsExpansion(world, attachment, desiredSizeBytes)) {
    return { kind: 'fsResizeRequired', devicePath, currentSizeBytes };
  }
  return { kind: 'mounted', devicePath };
}

/** behaviour K2.2 volumeNeedsExpansion. */
function volumeNeedsExpansion(
  world: World,
  attachment: AttachmentRecord,
  desiredSizeBytes: number,
) {
  const { sizeBytes, inUseExpansionError } = attachment.context;
  if (inUseExpansionError || sizeBytes === 0 || desiredSizeBytes === 0) return false;
  const caps = world.plugins.get(attachment.spec.traits.pluginName);
  return (
    desiredSizeBytes > sizeBytes &&
    caps !== undefined &&
    caps.nodeExpandable &&
    caps.requiresFSResize
  );
}

/** Mounted or uncertain: "may be mounted" for every safety decision (behaviour K8.1 S4). */
export function mayBeMounted(record: MountRecord): boolean {
  return record.value !== 'unmounted';
}

export interface MountedVolumeView {
  readonly outerVolumeSpecName: string;
  readonly volume: UniqueVolumeName;
  readonly innerVolumeSpecName: string;
  readonly pluginName: string;
  readonly readOnly: boolean;
  readonly volumeGidValue: string;
}

/**
 * behaviour K2.5 GetMountedVolumesForPod [newer]: volumes in the pod's DSW that are Mounted in
 * ASW, keyed by every outer name. Uncertain mounts are not listed (behaviour K8.1 S5).
 */
export function getMountedVolumesForPod(
  world: World,
  pod: UniquePodName,
): Map<string, MountedVolumeView> {
  const result = new Map<string, MountedVolumeView>();
  const record = world.pods.get(pod);
  for (const resolved of record?.volumes ?? []) {
    const mount = podEntry(world.mounts.get(resolved.volume), pod);
    if (mount?.value !== 'mounted') continue;
    result.set(resolved.outerVolumeSpecName, {
      outerVolumeSpecName: resolved.outerVolumeSpecName,
      volume: resolved.volume,
      innerVolumeSpecName: resolved.innerVolumeSpecName,
      pluginName: resolved.traits.pluginName,
      readOnly: resolved.traits.readOnly,
      volumeGidValue: mount.context.volumeGidValue,
    });
  }
  return result;
}

/** Every mount record of a pod, mounted or uncertain (any state but unmounted). */
export function getPossiblyMountedVolumesForPod(world: World, pod: UniquePodName): MountRecord[] {
  const result: MountRecord[] = [];
  for (const byPod of world.mounts.values()) {
    const record = podEntry(byPod, pod);
    if (record !== undefined && mayBeMounted(record)) result.push(record);
  }
  return result.sort((a, b) => a.volume.localeCompare(b.volume));
}

/** behaviour K2.5 HasPossiblyMountedVolumesForPod. */
export function podHasPossiblyMountedVolumes(world: World, pod: UniquePodName): boolean {
  return getPossiblyMountedVolumesForPod(world, pod).length > 0;
}

/**
 * behaviour K2.5 GetVolumesInUse: attachable volumes in DSW or in ASW, sorted, no duplicates.
 * A volume is in use from the moment a pod wants it until it leaves both.
 */
export function getVolumesInUse(world: World): UniqueVolumeName[] {
  const inUse = new Set<UniqueVolumeName>();
  for (const volume of world.dsw.values())
    if (dswSpec(volume).traits.attachable) inUse.add(volume.volume);
  // behaviour K4.3: a volume enters ASW when Attach succeeds, so one still attaching is not in use
  // (unless a pod wants it). vole's attachUncertain, which may exist, is reported in use:
  // the safe side, so a controller never detaches under it.
  for (const record of world.attachments.values()) {
    if (record.spec.traits.attachable && record.value !== 'attaching') inUse.add(record.volume);
  }
  return [...inUse].sort();
}

/** behaviour K2.5 VolumeIsAttached: the volume is attached (any device state). */
export function volumeIsAttached(world: World, volume: UniqueVolumeName): boolean {
  return isAttached(world.attachments.get(volume));
}

/** behaviour K2.5 GetExtraSupplementalGroupsForPod. */
export function getExtraSupplementalGroupsForPod(world: World, pod: UniquePodName): number[] {
  const record = world.pods.get(pod);
  const declared = new Set(record?.pod.spec.securityContext?.supplementalGroups ?? []);
  const gids = new Set<number>();
  for (const view of getMountedVolumesForPod(world, pod).values()) {
    if (view.volumeGidValue === '' || !/^-?[0-9]+$/.test(view.volumeGidValue)) continue;
    const gid = Number(view.volumeGidValue);
    if (Number.isSafeInteger(gid) && !declared.has(gid)) gids.add(gid);
  }
  return [...gids].sort((a, b) => a - b);
}

export interface PodWaitStatus {
  readonly known: boolean;
  readonly ready: boolean;
  readonly unmounted: string[];
  readonly unattached: string[];
  readonly notProcessed: string[];
  readonly errors: string[];
  /** The last operation errors of the pod's unmounted volumes: why it waits. */
  readonly lastErrors: string[];
}

/**
 * behaviour K2.5 WaitForAttachAndMount's check and its error lists: expected outer names not
 * Mounted, attachable ones not attached, and ones that could not be processed.
 */
export function podWaitStatus(world: World, pod: UniquePodName): PodWaitStatus {
  const record = world.pods.get(pod);
  if (record === undefined) {
    return {
      known: false,
      ready: false,
      unmounted: [],
      unattached: [],
      notProcessed: [],
      errors: [],
      lastErrors: [],
    };
  }
  const mounted = getMountedVolumesForPod(world, pod);
  const resolvedByOuter = new Map(record.volumes.map((v) => [v.outerVolumeSpecName, v]));
  const unmounted = record.expectedVolumes.filter((name) => !mounted.has(name)).sort();
  const unattached = record.volumes
    .filter((v) => v.traits.attachable && !world.attachments.has(v.volume))
    .map((v) => v.outerVolumeSpecName)
    .sort();
  const notProcessed = record.expectedVolumes.filter((name) => !resolvedByOuter.has(name)).sort();
  const lastErrors = [
    ...new Set(
      unmounted
        .map((name) => resolvedByOuter.get(name))
        .map((v) => (v === undefined ? undefined : world.lastErrors.get(v.volume)?.message))
        .filter((m): m is string => m !== undefined),
    ),
  ];
  return {
    known: true,
    ready: unmounted.length === 0,
    unmounted,
    unattached,
    notProcessed,
    errors: [...record.errors.values()].sort(),
    lastErrors,
  };
}

/** The kubelet's WaitForAttachAndMount error text, with vole's last errors appended. */
export function waitErrorMessage(status: PodWaitStatus, cause: string): string {
  const list = (names: string[]) => `[${names.join(' ')}]`;
  const why = status.lastErrors.length > 0 ? `; last error: ${status.lastErrors.join('; ')}` : '';
  return (
    `unmounted volumes=${list(status.unmounted)}, unattached volumes=${list(status.unattached)}, ` +
    `failed to process volumes=${list(status.notProcessed)}: ${cause}${why}`
  );
}

/** A desired volume's spec, as its first pod resolved it (its plugin's facts are the same for all). */
export function dswSpec(volume: DswVolume): ResolvedVolume {
  for (const entry of podEntries(volume.pods)) return entry.resolved;
  return fail(`volume ${volume.volume}: desired without a pod`);
}

/** Attachments with no pod record at all (behaviour K2.2 GetUnmountedVolumes). */
export function hasNoMountRecords(world: World, volume: UniqueVolumeName): boolean {
  return podCount(world.mounts.get(volume)) === 0;
}

/** What claimBindings reads: the kubelet's world or the controller's. */
export interface BindingReader {
  readonly objects: ReadonlyMap<string, ClusterObject>;
  readonly bindings: ReadonlyMap<string, ClaimBinding>;
}

/**
 * Every bound claim (`namespace/name`) and its PV, by claim: the planner's bindings and the
 * claims whose status says Bound (docs/scenarios.md state.bindings).
 */
export function claimBindings(world: BindingReader): { claim: string; volume: string }[] {
  const taken = boundVolumes(world.objects, world.bindings);
  return [...taken]
    .map(([volume, claim]) => ({ claim, volume }))
    .sort((a, b) => (a.claim < b.claim ? -1 : a.claim > b.claim ? 1 : 0));
}
