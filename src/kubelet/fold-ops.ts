/**
 * Folding operation events: OperationStarted, each plugin call's start and outcome, and
 * OperationFinished (behaviour K4 operation outcomes, K5 pending operations and backoff).
 */
import { fail } from '../assert.js';
import { bookCall, cutOffOperations, finishOperation, startOperation } from '../operations/book.js';
import { callTable, type FailureReading, type PairStep, stepCalls } from '../operations/calls.js';
import { type EventOf, provisionCallNames } from '../events/index.js';
import { foldProvisioningCall } from './fold-provisioning.js';
import { provisionStarted } from '../binding/provisioning.js';
import { NodeName, UniquePodName, UniqueVolumeName } from '../ids.js';
import { claimExpanded, touch } from './fold-desired.js';
import { podEntries, podEntry } from './memory.js';
import { mayBeGone } from './gone.js';
import { attachmentOrNew, mountOrNew, stepAttachment, stepMount } from './pairs.js';
import type { World } from './types.js';
import { mountCoveredBy, recordMountIntents } from './mount-intents.js';
import type { RunningOp } from '../operations/types.js';

/** The desired spec of an operation's volume: the pod's entry, else any desiring pod's. */
function desiredSpec(world: World, volume: UniqueVolumeName, pod: UniquePodName | null) {
  const pods = world.volumes.get(volume)?.pods;
  if (pods === undefined) return null;
  if (pod !== null) return podEntry(pods, pod)?.resolved ?? null;
  for (const first of podEntries(pods)) return first.resolved;
  return null;
}

/**
 * The world's own copy of a volume name equal to `name`, when it has one. Every event read
 * from the log brings fresh strings; records built from them would each keep their own
 * copy of the same name (a few dozen bytes a pair, a few hundred a pod).
 */
function canonicalVolume(world: World, name: string): UniqueVolumeName {
  const volume = UniqueVolumeName(name);
  // The record holds the name it was made with (its map key is the same string).
  return world.volumes.get(volume)?.volume ?? volume;
}

/** The world's own copy of a pod UID equal to `uid` (see canonicalVolume). */
function canonicalPod(world: World, uid: string): UniquePodName {
  const pod = UniquePodName(uid);
  return world.pods.get(pod)?.uid ?? pod;
}

/** behaviour K5.3 Run: the book records the start; the operation captures the desired spec. */
export function foldOperationStarted(world: World, event: EventOf<'OperationStarted'>): void {
  const volume = canonicalVolume(world, event.volume);
  const pod = event.pod === undefined ? null : canonicalPod(world, event.pod);
  // Only the first call waited for the log: a crash may have cut off any later step.
  const { steps } = event;
  const coveredBy = event.op === 'mount' ? mountCoveredBy(world, volume, pod) : undefined;
  // A covered mount waited for no commit of its own: its first call may be lost too.
  const laterCallsMayBeLost =
    world.config.durableCalls === 'first' &&
    steps !== undefined &&
    (steps.length > 1 || (coveredBy !== undefined && steps.length > 0));
  startOperation(world, event, {
    volume,
    pod,
    spec: desiredSpec(world, volume, pod),
    node: event.node === undefined ? null : NodeName(event.node),
    steps: laterCallsMayBeLost ? steps : undefined,
    ...(coveredBy === undefined ? {} : { coveredBy }),
  });
  recordMountIntents(world, event);
  if (event.provision !== undefined) provisionStarted(world.provisioning, volume, event.provision);
  touch(world, volume);
}

const provisioningCalls: ReadonlySet<string> = new Set(provisionCallNames);

/** The kubelet trusts a final error: nothing took effect (behaviour K0.5). */
const kubeletReading: FailureReading = { uncertainOnAnyFailure: false };

/** Applies one pair step the call table names to the operation's pair. */
function applyStep(
  world: World,
  op: RunningOp,
  step: PairStep,
  seq: number,
  observation = step.observation,
): void {
  const spec = step.create ? (op.spec ?? undefined) : undefined;
  const opts = { observation };
  if (step.pair === 'attachment') {
    stepAttachment(world, attachmentOrNew(world, op.volume, spec), step.event, opts);
    return;
  }
  if (op.pod === null) fail(`${step.event.type} of ${op.opId} without a pod (seq ${seq})`);
  stepMount(world, mountOrNew(world, op.volume, op.pod, spec), step.event, opts);
}

