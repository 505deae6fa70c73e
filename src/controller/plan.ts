/**
 * The controller's reconciler (behaviour C3.3–3.5) as a pure planner: the detach pass, then
 * the attach pass, over the dirty volumes, nodes in sorted order. Multi-attach refusals
 * come back as ReportRaised events (once per desired entry); waits for unmount come back
 * as retry times, so a forced detach happens on time without polling.
 */
import { assert } from '../assert.js';
import { Claims as BookClaims } from '../operations/book.js';
import type { Decision, NewEvent, OpKey, ProvisionRequest } from '../events/index.js';
import type { NodeName, Seq, UniqueVolumeName } from '../ids.js';
import { keysConflict } from '../operations/pending.js';
import { planBindings } from '../binding/decide.js';
import { bindingVolume } from '../binding/claims.js';
import { attachmentsOf } from './fold-pairs.js';
import { heldDetach, planControllerOperatorRequests } from './operator.js';
import { planExternalProvisioning } from './plan-external.js';
import { controllerStorageWaits, planControllerStorage } from './plan-provision.js';
import {
  type ControllerAttachment,
  type ControllerOperation,
  type ControllerWorld,
  type DesiredAttachment,
  desiredAt,
  desiredPods,
  isAttached,
  isDesired,
  pairKey,
} from './types.js';
import { valuesOf } from '../desired/one-or-many.js';

export type { ControllerOperation } from './types.js';

export interface ControllerPlan {
  readonly operations: ControllerOperation[];
  readonly retries: { volume: UniqueVolumeName; atMs: number }[];
  readonly deferred: UniqueVolumeName[];
  readonly events: NewEvent[];
}

/** behaviour C0.3: the key names the node only for volumes that may attach to several nodes. */
function opKey(volume: string, node: string, multiAttachAllowed: boolean): OpKey {
  return { volume, pod: '', node: multiAttachAllowed ? node : '' };
}

function confirmedOn(a: ControllerAttachment): boolean {
  return a.value.startsWith('attached') || a.value === 'detaching';
}

type Claims = BookClaims<ControllerOperation>;

/** behaviour C3.3 the detach pass for one attachment no pod wants on its node. */
function planDetach(world: ControllerWorld, claims: Claims, a: ControllerAttachment): void {
  const held = heldDetach(world, a.volume, a.node);
  if (isDesired(a) && held === undefined) return;
  if (a.value === 'attaching' || a.value === 'detaching') return; // in flight
  const key = opKey(a.volume, a.node, a.attachedSpec.traits.multiAttachAllowed);
  const cause = world.causes.get(a.volume) ?? world.seq;
  const base = { op: 'detach' as const, volume: a.volume, node: a.node, key, cause };
  const verdict = claims.verdict(base);
  if (verdict.kind !== 'run') return claims.tryRun(base); // pending, or backoff (retry time)
  // An operator's accepted detach: now; forced past the in-use check when it was forced.
  if (held !== undefined) return claims.tryRun({ ...base, verifySafeToDetach: !held.force });
  const node = world.nodes.get(a.node);
  const { maxWaitForUnmountMs, disableForceDetachOnTimeout } = world.config;
  const requestedAtMs = a.detachRequestedAtMs ?? claims.nowMs;
  const expired = claims.nowMs - requestedAtMs > maxWaitForUnmountMs;
  const healthy = node?.exists === true && node.ready;
  const forceTimeout = expired && !disableForceDetachOnTimeout;
  const forceDetach = !healthy && forceTimeout;
  const oos = node?.outOfService === true;
  const mountedByNode = node?.volumesInUse.has(a.volume) === true;
  if (mountedByNode && !forceDetach && !oos) {
    // Waiting for the node to unmount; an unhealthy node is forced once the wait expires.
    if (!healthy && !disableForceDetachOnTimeout) {
      claims.retries.push({ volume: a.volume, atMs: requestedAtMs + maxWaitForUnmountMs + 1 });
    }
    return;
  }
  const forced = oos ? 'out-of-service' : forceTimeout ? 'timeout' : undefined;
  claims.tryRun({
    ...base,
    verifySafeToDetach: !(forceTimeout || oos),
    ...(forced === undefined ? {} : { forced }),
  });
}

