/**
 * plan(world, nowMs) → operations: Emmett's `decide` for the reconciler (docs/style.md rule 1).
 * Pure: no I/O, no clock but `nowMs`. It holds the pass order of behaviour K3.2 and all of the
 * branching; the helpers below it decide one pair each.
 *
 * Incremental: given the volumes touched since the last plan, it looks only at them, so
 * planning after one event costs the same in a world of 1,000 or 100,000 pairs.
 */
import { assert, fail } from '../assert.js';
import { planOperationsMax } from '../constants.js';
import type { NewEvent, OpKey } from '../events/index.js';
import { bindingVolume } from '../binding/claims.js';
import { planBindings } from '../binding/decide.js';
import { planStorage, storageWaits } from './plan-provision.js';
import { claimInUse } from './provisioning.js';
import type { PersistentVolumeClaim } from '../events/k8s.js';
import type { NodeName, Seq, UniquePodName, UniqueVolumeName } from '../ids.js';
import {
  attachmentName,
  detachHeld,
  hasNoMountRecords,
  mayBeMounted,
  mountName,
  podCount,
  podEntries,
  podEntriesByName,
  podEntry,
  type AttachmentRecord,
  type DswPod,
  type DswVolume,
  podExistsInVolume,
  releaseHeld,
  type World,
} from './index.js';
import { keysConflict } from '../operations/pending.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';
import { Claims as BookClaims } from '../operations/book.js';
import { planOperatorRequests } from './plan-operator.js';
import type { MountOperation, MountStep, Operation } from './operations.js';
import { fsUserOf } from './fs-user.js';

export interface PlanResult {
  readonly operations: Operation[];
  /** Volumes held back by backoff, with the time their retry becomes allowed. */
  readonly retries: { volume: UniqueVolumeName; atMs: number }[];
  /** Volumes not looked at because planOperationsMax was reached: plan them next. */
  readonly deferred: UniqueVolumeName[];
  /** Decisions that are events themselves: claim bindings, verdicts on operator requests. */
  readonly events?: NewEvent[];
}

export interface PlanOptions {
  /** Only these volumes (the dirty set); every volume of the world when absent. */
  readonly volumes?: Iterable<UniqueVolumeName>;
}

/** Every volume the world knows: in DSW, attached, or mounted. */
export function allVolumes(world: World): Set<UniqueVolumeName> {
  return new Set([
    ...world.dsw.keys(),
    ...world.attachments.keys(),
    ...world.mounts.keys(),
    ...world.operator.pending.keys(),
    ...world.operator.holds.keys(),
  ]);
}

type Claims = BookClaims<Operation>;

function key(volume: string, opts: { pod?: string; node?: string } = {}): OpKey {
  return { volume, pod: opts.pod ?? '', node: opts.node ?? '' };
}

/** behaviour K4.1: attach/detach keys name the node only when multi-attach is allowed. */
function attachKey(volume: UniqueVolumeName, node: NodeName, multiAttachAllowed: boolean): OpKey {
  return multiAttachAllowed ? key(volume, { node }) : key(volume);
}

function causeOf(world: World, volume: UniqueVolumeName): Seq {
  return world.causes.get(volume) ?? world.seq;
}

/** behaviour K3.3 Pass A — unmountVolumes: pods' mounts (mounted or uncertain) not desired. */
function planUnmounts(world: World, claims: Claims, volume: UniqueVolumeName): void {
  const desired = world.dsw.get(volume)?.pods;
  for (const record of podEntriesByName(world.mounts.get(volume))) {
    const pod = record.pod;
    const wanted = podEntry(desired, pod) !== undefined && !releaseHeld(world, volume, pod);
    if (!mayBeMounted(record) || wanted) continue;
    claims.tryRun({
      op: 'unmount',
      volume,
      pod,
      key: key(volume, { pod }),
      cause: causeOf(world, volume),
      steps: record.spec.traits.volumeMode === 'Block' ? ['unmap'] : ['tearDown'],
    });
  }
}

