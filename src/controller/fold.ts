/**
 * The controller's fold: pods scheduled to nodes, cluster objects, operation events, and
 * the reports it raised. Pure and deterministic, like the kubelet's (docs/design.md rule 2).
 */
import { fail, unreachable } from '../assert.js';
import { bookCall, cutOffOperations, finishOperation, startOperation } from '../operations/book.js';
import { callTable, type FailureReading } from '../operations/calls.js';
import type { EventOf, VoleEvent } from '../events/index.js';
import { type ClusterObject, objectKey, type Pod } from '../events/k8s.js';
import { NodeName, Seq, UniquePodName, UniqueVolumeName } from '../ids.js';
import { bindingVolume } from '../binding/claims.js';
import { bookHolds, forgetGone } from '../desired/gone.js';
import {
  claimBound,
  claimUsersChanged,
  type IntakeCore,
  isTerminated,
  objectChanged,
  podUid,
  putObject,
  readsClaimIn,
  removeObject,
  reresolveReaders,
  sameContent,
} from '../desired/intake.js';
import { ClusterObjects } from '../desired/objects.js';
import { indexReferences } from '../desired/references.js';
import { foldOperatorRequestDecided, foldOperatorRequested } from '../operations/fold-operator.js';
import { csiPluginName, resolvePersistentVolume, resolvePod } from '../desired/resolve.js';
import { provisionStarted, trackProvisionedPv } from '../binding/provisioning.js';
import { foldExternalProvisioning } from './fold-external.js';
import {
  addPodToDsw,
  reindexPair,
  removePodFromDsw,
  reportEveryAttached,
  reportIfStillAttached,
  step,
  touch,
  updateTimers,
} from './fold-pairs.js';
import { claimAsKept, controllerPodOf } from './memory.js';
import {
  foldControllerProvisioningCall,
  initialProvisioning,
  protectedClaimUsersChanged,
  releasedClaim,
  storageObjectChanged,
  trackControllerResize,
} from './provisioning.js';
import {
  type ControllerPod,
  attachableOf,
  attachmentAt,
  allAttachments,
  type ControllerWorld,
  desiredAt,
  type NodeRecord,
  pairKey,
  samePluginCaps,
  touchDesired,
} from './types.js';

export const managedAnnotation = 'volumes.kubernetes.io/controller-managed-attach-detach';
const outOfServiceTaint = 'node.kubernetes.io/out-of-service';
/** ReconcilerMaxWaitForUnmountDuration (behaviour C3.1). */
export const maxWaitForUnmountMsDefault = 6 * 60_000;

export function initialControllerWorld(): ControllerWorld {
  return {
    config: { maxWaitForUnmountMs: maxWaitForUnmountMsDefault, disableForceDetachOnTimeout: false },
    plugins: new Map(),
    seq: 0 as Seq,
    tsMs: 0,
    engineStartedSeq: 0 as Seq,
    pods: new Map(),
    objects: new ClusterObjects(),
    bindings: new Map(),
    unboundClaims: new Set(),
    bindingCause: Seq(0),
    podsByObject: new Map(),
    nodes: new Map(),
    pairs: new Map(),
    nodesByVolume: new Map(),
    volumesByNode: new Map(),
    reported: new Map(),
    touched: new Set(),
    ops: new Map(),
    running: new Map(),
    lastErrors: new Map(),
    causes: new Map(),
    dirty: new Set(),
    operator: { pending: new Map(), holds: new Map() },
    provisioning: initialProvisioning(),
  };
}

/**
 * Builds the indexes the fold keeps beside the records (podsByObject, nodesByVolume,
 * volumesByNode) again from the records: snapshots leave them out.
 */
export function rebuildControllerIndexes(world: ControllerWorld): void {
  world.podsByObject = new Map();
  world.nodesByVolume = new Map();
  world.volumesByNode = new Map();
  for (const record of world.pods.values()) index(world, record, true);
  for (const pair of world.pairs.values()) reindexPair(world, pair.volume, pair.node);
}

/**
 * Adds (or removes) the pod under every object it read and under its node (a node that
 * becomes managed resolves its pods again): the node from the record, which holds it anyway.
 */
