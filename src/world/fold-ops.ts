/**
 * Folding operation events: OperationStarted, each plugin call's start and outcome, and
 * OperationFinished (spec §4 operation outcomes, §5 pending operations and backoff).
 */
import type { ErrorKind } from '../../machines/index.js';
import { fail } from '../assert.js';
import type { CallError, EventOf } from '../events/index.js';
import { NodeName, OpId, type Seq, UniquePodName, UniqueVolumeName } from '../ids.js';
import { claimExpanded, touch } from './fold-desired.js';
import { mayBeGone } from './gone.js';
import { attachmentOrNew, mountOrNew, stepAttachment, stepMount } from './pairs.js';
import { keyString, mayRun, finishRecord, recordsAfterStart, setRecords } from './pending.js';
import type { RunningOp, World } from './types.js';

function running(world: World, opId: string): RunningOp {
  const op = world.running.get(OpId(opId));
  if (op === undefined) fail(`operation ${opId} is not running (seq ${world.seq})`);
  return op;
}

/** The desired spec of an operation's volume: the pod's entry, else any desiring pod's. */
function desiredSpec(world: World, volume: UniqueVolumeName, pod: UniquePodName | null) {
  const entry = world.dsw.get(volume);
  if (entry === undefined) return null;
  if (pod !== null) return entry.pods.get(pod)?.resolved ?? null;
  for (const first of entry.pods.values()) return first.resolved;
  return null;
}

/**
 * The world's own copy of a volume name equal to `name`, when it has one. Every event read
 * from the log brings fresh strings; records built from them would each keep their own
 * copy of the same name (a few dozen bytes a pair, a few hundred a pod).
 */
function canonicalVolume(world: World, name: string): UniqueVolumeName {
  const volume = UniqueVolumeName(name);
  return (
    world.dsw.get(volume)?.volume ??
    world.attachments.get(volume)?.volume ??
    firstMount(world, volume)?.volume ??
    volume
  );
}

function firstMount(world: World, volume: UniqueVolumeName) {
  const byPod = world.mounts.get(volume);
  if (byPod !== undefined) for (const mount of byPod.values()) return mount;
  return undefined;
}

/** The world's own copy of a pod UID equal to `uid` (see canonicalVolume). */
function canonicalPod(world: World, uid: string): UniquePodName {
  const pod = UniquePodName(uid);
  return world.pods.get(pod)?.uid ?? pod;
}

/** spec §5.3 Run: reuse the matching failed record or append one, now pending. */
export function foldOperationStarted(world: World, event: EventOf<'OperationStarted'>): void {
  const volume = canonicalVolume(world, event.volume);
  const records = world.ops.get(volume) ?? [];
  const verdict = mayRun(records, event.key, event.op, event.tsMs);
  if (verdict.kind !== 'run')
    fail(
      `operation ${event.op} on ${keyString(event.key)} started while ${verdict.kind} ` +
        `(seq ${event.seq}): never two operations on one key`,
    );
  const opId = OpId(event.opId);
  setRecords(
    world.ops,
    volume,
    recordsAfterStart(records, { key: event.key, opName: event.op, opId, tsMs: event.tsMs }),
  );
  if (world.running.has(opId)) fail(`operation ${opId} started twice (seq ${event.seq})`);
  const pod = event.pod === undefined ? null : canonicalPod(world, event.pod);
  world.running.set(opId, {
    opId,
    op: event.op,
    key: event.key,
    volume,
    pod,
    spec: desiredSpec(world, volume, pod),
    node: event.node === undefined ? null : NodeName(event.node),
    startedSeq: event.seq as Seq,
    startedTsMs: event.tsMs,
    cause: event.cause as Seq,
    call: null,
    lastError: null,
  });
  touch(world, volume);
}