/**
 * docs/csi.md: NodeGetInfo's max_volumes_per_node caps how many of a driver's volumes may be
 * attached to this node (the capability recorded in the log). A volume past it is not
 * attached: the planner refuses the attach, saying why, and the refusal is retried with
 * backoff, so the attach goes on once another of the driver's volumes is detached. Counts
 * the attachments only for a driver that has a limit.
 */
function volumeLimitRefusal(
  world: World,
  volume: UniqueVolumeName,
  pluginName: string,
): string | undefined {
  const limit = world.plugins.get(pluginName)?.csi?.maxVolumesPerNode ?? 0;
  if (limit === 0) return undefined;
  let attachedCount = 0;
  for (const attachment of world.attachments.values()) {
    if (attachment.spec.traits.pluginName !== pluginName || attachment.volume === volume) continue;
    if (attachment.value !== 'detached') attachedCount++;
  }
  if (attachedCount < limit) return undefined;
  return (
    `AttachVolume.Attach failed for volume "${volume}": node ${world.config.node} has ` +
    `${attachedCount} volume(s) of CSI driver ${pluginName} attached, its limit ` +
    `(max_volumes_per_node ${limit}); detach one or schedule the pod elsewhere`
  );
}

/**
 * The pods wanting `volume` that are not mounted yet: the attach's mount intent names them,
 * so their mounts need no commit of their own (docs/reliability.md, "Durable points").
 */
function podsToMount(world: World, volume: DswVolume): UniquePodName[] {
  const mounts = world.mounts.get(volume.volume);
  const pods: UniquePodName[] = [];
  for (const { pod } of podEntries(volume.pods))
    if (podEntry(mounts, pod)?.value !== 'mounted') pods.push(pod);
  return pods;
}

/** behaviour K3.5 waitForVolumeAttach. */
function planAttach(world: World, claims: Claims, volume: DswVolume, entry: DswPod): void {
  const { node, controllerAttachDetach } = world.config;
  const cause = causeOf(world, volume.volume);
  if (!entry.resolved.traits.attachable) {
    claims.tryRun({
      op: 'verifyControllerAttached',
      volume: volume.volume,
      node,
      key: key(volume.volume),
      cause,
      devicePath: '',
    });
    return;
  }
  if (!controllerAttachDetach) {
    const opKey = attachKey(volume.volume, node, entry.resolved.traits.multiAttachAllowed);
    const refused = volumeLimitRefusal(world, volume.volume, entry.resolved.traits.pluginName);
    const mountsIntended = world.config.mountIntents === true ? podsToMount(world, volume) : [];
    claims.tryRun({
      op: 'attach',
      volume: volume.volume,
      node,
      key: opKey,
      cause,
      ...(refused === undefined ? {} : { refused }),
      ...(mountsIntended.length === 0 ? {} : { mountsIntended }),
    });
    return;
  }
  // Controller mode: wait (no operation, no backoff) until the node reported the volume
  // in use and the controller lists it attached (behaviour K3.5, K4.6 MountPreConditionFailed).
  const devicePath = world.volumesAttached.get(volume.volume);
  if (!volume.reportedInUse || devicePath === undefined) return;
  claims.tryRun({
    op: 'verifyControllerAttached',
    volume: volume.volume,
    node,
    key: key(volume.volume),
    cause,
    devicePath,
  });
}

/** The spec the expansion acts on: the first desiring pod's (as the fold captures it). */
function firstDesired(volume: DswVolume): ResolvedVolume {
  for (const entry of podEntries(volume.pods)) return entry.resolved;
  return fail(`volume ${volume.volume}: desired without a pod`);
}