function index(world: ControllerWorld, record: ControllerPod, add: boolean): void {
  const namespace = record.pod.metadata.namespace ?? 'default';
  indexReferences(world.podsByObject, record.uid, namespace, record.references, add);
  indexReferences(world.podsByObject, record.uid, namespace, ['Node', record.node ?? ''], add);
}

/** PodRemoved: the pod leaves the desired state and every index. */
function removePod(world: ControllerWorld, uid: UniquePodName): void {
  const record = world.pods.get(uid);
  removePodFromDsw(world, uid);
  if (record !== undefined) index(world, record, false);
  world.pods.delete(uid);
  if (record !== undefined)
    protectedClaimUsersChanged(
      world,
      record.references,
      record.pod.metadata.namespace ?? 'default',
    );
}

/** The controller cites the pod that may be a claim's first consumer (WaitForFirstConsumer). */
const citing = { cites: true } as const;

/** behaviour C4.7: the pod resolved again, its attachable volumes desired on its node. */
function upsertPod(world: ControllerWorld, pod: Pod, seq: Seq): void {
  const uid = podUid(pod, world.seq);
  const previous = world.pods.get(uid);
  removePodFromDsw(world, uid);
  if (previous !== undefined) index(world, previous, false);
  const { objects, plugins, bindings } = world;
  const resolution = resolvePod(pod, { objects, plugins, bindings });
  const nodeName = pod.spec.nodeName ?? '';
  // `slice`: an array of its length (a spread's keeps room for 17 more, 136 bytes). Its
  // node is indexed from the record (`index`), not held here a second time.
  const references = resolution.references.slice();
  const record: ControllerPod = {
    uid,
    pod,
    node: nodeName === '' ? null : NodeName(nodeName),
    volumes: attachableOf(resolution.volumes),
    references,
    terminated: isTerminated(pod),
    seq,
  };
  world.pods.set(uid, record);
  index(world, record, true);
  addPodToDsw(world, uid);
  const namespace = pod.metadata.namespace ?? 'default';
  protectedClaimUsersChanged(world, references, namespace);
  // A pod that uses an unbound claim may be its first consumer (WaitForFirstConsumer).
  if (readsClaimIn(references, namespace, world.unboundClaims)) claimUsersChanged(world, citing);
}

/**
 * The controller's answers to the desired-state intake (src/desired/intake.ts): a claim or
 * PV change asks the binder; a pod that read a changed object resolves again.
 */
const controllerIntake: IntakeCore<ControllerWorld> = {
  bindingKinds: new Set(['PersistentVolume', 'PersistentVolumeClaim']),
  readerChanged(world, uid) {
    const record = world.pods.get(uid);
    if (record !== undefined) upsertPod(world, record.pod, record.seq);
  },
};

function nodeRecord(
  object: ClusterObject & { kind: 'Node' },
  previous: NodeRecord | undefined,
): NodeRecord {
  const ready = object.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
  return {
    name: NodeName(object.metadata.name),
    exists: true,
    managed:
      previous?.managed === true || object.metadata.annotations?.[managedAnnotation] !== undefined,
    ready,
    outOfService: (object.spec?.taints ?? []).some((t) => t.key === outOfServiceTaint),
    volumesInUse: new Set(object.status?.volumesInUse ?? []),
  };
}

function setNode(world: ControllerWorld, next: NodeRecord): void {
  const previous = world.nodes.get(next.name);
  world.nodes.set(next.name, next);
  const changed = new Set([...(previous?.volumesInUse ?? []), ...next.volumesInUse]);
  for (const v of changed) touch(world, UniqueVolumeName(v));
  for (const v of world.volumesByNode.get(next.name) ?? []) touch(world, v);
  if (previous?.managed !== true && next.managed)
    reresolveReaders(world, controllerIntake, { kind: 'Node', name: next.name });
}

function foldObjectUpserted(world: ControllerWorld, event: EventOf<'ObjectUpserted'>): void {
  const object = claimAsKept(event.object, world.objects);
  const previous = putObject(world, object);
  if (object.kind === 'PersistentVolume') trackProvisionedPv(world.provisioning, previous, object);
  const name = object.metadata.name;
  storageObjectChanged(world, objectKey(object.kind, name, object.metadata.namespace), object);
  if (object.kind === 'Node') setNode(world, nodeRecord(object, world.nodes.get(NodeName(name))));
  else if (!sameContent(previous, object))
    objectChanged(world, controllerIntake, {
      kind: object.kind,
      name,
      namespace: object.metadata.namespace,
    });
}

