/**
 * fold(world, event) → world: Emmett's `evolve` for the whole engine (docs/style.md rule 1).
 * Pure and deterministic: no I/O, no clock; the same log always folds to the same world.
 */
import { fail, unreachable } from '../assert.js';
import type { EventOf, VoleEvent } from '../events/index.js';
import { NodeName, Seq, type UniquePodName, type UniqueVolumeName } from '../ids.js';
import { endEvent, mayBeGone, startEvent } from './gone.js';
import { stepAttachment, stepMount } from './pairs.js';
import { bindingVolume } from '../binding/claims.js';
import {
  foldClaimBound,
  foldNodeInput,
  foldObjectRemoved,
  foldObjectUpserted,
  foldPodRemoved,
  foldPodUpserted,
  markDirty,
  touch,
  upsertPod,
} from './fold-desired.js';
import {
  cutOffRunningOperations,
  foldCall,
  foldOperationFinished,
  foldOperationStarted,
} from './fold-ops.js';
import { foldOperatorRequestDecided, foldOperatorRequested } from '../operations/fold-operator.js';
import { ClusterObjects } from '../desired/objects.js';
import { foldClaimFinalizerRemoved } from './fold-provisioning.js';
import type { World } from './types.js';
import { podEntry, volumeTable } from './memory.js';
import { cutOffMountIntents } from './mount-intents.js';

/** The world before any event: no node yet (EngineStarted names it). */
export function initialWorld(): World {
  const volumes = volumeTable();
  return {
    config: { node: NodeName(''), controllerAttachDetach: true, bindClaims: true },
    plugins: new Map(),
    seq: Seq(0),
    tsMs: 0,
    engineStartedSeq: Seq(0),
    sourcesReady: false,
    pods: new Map(),
    objects: new ClusterObjects(),
    bindings: new Map(),
    unboundClaims: new Set(),
    bindingCause: Seq(0),
    podsByObject: new Map(),
    volumes: volumes.volumes,
    dsw: volumes.dsw,
    attachments: volumes.attachments,
    mounts: volumes.mounts,
    ops: new Map(),
    running: new Map(),
    volumesAttached: new Map(),
    mountIntents: new Map(),
    maybeGone: [],
    takenVolumes: undefined,
    oneNameLists: new Map(),
    mountContexts: new Map(),
    lastErrors: new Map(),
    causes: volumes.causes,
    dirty: new Set(),
    operator: { pending: new Map(), holds: new Map() },
    provisioning: {
      inFlight: new Map(),
      provisioned: new Map(),
      protectedClaims: new Set(),
      resizing: new Set(),
    },
  };
}

function foldEngineStarted(world: World, event: EventOf<'EngineStarted'>): void {
  const { node, controllerAttachDetach } = event;
  if (node === undefined || controllerAttachDetach === undefined)
    fail(`EngineStarted (seq ${event.seq}) of a kubelet's log names no node: not a kubelet's log`);
  cutOffRunningOperations(world, event.tsMs);
  cutOffMountIntents(world);
  world.config = {
    node: NodeName(node),
    controllerAttachDetach,
    bindClaims: event.bindClaims ?? true,
    ...(event.allocatable === undefined ? {} : { allocatable: event.allocatable }),
    ...(event.tokenRequests === true ? { tokenRequests: true } : {}),
    ...(event.durableCalls === 'first' ? { durableCalls: 'first' as const } : {}),
    ...(event.mountIntents === true ? { mountIntents: true } : {}),
    ...(event.csiDriverObjects === true ? { csiDriverObjects: true } : {}),
  };
  const plugins = new Map(event.plugins.map((p) => [p.name, p]));
  // CSI drivers registered before keep their capabilities until they register again, so
  // their volumes stay known (and can be torn down) while the driver is away.
  for (const [name, caps] of world.plugins)
    if (caps.csi !== undefined && !plugins.has(name)) plugins.set(name, caps);
  world.plugins = plugins;
  world.engineStartedSeq = event.seq as Seq;
  // behaviour K3.2: no unmount or detach until the sources have reported every pod again.
  world.sourcesReady = false;
  world.bindingCause = event.seq as Seq;
  world.dirty.add(bindingVolume); // claims left unbound before the restart
  // The plugin set may have changed: resolve every pod again (once per start).
  for (const record of [...world.pods.values()]) {
    upsertPod(world, record.pod, { reprocessed: false, seq: record.seq, cause: record.seq });
  }
}

/**
 * A CSI driver registered: its capabilities are the plugin's from now on. When they
 * changed, every pod resolves again (a pod waiting for the driver can now go on).
 */
function foldCsiDriverRegistered(world: World, event: EventOf<'CsiDriverRegistered'>): void {
  const before = world.plugins.get(event.caps.name);
  if (before !== undefined && JSON.stringify(before) === JSON.stringify(event.caps)) return;
  world.plugins = new Map(world.plugins).set(event.caps.name, event.caps);
  // A provisioner came: claims of its classes may be provisioned now.
  world.bindingCause = event.seq as Seq;
  world.dirty.add(bindingVolume);
  for (const record of [...world.pods.values()]) {
    upsertPod(world, record.pod, { reprocessed: false, seq: record.seq, cause: event.seq as Seq });
  }
}