/** behaviour K4.7 step 12: expand during mount when the claim is smaller than the PV. */
function expansionDuringMount(world: World, spec: ResolvedVolume) {
  const caps = world.plugins.get(spec.traits.pluginName);
  const current = world.attachments.get(spec.volume)?.context;
  if (caps === undefined || !caps.nodeExpandable || !caps.requiresFSResize) return undefined;
  if (spec.source.kind === 'csi' && spec.source.inline) return undefined;
  if (spec.traits.claimSizeBytes === 0 || spec.traits.sizeBytes <= spec.traits.claimSizeBytes)
    return undefined;
  if (
    current === undefined ||
    current.inUseExpansionError ||
    current.sizeBytes >= spec.traits.sizeBytes
  )
    return undefined;
  return {
    oldSizeBytes: current.sizeBytes || spec.traits.claimSizeBytes,
    newSizeBytes: spec.traits.sizeBytes,
  };
}

/** behaviour K4.7 (filesystem) and K4.10 (Block): the calls a mount makes, in order. */
function mountSteps(world: World, spec: ResolvedVolume, expand: boolean): MountStep[] {
  const deviceMounted = world.attachments.get(spec.volume)?.value === 'attached.deviceMounted';
  const steps: MountStep[] = spec.traits.attachable ? ['waitForAttach'] : [];
  if (spec.traits.volumeMode === 'Block') {
    if (!deviceMounted) steps.push('setUpDevice');
    steps.push('map');
    return steps;
  }
  if (spec.traits.deviceMountable && !deviceMounted) steps.push('mountDevice');
  steps.push('setUp');
  if (expand) steps.push('expand');
  return steps;
}

/** A ReadWriteOncePod volume mounted for another pod refuses the mount (no call made). */
function rwopRefusal(world: World, entry: DswPod): string | undefined {
  const modes = entry.resolved.traits.accessModes;
  if (modes.length !== 1 || modes[0] !== 'ReadWriteOncePod') return undefined;
  for (const other of podEntries(world.mounts.get(entry.resolved.volume))) {
    if (other.pod !== entry.pod)
      return (
        'MountVolume.SetUp failed: volume uses the ReadWriteOncePod access mode and is ' +
        'already in use by another pod'
      );
  }
  return undefined;
}

/** The mount (or map) operation for one desired (volume, pod): every choice made here. */
function mountOperation(
  world: World,
  entry: DswPod,
  base: Pick<MountOperation, 'key' | 'cause' | 'remount'>,
): MountOperation {
  const spec = entry.resolved;
  const context = world.attachments.get(spec.volume)?.context;
  const refusal = rwopRefusal(world, entry);
  const expansion =
    spec.traits.volumeMode === 'Block' ? undefined : expansionDuringMount(world, spec);
  const podOf = world.pods.get(entry.pod)?.pod;
  const podSpec = podOf?.spec;
  return {
    op: 'mount',
    volume: spec.volume,
    pod: entry.pod,
    ...base,
    steps: refusal === undefined ? mountSteps(world, spec, expansion !== undefined) : [],
    devicePath: context?.devicePath ?? '',
    deviceMountPath: context?.deviceMountPath ?? '',
    fsGroup: podSpec?.securityContext?.fsGroup ?? null,
    fsUser: podOf === undefined ? null : fsUserOf(podOf),
    ...(expansion === undefined ? {} : { expansion }),
    ...(refusal === undefined ? {} : { refusal }),
  };
}