type ObjectRef = Pick<EventOf<'ObjectRemoved'>, 'kind' | 'name' | 'namespace'>;
type ClaimDecision = EventOf<
  'ClaimBound' | 'ExternalProvisioningRequested' | 'VolumeReleased' | 'ClaimFinalizerRemoved'
>;

/** A binding; pvc-protection's release (the claim goes now); the rest: fold-external.ts. */
function foldClaimDecision(world: ControllerWorld, event: ClaimDecision): void {
  if (event.type === 'ClaimFinalizerRemoved') return foldObjectRemoved(world, releasedClaim(event));
  if (event.type !== 'ClaimBound') return foldExternalProvisioning(world, event);
  claimBound(world, controllerIntake, event);
  trackControllerResize(world, objectKey('PersistentVolumeClaim', event.claim, event.namespace));
}

/** An object went (ObjectRemoved; a claim whose pvc-protection finalizer was removed). */
function foldObjectRemoved(world: ControllerWorld, event: ObjectRef): void {
  if (event.kind === 'PersistentVolume')
    trackProvisionedPv(world.provisioning, world.objects.lookup(event.kind, event.name), undefined);
  removeObject(world, event);
  storageObjectChanged(world, objectKey(event.kind, event.name, event.namespace), undefined);
  if (event.kind !== 'Node') return objectChanged(world, controllerIntake, event);
  // behaviour C4.6 node delete: it keeps its last volumesInUse; the reconciler detaches (unhealthy).
  const previous = world.nodes.get(NodeName(event.name));
  if (previous !== undefined) setNode(world, { ...previous, exists: false, ready: false });
}

/**
 * A volume no pod wants and attached nowhere is gone unless the book holds it (the rule
 * both cores share, src/desired/gone.ts); a provisioned one keeps its cause for its
 * reclaim, planned next.
 */
function forgetIfGone(world: ControllerWorld, volume: UniqueVolumeName): void {
  if (world.nodesByVolume.has(volume) || world.provisioning.provisioned.has(volume)) return;
  if (!bookHolds(world, volume)) forgetGone(world, volume);
}

// --- operations (behaviour C3.8, C3.9): the operation book and the call table ----------------

function foldOperationStarted(world: ControllerWorld, event: EventOf<'OperationStarted'>): void {
  const volume = UniqueVolumeName(event.volume);
  const node = NodeName(event.node ?? '');
  const key = pairKey(volume, node);
  const pair = world.pairs.get(key);
  const spec = pair?.desiredSpec ?? pair?.attachedSpec ?? null;
  startOperation(world, event, { volume, pod: null, node, spec });
  if (event.provision !== undefined) provisionStarted(world.provisioning, volume, event.provision);
  // behaviour C3.3 step 11: the volume leaves the node's report before its detach starts.
  if (event.op === 'detach') world.reported.get(node)?.delete(volume);
  touch(world, volume);
}

function foldOperationFinished(world: ControllerWorld, event: EventOf<'OperationFinished'>): void {
  const op = finishOperation(world, event);
  if (op.op === 'detach') reportIfStillAttached(world, op.volume, NodeName(op.node ?? ''));
  touch(world, op.volume);
}

/** behaviour C3.8: any failed attach or detach may have taken effect: the entry is uncertain. */
const controllerReading: FailureReading = { uncertainOnAnyFailure: true };

function foldCall(
  world: ControllerWorld,
  event: EventOf<'CallStarted' | 'CallSucceeded' | 'CallFailed'>,
): void {
  const op = bookCall(world, event);
  const effects = callTable[event.call];
  const pairStep =
    event.type === 'CallStarted'
      ? effects.started?.(event, op, controllerReading)
      : event.type === 'CallSucceeded'
        ? effects.succeeded?.(event, op, controllerReading)
        : effects.failed?.(event, op, controllerReading);
  if (pairStep !== undefined && pairStep !== null) {
    if (pairStep.pair !== 'attachment')
      fail(`controller: ${event.call} is a node agent's call (seq ${event.seq})`);
    const spec = pairStep.create ? op.spec : null;
    step(world, op.volume, NodeName(op.node ?? ''), spec, pairStep.event, pairStep.observation);
  }
  foldControllerProvisioningCall(world, op, event);
  touch(world, op.volume);
}