/** behaviour C3.5 the Multi-Attach message for one pod of the refused entry. */
function multiAttachMessage(
  world: ControllerWorld,
  entry: DesiredAttachment,
  namespace: string,
  otherNodes: NodeName[],
): string {
  const others = otherNodes.flatMap((n) => {
    const there = desiredAt(world, pairKey(entry.volume, n));
    return there === undefined ? [] : desiredPods(world, there);
  });
  const head = `Multi-Attach error for volume "${entry.desiredSpec.innerVolumeSpecName}" `;
  if (others.length === 0)
    return `${head}Volume is already exclusively attached to one node and can't be attached to another`;
  const local = others.filter((p) => p.namespace === namespace).map((p) => p.name);
  const elsewhere = others.length - local.length;
  if (local.length === 0)
    return `${head}Volume is already used by ${elsewhere} pod(s) in different namespaces`;
  return `${head}Volume is already used by pod(s) ${local.join(', ')}${elsewhere > 0 ? ` and ${elsewhere} pod(s) in different namespaces` : ''}`;
}

/** behaviour C3.4 the attach pass for one desired (volume, node). */
function planAttach(
  world: ControllerWorld,
  claims: Claims,
  entry: DesiredAttachment,
  events: NewEvent[],
): void {
  if (entry.value.startsWith('attached')) return; // attached (timer reset by the fold)
  if (heldDetach(world, entry.volume, entry.node) !== undefined) return; // the operator detaches it
  const key = opKey(entry.volume, entry.node, entry.desiredSpec.traits.multiAttachAllowed);
  const cause = world.causes.get(entry.volume) ?? world.seq;
  const op: ControllerOperation = {
    op: 'attach',
    volume: entry.volume,
    node: entry.node,
    key,
    cause,
  };
  if (claims.verdict(op).kind === 'alreadyExists') return;
  if (!entry.desiredSpec.traits.multiAttachAllowed) {
    const otherNodes = attachmentsOf(world, entry.volume)
      // Confirmed only (behaviour C3.4, S7): an uncertain entry elsewhere does not block, or a dead
      // node's cut-off attach would hold the volume forever (L1); the storage refuses a
      // second attach of a disk that did attach there.
      .filter((o) => o.node !== entry.node && confirmedOn(o))
      .map((o) => o.node)
      .sort();
    if (otherNodes.length > 0) {
      if (!entry.multiAttachErrorReported) {
        const pods = desiredPods(world, entry).sort((x, y) => x.uid.localeCompare(y.uid));
        for (const { uid, namespace } of pods) {
          events.push({
            type: 'ReportRaised',
            tsMs: claims.nowMs,
            reason: 'FailedAttachVolume',
            pod: uid,
            volume: entry.volume,
            node: entry.node,
            message: multiAttachMessage(world, entry, namespace, otherNodes),
          });
        }
      }
      return;
    }
  }
  claims.tryRun(op);
}

function allControllerVolumes(world: ControllerWorld): Set<UniqueVolumeName> {
  return new Set([
    ...world.nodesByVolume.keys(),
    ...world.operator.pending.keys(),
    ...world.operator.holds.keys(),
  ]);
}

/** behaviour C0.3: no two operations of one plan conflict (keys only meet within a volume). */
function assertNoConflicts(world: ControllerWorld, operations: readonly ControllerOperation[]) {
  const byVolume = new Map<UniqueVolumeName, ControllerOperation[]>();
  for (const op of operations) {
    const same = byVolume.get(op.volume) ?? [];
    for (const other of same)
      assert(
        !keysConflict(op.key, other.key),
        () =>
          `controller plan: ${other.op} and ${op.op} on conflicting keys of ${op.volume} (seq ${world.seq})`,
      );
    same.push(op);
    byVolume.set(op.volume, same);
  }
}

const byKey = <T extends { volume: string; node: string }>(x: T, y: T) =>
  x.volume.localeCompare(y.volume) || x.node.localeCompare(y.node);

/**
 * The reconciler's passes over the given volumes (the dirty set; all when absent): the
 * detach pass, then the attach pass (behaviour C3.3 before C3.4). Each volume is looked up through
 * nodesByVolume, so a plan after one event costs the same at any number of attachments.
 */