/** Settles uncertain pairs that the host check found definitely absent (an observation). */
function foldHostObserved(world: World, event: EventOf<'HostObserved'>): void {
  for (const seen of event.attachments) {
    const volume = seen.volume as UniqueVolumeName;
    const record = world.attachments.get(volume);
    if (record === undefined) continue;
    if (seen.attached === false)
      stepAttachment(world, record, { type: 'OBSERVED_DETACHED' }, { observation: true });
    const after = world.attachments.get(volume);
    if (after !== undefined && seen.deviceMounted === false) {
      stepAttachment(world, after, { type: 'OBSERVED_DEVICE_UNMOUNTED' }, { observation: true });
    }
    touch(world, volume);
  }
  for (const seen of event.mounts) {
    const record = podEntry(
      world.mounts.get(seen.volume as UniqueVolumeName),
      seen.pod as UniquePodName,
    );
    if (record === undefined || seen.mounted) continue;
    stepMount(world, record, { type: 'OBSERVED_UNMOUNTED' }, { observation: true });
    touch(world, record.volume);
  }
}

/** The binder's and pvc-protection's decisions about a claim. */
function foldClaimDecision(world: World, event: EventOf<'ClaimBound' | 'ClaimFinalizerRemoved'>) {
  if (event.type === 'ClaimBound') foldClaimBound(world, event);
  else foldClaimFinalizerRemoved(world, event);
}

function foldSourcesReady(world: World): void {
  world.sourcesReady = true;
  // Passes A and C may now act on every pair, not only the ones touched since.
  for (const volume of world.attachments.keys()) markDirty(world, volume);
  for (const volume of world.mounts.keys()) markDirty(world, volume);
}

/** The next event follows the world's seq, at a time that is no negative. */
function failOnGap(world: World, event: VoleEvent): void {
  if (event.seq !== world.seq + 1)
    fail(`event seq ${event.seq} after ${world.seq}: the log has a gap`);
  if (!(event.tsMs >= 0)) fail(`event seq ${event.seq}: negative timestamp`);
}

/**
 * Applies one event. The world's index maps are updated in place and returned (the fold
 * owns them); records are replaced, never mutated. Throws InvariantError when the event
 * is impossible in the current state (a corrupt log or an engine bug), naming the seq.
 */
export function fold(world: World, event: VoleEvent): World {
  failOnGap(world, event);
  startEvent(world);
  world.seq = event.seq as Seq;
  world.tsMs = Math.max(world.tsMs, event.tsMs);
  switch (event.type) {
    case 'EngineStarted':
      foldEngineStarted(world, event);
      break;
    case 'SourcesReady':
      foldSourcesReady(world);
      break;
    case 'PodUpserted':
      foldPodUpserted(world, event);
      break;
    case 'PodRemoved':
      foldPodRemoved(world, event);
      break;
    case 'ObjectUpserted':
      foldObjectUpserted(world, event);
      break;
    case 'ObjectRemoved':
      foldObjectRemoved(world, event);
      break;
    case 'ClaimBound':
    case 'ClaimFinalizerRemoved':
      foldClaimDecision(world, event);
      break;
    case 'VolumesReportedInUse':
    case 'NodeStatusObserved':
    case 'TokensRefreshDue':
      foldNodeInput(world, event);
      break;
    case 'HostObserved':
      foldHostObserved(world, event);
      break;
    case 'CsiDriverRegistered':
      foldCsiDriverRegistered(world, event);
      break;
    // For people; the controller's; a driver gone (its calls fail until it comes back);
    // recorded facts (vole record), which no core folds.
    case 'ReportRaised':
    case 'AttachmentsVerified':
    case 'AttachmentsFound':
    case 'ExternalProvisioningRequested':
    case 'VolumeReleased':
    case 'CsiDriverDeregistered':
    case 'CSINodeObserved':
    case 'KubeEventObserved':
    case 'NodeOperationObserved':
      break;
    case 'OperationStarted':
      foldOperationStarted(world, event);
      break;
    case 'CallStarted':
    case 'CallSucceeded':
    case 'CallFailed':
      foldCall(world, event);
      break;
    case 'OperationFinished':
      foldOperationFinished(world, event);
      break;
    case 'OperatorRequested':
    case 'OperatorRequestDecided':
      foldOperatorEvent(world, event);
      break;
    default:
      unreachable(event, 'event type');
  }
  endEvent(world);
  return world;
}

function foldOperatorEvent(
  world: World,
  event: EventOf<'OperatorRequested' | 'OperatorRequestDecided'>,
): void {
  if (event.type === 'OperatorRequested') foldOperatorRequested(world, event, operatorHooks(world));
  else foldOperatorRequestDecided(world, event, operatorHooks(world));
}

function operatorHooks(world: World) {
  return {
    touch: (volume: UniqueVolumeName) => touch(world, volume),
    mayBeGone: (volume: UniqueVolumeName) => mayBeGone(world, volume),
  };
}

/** Folds a sequence of events onto a world (initialWorld() by default). */
export function foldAll(events: Iterable<VoleEvent>, world: World = initialWorld()): World {
  for (const event of events) fold(world, event);
  return world;
}

/** Volumes touched since the last call: what the incremental planner looks at next. */
export function takeDirty(world: { dirty: Set<UniqueVolumeName> }): Set<UniqueVolumeName> {
  const dirty = world.dirty;
  world.dirty = new Set();
  return dirty;
}