export function foldCallStarted(world: World, event: EventOf<'CallStarted'>): void {
  const op = running(world, event.opId);
  if (op.call !== null)
    fail(`operation ${op.opId}: ${event.call} started during ${op.call} (seq ${event.seq})`);
  op.call = event.call;
  const spec = op.spec ?? undefined;
  switch (event.call) {
    case 'attach':
      stepAttachment(world, attachmentOrNew(world, op.volume, spec), { type: 'ATTACH_START' });
      break;
    case 'detach':
      stepAttachment(world, attachmentOrNew(world, op.volume, undefined), { type: 'DETACH_START' });
      break;
    // spec §4.10/§4.12: a Block volume's device set-up and tear-down are its device mount.
    case 'mountDevice':
    case 'setUpDevice':
      stepAttachment(world, attachmentOrNew(world, op.volume, undefined), {
        type: 'MOUNT_DEVICE_START',
        deviceMountPath: event.deviceMountPath ?? '',
      });
      break;
    case 'unmountDevice':
    case 'tearDownDevice':
      stepAttachment(world, attachmentOrNew(world, op.volume, undefined), {
        type: 'UNMOUNT_DEVICE_START',
      });
      break;
    case 'setUp':
    case 'mapPodDevice': {
      if (!(op.pod !== null && spec !== undefined))
        fail(`setUp of ${op.opId} without a desired pod (seq ${event.seq})`);
      stepMount(world, mountOrNew(world, op.volume, op.pod, spec), {
        type: 'SETUP_START',
        outerVolumeSpecName: spec.outerVolumeSpecName,
        volumeGidValue: spec.volumeGidValue,
      });
      break;
    }
    case 'tearDown':
    case 'unmapPodDevice':
      if (op.pod === null) fail(`tearDown of ${op.opId} without a pod (seq ${event.seq})`);
      stepMount(world, mountOrNew(world, op.volume, op.pod, undefined), { type: 'TEARDOWN_START' });
      break;
    default:
      break; // Read-only calls and the executor's own steps change no pair when they start.
  }
  touch(world, op.volume);
}

export function foldCallSucceeded(world: World, event: EventOf<'CallSucceeded'>): void {
  const op = running(world, event.opId);
  if (op.call !== event.call)
    fail(`operation ${op.opId}: ${event.call} answered while ${op.call} ran (seq ${event.seq})`);
  op.call = null;
  // An attachment missing here is created from the spec the operation started with.
  const spec = op.spec ?? undefined;
  switch (event.call) {
    case 'attach':
    case 'verifyControllerAttached': {
      const devicePath = event.devicePath ?? '';
      stepAttachment(
        world,
        attachmentOrNew(world, op.volume, spec),
        event.call === 'attach'
          ? { type: 'ATTACH_OK', devicePath }
          : { type: 'VERIFY_OK', devicePath },
      );
      const claimSizeBytes = op.spec?.claimSizeBytes ?? 0;
      if (claimSizeBytes > 0)
        stepAttachment(world, attachmentOrNew(world, op.volume, spec), {
          type: 'CLAIM_SIZE_KNOWN',
          sizeBytes: claimSizeBytes,
        });
      break;
    }
    case 'detach':
      stepAttachment(world, attachmentOrNew(world, op.volume, spec), { type: 'DETACH_OK' });
      break;
    case 'markDetached':
      stepAttachment(world, attachmentOrNew(world, op.volume, spec), { type: 'FORGET' });
      break;
    case 'mountDevice':
    case 'setUpDevice':
      stepAttachment(world, attachmentOrNew(world, op.volume, spec), {
        type: 'MOUNT_DEVICE_OK',
        deviceMountPath: event.deviceMountPath ?? '',
        devicePath: event.devicePath ?? '',
      });
      break;
    case 'unmountDevice':
    case 'tearDownDevice':
      stepAttachment(world, attachmentOrNew(world, op.volume, spec), { type: 'UNMOUNT_DEVICE_OK' });
      break;
    case 'setUp':
    case 'mapPodDevice':
      stepMount(world, mountOrNew(world, op.volume, op.pod!, undefined), { type: 'SETUP_OK' });
      break;
    case 'tearDown':
    case 'unmapPodDevice':
      stepMount(world, mountOrNew(world, op.volume, op.pod!, undefined), { type: 'TEARDOWN_OK' });
      break;
    case 'nodeExpand':
      stepAttachment(world, attachmentOrNew(world, op.volume, spec), {
        type: 'RESIZED',
        sizeBytes: event.sizeBytes ?? 0,
      });
      if (spec?.claim !== undefined)
        claimExpanded(world, spec.claim, spec.innerVolumeSpecName, event.sizeBytes ?? 0);
      break;
    default:
      break;
  }
  touch(world, op.volume);
}