export function foldCall(
  world: World,
  event: EventOf<'CallStarted' | 'CallSucceeded' | 'CallFailed'>,
): void {
  const op = bookCall(world, event);
  if (provisioningCalls.has(event.call)) {
    foldProvisioningCall(world, op, event);
    touch(world, op.volume);
    return;
  }
  const effects = callTable[event.call];
  const step =
    event.type === 'CallStarted'
      ? effects.started?.(event, op, kubeletReading)
      : event.type === 'CallSucceeded'
        ? effects.succeeded?.(event, op, kubeletReading)
        : effects.failed?.(event, op, kubeletReading);
  if (step !== undefined && step !== null) applyStep(world, op, step, event.seq);
  const claimSizeBytes = op.spec?.traits.claimSizeBytes ?? 0;
  if (event.type === 'CallSucceeded' && effects.claimSizeAfterSuccess && claimSizeBytes > 0) {
    stepAttachment(world, attachmentOrNew(world, op.volume, op.spec ?? undefined), {
      type: 'CLAIM_SIZE_KNOWN',
      sizeBytes: claimSizeBytes,
    });
  }
  // A finished expansion raises the claim's capacity (its status, as Kubernetes records it).
  const claim = op.spec?.claim;
  if (event.type === 'CallSucceeded' && event.call === 'nodeExpand' && claim !== undefined) {
    const namespace = op.spec!.claimNamespace ?? 'default';
    const pvName = op.spec!.innerVolumeSpecName;
    claimExpanded(world, { name: claim, namespace }, pvName, event.sizeBytes ?? 0);
  }
  touch(world, op.volume);
}

export function foldOperationFinished(world: World, event: EventOf<'OperationFinished'>): void {
  const op = finishOperation(world, event);
  if (!world.ops.has(op.volume)) mayBeGone(world, op.volume);
  touch(world, op.volume);
}

/**
 * docs/reliability.md "Durable points": an operation whose first call waited for the log
 * ran its later steps without waiting, so their CallStarted may be what the crash lost.
 * Each step after the last one the log saw started is taken as started (its pair moves as
 * its CallStarted would move it, where the machine accepts it), so the CRASH that follows
 * leaves it uncertain: it may have run. No CallStarted at all: the first call never ran; a
 * CallFailed: the operation stopped there.
 */
function startUnloggedSteps(world: World, op: RunningOp, tsMs: number): void {
  const started = op.callsStarted ?? 0;
  // A failed call (in the log) ended the operation: nothing ran after it. No call in the
  // log: the first never ran, unless a mount intent covered it (it waited for no commit).
  const firstRan = started > 0 || op.coveredBy !== undefined;
  if (op.steps === undefined || !firstRan || op.spec === null || op.lastError !== null) return;
  for (const step of op.steps.slice(started)) {
    const call = stepCalls[step];
    const event = { type: 'CallStarted', seq: world.seq, tsMs, opId: op.opId, call } as const;
    const pairStep = callTable[call].started?.(event, op, kubeletReading);
    if (pairStep !== undefined && pairStep !== null)
      applyStep(world, op, pairStep, world.seq, true);
  }
}

/**
 * docs/design.md crash rule, for EngineStarted: every call in flight is cut off. Its pair goes
 * uncertain and its operation counts as a failed attempt (the book's cut-off).
 */
export function cutOffRunningOperations(world: World, tsMs: number): void {
  const ops = cutOffOperations(world, { seq: world.seq, tsMs }, 'engine', (op) => {
    startUnloggedSteps(world, op, tsMs);
    const attachment = world.volumes.get(op.volume)?.attachment;
    if (attachment !== undefined)
      stepAttachment(world, attachment, { type: 'CRASH' }, { observation: true });
    const mounts = world.volumes.get(op.volume)?.mounts;
    const mount = op.pod === null ? undefined : podEntry(mounts, op.pod);
    if (mount !== undefined) stepMount(world, mount, { type: 'CRASH' }, { observation: true });
  });
  for (const op of ops) if (!world.ops.has(op.volume)) mayBeGone(world, op.volume);
}