/** behaviour K3.4 Pass B — mountOrAttachVolumes, for one desired (volume, pod). */
function planMountOrAttach(world: World, claims: Claims, volume: DswVolume, entry: DswPod): void {
  const state = podExistsInVolume(world, entry.pod, volume.volume, entry.resolved.traits.sizeBytes);
  const shared = entry.resolved.traits.attachable || entry.resolved.traits.deviceMountable;
  const cause = causeOf(world, volume.volume);
  switch (state.kind) {
    case 'volumeNotAttached':
      planAttach(world, claims, volume, entry);
      return;
    case 'notMounted':
    case 'remountRequired': {
      const opKey = shared ? key(volume.volume) : key(volume.volume, { pod: entry.pod });
      const remount = state.kind === 'remountRequired';
      claims.tryRun(mountOperation(world, entry, { key: opKey, cause, remount }));
      return;
    }
    case 'fsResizeRequired': {
      const context = world.attachments.get(volume.volume)!.context;
      claims.tryRun({
        op: 'expand',
        volume: volume.volume,
        node: world.config.node,
        key: key(volume.volume),
        cause,
        expansion: {
          oldSizeBytes: context.sizeBytes,
          newSizeBytes: firstDesired(volume).traits.sizeBytes,
          devicePath: context.devicePath,
          deviceMountPath: context.deviceMountPath,
        },
      });
      return;
    }
    case 'mounted':
      return;
  }
}

/** behaviour K3.6 Pass C — unmountDetachDevices, for one attachment no pod uses. */
function planUnmountDeviceOrDetach(
  world: World,
  claims: Claims,
  attachment: AttachmentRecord,
): void {
  const { volume } = attachment;
  const wanted = world.dsw.has(volume) && !detachHeld(world, volume);
  if (!hasNoMountRecords(world, volume) || wanted || claims.anyPending(volume)) return;
  const { node, controllerAttachDetach } = world.config;
  const cause = causeOf(world, volume);
  const value = attachment.value;
  // attachDeviceUncertain: the device may be mounted (a lost intended mount): unmount first.
  if (
    value === 'attached.deviceMounted' ||
    value === 'attached.deviceUncertain' ||
    value === 'attachDeviceUncertain'
  ) {
    const block = attachment.spec.traits.volumeMode === 'Block';
    const steps = block ? (['tearDownDevice'] as const) : (['unmountDevice'] as const);
    claims.tryRun({ op: 'unmountDevice', volume, node, key: key(volume), cause, steps });
    return;
  }
  if (value !== 'attached.deviceUnmounted' && value !== 'attachUncertain') return; // a call in flight
  const forget = controllerAttachDetach || !attachment.spec.traits.attachable;
  assertSafeToDetach(world, attachment);
  if (forget) {
    claims.tryRun({ op: 'markDetached', volume, node, key: key(volume), cause });
  } else {
    const opKey = attachKey(volume, node, attachment.spec.traits.multiAttachAllowed);
    claims.tryRun({ op: 'detach', volume, node, key: opKey, cause });
  }
}

/** behaviour K8.1 S1: never detach (or forget) while a pod mount or the device may exist. */
function assertSafeToDetach(world: World, attachment: AttachmentRecord): void {
  const name = attachmentName(attachment.volume, attachment.node);
  const mounts = world.mounts.get(attachment.volume);
  assert(
    podCount(mounts) === 0,
    () =>
      `attachment ${name}: detach planned while ${podCount(mounts)} pod mount(s) may exist ` +
      `(${[...podEntries(mounts)].map((m) => mountName(attachment.volume, m.pod)).join(', ')}) (seq ${world.seq})`,
  );
  assert(
    !attachment.value.startsWith('attached.device') ||
      attachment.value === 'attached.deviceUnmounted',
    () =>
      `attachment ${name}: detach planned while the device is ${attachment.value} (seq ${world.seq})`,
  );
}

/** behaviour K5.2 S7: no two operations of one plan conflict (keys only meet within a volume). */
function assertNoConflicts(world: World, operations: readonly Operation[]): void {
  const byVolume = new Map<UniqueVolumeName, Operation[]>();
  for (const op of operations) {
    const same = byVolume.get(op.volume) ?? [];
    for (const other of same) {
      assert(
        !keysConflict(op.key, other.key),
        () =>
          `plan: ${other.op} and ${op.op} on conflicting keys of ${op.volume} (seq ${world.seq})`,
      );
    }
    byVolume.set(op.volume, [...same, op]);
  }
}