function foldEngineStarted(world: ControllerWorld, event: EventOf<'EngineStarted'>): void {
  const at = { seq: event.seq as Seq, tsMs: event.tsMs };
  const cut = cutOffOperations(world, at, 'controller', (op) => {
    const a = attachmentAt(world, pairKey(op.volume, op.node ?? ''));
    if (a !== undefined) step(world, op.volume, a.node, null, { type: 'CRASH' }, true);
  });
  for (const op of cut) world.touched.add(op.volume);
  // Nothing runs now: every volume confirmed attached is reported, as the controller's
  // populateActualStateOfWorld reports each one it marks attached (a detach cut off before
  // its call left one out; so did a world folded before failed detaches put theirs back).
  reportEveryAttached(world);
  world.engineStartedSeq = event.seq as Seq;
  const samePlugins = samePluginCaps(world.plugins, event.plugins);
  world.plugins = new Map(event.plugins.map((p) => [p.name, p]));
  world.bindingCause = event.seq as Seq;
  world.dirty.add(bindingVolume); // claims left unbound before the restart
  // behaviour C4.2 populateActualStateOfWorld: each node's reported volumesInUse replaces the
  // "assume mounted" default, so attached but unused volumes are detachable at once.
  for (const [name, node] of [...world.nodes]) {
    const object = world.objects.get(objectKey('Node', name));
    if (object?.kind === 'Node')
      setNode(world, { ...node, volumesInUse: new Set(object.status?.volumesInUse ?? []) });
  }
  if (event.controller !== undefined) world.config = { ...event.controller };
  if (samePlugins)
    touchDesired(world); // every record stands
  else for (const record of [...world.pods.values()]) upsertPod(world, record.pod, record.seq);
}

/** A Multi-Attach error reported for a desired entry is reported once (behaviour C3.4). */
function foldReportRaised(world: ControllerWorld, event: EventOf<'ReportRaised'>): void {
  const key = pairKey(event.volume, event.node);
  const entry = desiredAt(world, key);
  if (entry !== undefined) world.pairs.set(key, { ...entry, multiAttachErrorReported: true });
}

/** behaviour C3.7: confirmed attachments storage reports gone are dropped (and unreported). */
function foldAttachmentsVerified(
  world: ControllerWorld,
  event: EventOf<'AttachmentsVerified'>,
): void {
  for (const v of event.volumes) {
    const a = attachmentAt(world, pairKey(v.name, event.node));
    if (v.attached || a === undefined || !a.value.startsWith('attached')) continue;
    step(world, a.volume, a.node, null, { type: 'OBSERVED_DETACHED' }, true);
    touch(world, a.volume);
  }
}

/**
 * behaviour C4.2 populateActualStateOfWorld and processVolumeAttachments: what the API server showed
 * attached when this engine began leading (another leader's work, not in this log). One the
 * world lacks is added: confirmed when found attached, else uncertain. A CSI attachment the
 * world holds that was not found is dropped: only a VolumeAttachment attaches a CSI volume.
 */