export function planController(
  world: ControllerWorld,
  nowMs: number,
  opts: { volumes?: Iterable<UniqueVolumeName> } = {},
): ControllerPlan {
  // Claims are bound first, as in the kubelet's planner: operations wait for the bindings.
  const volumes = opts.volumes === undefined ? undefined : [...opts.volumes];
  const bound =
    volumes === undefined || volumes.includes(bindingVolume) ? planBindings(world, nowMs) : [];
  if (bound.length > 0) {
    const asked = volumes ?? [...allControllerVolumes(world)];
    const deferred = asked.filter((v) => v !== bindingVolume);
    // The claims left unbound are the provisioner's to look at once the bindings are folded.
    if (controllerStorageWaits(world)) deferred.push(bindingVolume);
    return { operations: [], retries: [], deferred, events: bound };
  }
  const plan = planAttachments(world, nowMs, volumes);
  if (volumes !== undefined && !volumes.includes(bindingVolume)) return plan;
  // The PV controller's part left to an external provisioner, on the same world.
  const external = planExternalProvisioning(world, nowMs);
  return external.length === 0 ? plan : { ...plan, events: [...external, ...plan.events] };
}

function planAttachments(
  world: ControllerWorld,
  nowMs: number,
  asked: Iterable<UniqueVolumeName> | undefined,
): ControllerPlan {
  assert(Number.isFinite(nowMs) && nowMs >= 0, () => `plan: bad nowMs ${nowMs}`);
  const claims: Claims = new BookClaims(world, nowMs);
  const volumes = [...(asked ?? allControllerVolumes(world))];
  // Operator verdicts first; their volumes are planned again once the verdicts are folded.
  const operator = planControllerOperatorRequests(world, volumes, nowMs);
  const events: NewEvent[] = operator.events;
  events.push(...planControllerStorage(world, claims, asked === undefined ? undefined : volumes));
  const attachments: ControllerAttachment[] = [];
  const desired: DesiredAttachment[] = [];
  for (const volume of volumes) {
    if (operator.decided.has(volume)) continue;
    for (const node of valuesOf(world.nodesByVolume.get(volume))) {
      const pair = world.pairs.get(pairKey(volume, node));
      if (pair === undefined) continue;
      if (isAttached(pair)) attachments.push(pair);
      if (isDesired(pair)) desired.push(pair);
    }
  }
  for (const a of attachments.sort(byKey)) planDetach(world, claims, a);
  for (const entry of desired.sort(byKey)) planAttach(world, claims, entry, events);
  assertNoConflicts(world, claims.operations);
  const deferred = [...operator.decided];
  return { operations: claims.operations, retries: claims.retries, deferred, events };
}

/** What OperationStarted records of a controller operation. */
export function controllerDecision(op: ControllerOperation): Decision {
  return {
    op: op.op,
    key: op.key,
    volume: op.volume,
    node: op.node,
    cause: op.cause,
    ...(op.verifySafeToDetach === undefined ? {} : { verifySafeToDetach: op.verifySafeToDetach }),
    ...(op.forced === undefined ? {} : { forced: op.forced }),
    ...(op.provision === undefined ? {} : { provision: op.provision }),
    ...(op.refused === undefined ? {} : { refused: op.refused }),
    ...(op.pv === undefined ? {} : { pv: op.pv }),
    ...(op.sizeBytes === undefined ? {} : { sizeBytes: op.sizeBytes }),
  };
}

export function describeControllerOperation(op: ControllerOperation): string {
  if (op.op === 'provision') return `provision ${op.volume} for claim ${claimOf(op.provision)}`;
  if (op.op === 'deleteVolume') return `deleteVolume ${op.volume} (PersistentVolume ${op.pv})`;
  if (op.op === 'controllerExpand')
    return `controllerExpand ${op.volume} to ${op.sizeBytes} bytes (PersistentVolume ${op.pv})`;
  return `${op.op} ${op.volume}@${op.node}${op.forced ? ` (forced: ${op.forced})` : ''}`;
}

function claimOf(request: ProvisionRequest | undefined): string {
  return request === undefined ? '?' : `${request.claim.namespace}/${request.claim.name}`;
}