export function foldCallFailed(world: World, event: EventOf<'CallFailed'>): void {
  const op = running(world, event.opId);
  if (op.call !== event.call)
    fail(`operation ${op.opId}: ${event.call} failed while ${op.call} ran (seq ${event.seq})`);
  op.call = null;
  op.lastError = event.error;
  const kind: ErrorKind = event.error.kind;
  switch (event.call) {
    case 'attach':
      // Kubelet attach mode: only an uncertain error may have attached (SCENARIOS.md).
      stepAttachment(world, attachmentOrNew(world, op.volume, undefined), {
        type: 'ATTACH_FAIL',
        uncertain: kind === 'uncertain',
      });
      break;
    case 'detach':
      stepAttachment(world, attachmentOrNew(world, op.volume, undefined), {
        type: 'DETACH_FAIL',
        uncertain: kind === 'uncertain',
      });
      break;
    case 'mountDevice':
    case 'setUpDevice':
      stepAttachment(world, attachmentOrNew(world, op.volume, undefined), {
        type: 'MOUNT_DEVICE_FAIL',
        errorKind: kind,
      });
      break;
    case 'unmountDevice':
    case 'tearDownDevice':
      stepAttachment(world, attachmentOrNew(world, op.volume, undefined), {
        type: 'UNMOUNT_DEVICE_FAIL',
      });
      break;
    case 'setUp':
    case 'mapPodDevice':
      stepMount(world, mountOrNew(world, op.volume, op.pod!, undefined), {
        type: 'SETUP_FAIL',
        errorKind: kind,
      });
      break;
    case 'tearDown':
    case 'unmapPodDevice':
      stepMount(world, mountOrNew(world, op.volume, op.pod!, undefined), { type: 'TEARDOWN_FAIL' });
      break;
    case 'nodeExpand':
      if (event.error.failedPrecondition === true) {
        stepAttachment(world, attachmentOrNew(world, op.volume, undefined), {
          type: 'EXPANSION_IN_USE_ERROR',
        });
      } else if (op.op === 'mount' && op.pod !== null) {
        // §4.7 step 12: mounted, but must not be used until the expansion succeeds.
        stepMount(
          world,
          mountOrNew(world, op.volume, op.pod, undefined),
          { type: 'EXPAND_IN_MOUNT_FAIL' },
          { observation: true },
        );
      }
      break;
    default:
      break; // waitForAttach and the other read-only calls change no pair (spec §4.7 step 7).
  }
  recordError(world, op, event.error, event.seq as Seq, event.tsMs);
  touch(world, op.volume);
}

function recordError(world: World, op: RunningOp, error: CallError, seq: Seq, tsMs: number): void {
  world.lastErrors.set(op.volume, { message: error.message, seq, tsMs });
}

/** spec §5.4 completion: success deletes the exact record; failure escalates its backoff. */
function completeRecord(
  world: World,
  op: RunningOp,
  failure: CallError | null,
  tsMs: number,
): void {
  finishRecord(world.ops, op.volume, op, { failure, tsMs, seq: world.seq });
  if (!world.ops.has(op.volume)) mayBeGone(op.volume);
}

export function foldOperationFinished(world: World, event: EventOf<'OperationFinished'>): void {
  const op = running(world, event.opId);
  if (op.call !== null)
    fail(`operation ${op.opId} finished during its ${op.call} call (seq ${event.seq})`);
  const failure =
    event.outcome === 'ok'
      ? null
      : (event.error ??
        op.lastError ?? {
          kind: 'final' as const,
          message: 'operation failed',
        });
  if (failure !== null && op.lastError === null)
    recordError(world, op, failure, event.seq as Seq, event.tsMs);
  completeRecord(world, op, failure, event.tsMs);
  world.running.delete(op.opId);
  touch(world, op.volume);
}

/**
 * DESIGN.md crash rule, for EngineStarted: every call in flight is cut off. Its pair goes
 * uncertain and its operation counts as a failed attempt, so the call that killed the
 * engine is not retried in a tight crash loop.
 */
export function cutOffRunningOperations(world: World, tsMs: number): void {
  const cutOff: CallError = {
    kind: 'uncertain',
    message: 'operation cut off: the engine stopped while it ran',
  };
  for (const op of [...world.running.values()].sort((a, b) => a.startedSeq - b.startedSeq)) {
    const attachment = world.attachments.get(op.volume);
    if (attachment !== undefined)
      stepAttachment(world, attachment, { type: 'CRASH' }, { observation: true });
    const mount = op.pod === null ? undefined : world.mounts.get(op.volume)?.get(op.pod);
    if (mount !== undefined) stepMount(world, mount, { type: 'CRASH' }, { observation: true });
    recordError(world, op, cutOff, world.seq, tsMs);
    completeRecord(world, op, cutOff, tsMs);
    world.running.delete(op.opId);
    touch(world, op.volume);
  }
}