function foldAttachmentsFound(world: ControllerWorld, event: EventOf<'AttachmentsFound'>): void {
  const busy = new Set([...world.running.values()].map((op) => op.volume));
  const found = new Set<string>();
  for (const f of event.attachments) {
    found.add(pairKey(f.volume, f.node));
    const held = attachmentAt(world, pairKey(f.volume, f.node));
    if (busy.has(UniqueVolumeName(f.volume))) continue;
    if (held !== undefined) {
      // populateActualStateOfWorld marks what the API server shows attached as attached: an
      // attachment the log left uncertain is confirmed, so an attach of a ReadWriteOnce
      // volume elsewhere waits for its detach instead of passing it by.
      if (f.attached && held.value === 'attachUncertain') {
        step(world, held.volume, held.node, null, { type: 'VERIFY_OK', devicePath: '' });
        touch(world, held.volume);
      }
      continue;
    }
    const pv = world.objects.get(objectKey('PersistentVolume', f.pv));
    const spec =
      pv?.kind === 'PersistentVolume' ? resolvePersistentVolume(pv, world.plugins) : undefined;
    if (spec === undefined || spec.volume !== f.volume || !spec.traits.attachable) continue;
    const node = NodeName(f.node);
    if (f.attached) step(world, spec.volume, node, spec, { type: 'VERIFY_OK', devicePath: '' });
    else {
      step(world, spec.volume, node, spec, { type: 'ATTACH_START' });
      step(world, spec.volume, node, null, { type: 'CRASH' });
    }
    touch(world, spec.volume);
  }
  // As at EngineStarted: each node's reported volumesInUse replaces "assume mounted".
  for (const name of new Set(event.attachments.map((f) => NodeName(f.node)))) {
    const record = world.nodes.get(name);
    const object = world.objects.get(objectKey('Node', name));
    if (record !== undefined && object?.kind === 'Node')
      setNode(world, { ...record, volumesInUse: new Set(object.status?.volumesInUse ?? []) });
  }
  for (const a of [...allAttachments(world)]) {
    if (found.has(pairKey(a.volume, a.node)) || busy.has(a.volume)) continue;
    if (!a.volume.startsWith(`${csiPluginName}/`)) continue;
    if (!/^(attached|attachUncertain)/.test(a.value)) continue;
    step(world, a.volume, a.node, null, { type: 'OBSERVED_DETACHED' }, true);
    touch(world, a.volume);
  }
}

/** `vole detach --controller`: the request, and the planner's verdict on it. */
function foldOperatorEvent(
  world: ControllerWorld,
  event: EventOf<'OperatorRequested'> | EventOf<'OperatorRequestDecided'>,
): void {
  const hooks = { touch: (volume: UniqueVolumeName) => touch(world, volume) };
  if (event.type === 'OperatorRequested') foldOperatorRequested(world, event, hooks);
  else foldOperatorRequestDecided(world, event, hooks);
}

export function foldController(world: ControllerWorld, event: VoleEvent): ControllerWorld {
  if (event.seq !== world.seq + 1)
    fail(`event seq ${event.seq} after ${world.seq}: the log has a gap`);
  world.seq = event.seq as Seq;
  world.tsMs = Math.max(world.tsMs, event.tsMs);
  world.touched.clear();
  switch (event.type) {
    case 'EngineStarted':
      foldEngineStarted(world, event);
      break;
    case 'PodUpserted':
      upsertPod(world, controllerPodOf(event.pod, world.objects), event.seq as Seq);
      break;
    case 'PodRemoved':
      removePod(world, UniquePodName(event.uid));
      break;
    case 'ObjectUpserted':
      foldObjectUpserted(world, event);
      break;
    case 'ObjectRemoved':
      foldObjectRemoved(world, event);
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
    case 'ReportRaised':
      foldReportRaised(world, event);
      break;
    case 'AttachmentsVerified':
      foldAttachmentsVerified(world, event);
      break;
    case 'AttachmentsFound':
      foldAttachmentsFound(world, event);
      break;
    case 'OperatorRequested':
    case 'OperatorRequestDecided':
      foldOperatorEvent(world, event);
      break;
    case 'ClaimBound':
    case 'ExternalProvisioningRequested':
    case 'VolumeReleased':
    case 'ClaimFinalizerRemoved':
      foldClaimDecision(world, event);
      break;
    case 'SourcesReady':
    case 'VolumesReportedInUse':
    case 'NodeStatusObserved':
    case 'TokensRefreshDue':
    case 'HostObserved':
    case 'CsiDriverRegistered':
    case 'CsiDriverDeregistered':
    case 'CSINodeObserved':
    case 'KubeEventObserved':
    case 'NodeOperationObserved':
      break; // node-agent events, and recorded facts (vole record): not the controller's
    default:
      unreachable(event, 'event type');
  }
  settleTouched(world, event.tsMs);
  return world;
}

/** The volumes the event touched: their timers updated, forgotten once nothing holds them. */
function settleTouched(world: ControllerWorld, tsMs: number): void {
  for (const v of world.touched) {
    updateTimers(world, v, tsMs);
    forgetIfGone(world, v);
  }
  world.touched.clear();
}