/**
 * The reconcile passes of behaviour K3.2 over the given volumes (all by default): A unmount
 * undesired pod mounts, B attach/mount desired ones, C unmount devices and detach unused
 * volumes. A and C wait for the sources to be ready (populatorHasAddedPods).
 */
function planOperations(
  world: World,
  nowMs: number,
  opts: PlanOptions,
  claims: Claims = new BookClaims(world, nowMs),
): PlanResult {
  assert(Number.isFinite(nowMs) && nowMs >= 0, () => `plan: bad nowMs ${nowMs}`);
  const sorted = [...(opts.volumes ?? allVolumes(world))].sort();
  let volumes = sorted.slice(0, planOperationsMax);
  const deferred = sorted.slice(planOperationsMax);
  // Operator verdicts first; their volumes are planned again once the verdicts are folded.
  const operator = planOperatorRequests(world, volumes, nowMs);
  if (operator.decided.length > 0) {
    const decided = new Set(operator.decided);
    volumes = volumes.filter((v) => !decided.has(v));
    deferred.push(...operator.decided);
  }
  // An operator's accepted detach or release acts before the sources are ready, too.
  const mayTearDown = (volume: UniqueVolumeName) =>
    world.sourcesReady || world.operator.holds.has(volume);
  for (const volume of volumes) if (mayTearDown(volume)) planUnmounts(world, claims, volume); // Pass A
  for (const volume of volumes) {
    const desired = world.dsw.get(volume);
    if (desired === undefined) continue;
    for (const entry of podEntriesByName(desired.pods)) {
      if (releaseHeld(world, volume, entry.pod)) continue; // taken down by the operator's request
      planMountOrAttach(world, claims, desired, entry); // Pass B
    }
  }
  for (const volume of volumes) {
    const attachment = world.attachments.get(volume);
    if (attachment !== undefined && mayTearDown(volume))
      planUnmountDeviceOrDetach(world, claims, attachment); // Pass C
  }
  assertNoConflicts(world, claims.operations);
  const events = operator.events;
  return {
    operations: claims.operations,
    retries: claims.retries,
    deferred,
    ...(events.length === 0 ? {} : { events }),
  };
}

/**
 * Claims are bound before anything else is planned: when the planner binds (or removes a
 * claim's pvc-protection finalizer), it returns those events with the storage operations
 * (provision, delete, controller expansion: src/kubelet/plan-provision.ts) and every other volume
 * it was asked about comes back as deferred, so their operations are planned on the world
 * with the bindings folded in (their causes then name the state the log shows before them).
 */
export function plan(world: World, nowMs: number, opts: PlanOptions = {}): PlanResult {
  const volumes = opts.volumes === undefined ? undefined : [...opts.volumes];
  // A snapshot written before bindClaims existed holds no such field: it bound claims.
  const binds = world.config.bindClaims !== false;
  const lookAtClaims = binds && (volumes === undefined || volumes.includes(bindingVolume));
  const inUse = (pvc: PersistentVolumeClaim) => claimInUse(world, pvc);
  const bound = lookAtClaims ? planBindings(world, nowMs, { inUse }) : [];
  const claims: Claims = new BookClaims(world, nowMs);
  const storage =
    binds && storageWaits(world)
      ? planStorage(world, claims, {
          all: lookAtClaims,
          volumes: new Set(volumes ?? []),
          nowMs,
        })
      : [];
  const events = [...bound, ...storage];
  if (events.length === 0) {
    const rest = volumes?.filter((v) => v !== bindingVolume);
    return planOperations(world, nowMs, rest === undefined ? {} : { volumes: rest }, claims);
  }
  const deferred = (volumes ?? [...allVolumes(world)]).filter((v) => v !== bindingVolume);
  // Claims not looked at because a binding came first are looked at again next.
  if (lookAtClaims) deferred.push(bindingVolume);
  return { operations: claims.operations, retries: claims.retries, deferred, events };
}
