/**
 * Events on claims, as Kubernetes' PersistentVolume controller records them while a claim
 * waits (pv_controller.go syncUnboundClaim and provisionClaim): what `kubectl describe pvc`
 * shows a person whose claim stays Pending. `claimEventOf` is pure: the Event for where an
 * unbound claim stands in the leading controller's world. `ClaimEvents` records it for every
 * unbound claim at each sync (every 15 s, the binder's default `--pvclaimbinder-sync-period`,
 * and at once when the planner leaves a claim to the external provisioner); a repeat raises
 * the count of the same Event, as upstream's recorder does.
 */
import type { ControllerManager } from '../agent/controller-manager.js';
import type { Clock, TimerHandle } from '../clock.js';
import { boundVolumes, findVolumeForClaim, isClaimBound, lookupOf } from '../binding/claims.js';
import { storageProvisionerAnnotation } from '../binding/external-provisioning.js';
import { claimClassName, storageClassOf, waitsForFirstConsumer } from '../binding/storage-class.js';
import { consumerNode } from '../controller/provisioning.js';
import type { ControllerWorld } from '../controller/types.js';
import { podsReferencing } from '../desired/references.js';
import type { PersistentVolumeClaim } from '../events/k8s.js';
import type { EventRecorder, KubeEvent } from './pod-events.js';

/** The binder's resync period upstream (kube-controller-manager --pvclaimbinder-sync-period). */
export const claimSyncPeriodMsDefault = 15_000;

/** The pods that name the claim but are not scheduled yet (no node), by name. */
function unscheduledConsumers(world: ControllerWorld, pvc: PersistentVolumeClaim): string[] {
  const { name, namespace } = pvc.metadata;
  const names: string[] = [];
  for (const uid of podsReferencing(world.podsByObject, 'PersistentVolumeClaim', name, namespace)) {
    const record = world.pods.get(uid);
    if (record !== undefined && record.node === null && !record.terminated)
      names.push(record.pod.metadata.name);
  }
  return names.sort();
}

function waitForConsumer(
  world: ControllerWorld,
  pvc: PersistentVolumeClaim,
): Omit<KubeEvent, 'object'> {
  const pods = unscheduledConsumers(world, pvc);
  if (pods.length === 0)
    return {
      type: 'Normal',
      reason: 'WaitForFirstConsumer',
      message: 'waiting for first consumer to be created before binding',
    };
  const message =
    pods.length === 1
      ? `waiting for pod ${pods[0]} to be scheduled`
      : `waiting for pods ${pods.join(',')} to be scheduled`;
  return { type: 'Normal', reason: 'WaitForPodScheduled', message };
}

/**
 * The Event the PV controller records for an unbound claim at a sync, or undefined (bound,
 * being deleted, naming its PV, or a PersistentVolume fits it: the binder binds it).
 */
export function claimEventOf(
  world: ControllerWorld,
  pvc: PersistentVolumeClaim,
  /** The PVs bound now (boundVolumes): a sync over every claim reads them once. */
  taken?: ReadonlyMap<string, string>,
): KubeEvent | undefined {
  const { uid, name, namespace = 'default', deletionTimestamp } = pvc.metadata;
  if (uid === undefined || deletionTimestamp !== undefined) return undefined;
  if (isClaimBound(pvc, world.bindings) || (pvc.spec.volumeName ?? '') !== '') return undefined;
  const bound = taken ?? boundVolumes(world.objects, world.bindings);
  if (findVolumeForClaim(pvc, world.objects, bound).ok) return undefined;
  const object = { kind: 'PersistentVolumeClaim' as const, uid, name, namespace };
  const lookup = lookupOf(world.objects);
  const className = claimClassName(pvc, lookup);
  if (className === '')
    return {
      object,
      type: 'Normal',
      reason: 'FailedBinding',
      message: 'no persistent volumes available for this claim and no storage class is set',
    };
  const sc = storageClassOf(lookup, className);
  if (sc === undefined)
    return {
      object,
      type: 'Warning',
      reason: 'ProvisioningFailed',
      message: `storageclass.storage.k8s.io "${className}" not found`,
    };
  if (waitsForFirstConsumer(sc) && consumerNode(world, pvc) === undefined)
    return { object, ...waitForConsumer(world, pvc) };
  const provisioner = pvc.metadata.annotations?.[storageProvisionerAnnotation];
  if (provisioner === undefined) return undefined; // not yet left to a provisioner
  return {
    object,
    type: 'Normal',
    reason: 'ExternalProvisioning',
    message:
      `Waiting for a volume to be created either by the external provisioner '${provisioner}' ` +
      'or manually by the system administrator. If volume creation is delayed, please verify ' +
      'that the provisioner is running and correctly registered.',
  };
}

export interface ClaimEventsOptions {
  readonly cm: Pick<ControllerManager, 'world' | 'subscribe'>;
  readonly recorder: Pick<EventRecorder, 'record'>;
  /** Resolves while this replica leads (the Lease): a deposed replica writes nothing. */
  readonly fence: () => Promise<void>;
  readonly say: (line: string) => void;
  readonly clock: Clock;
  readonly periodMs?: number;
}

/** Records each unbound claim's Event at every sync while the controller leads. */
export class ClaimEvents {
  private timer: TimerHandle | null = null;
  private soon: NodeJS.Immediate | null = null;
  private unsubscribe: (() => void) | null = null;

  constructor(private readonly opts: ClaimEventsOptions) {}

  start(): void {
    this.every(this.opts.periodMs ?? claimSyncPeriodMsDefault);
    this.unsubscribe = this.opts.cm.subscribe((event) => {
      // A claim just left to the external provisioner is told so at once, as upstream does.
      if (event.type === 'ExternalProvisioningRequested') this.syncSoon();
    });
    this.syncSoon();
  }

  stop(): void {
    if (this.timer !== null) this.opts.clock.clearTimer(this.timer);
    if (this.soon !== null) clearImmediate(this.soon);
    this.timer = null;
    this.soon = null;
    this.unsubscribe?.();
  }

  /** An interval on the clock: each sync due `periodMs` after the last one was due. */
  private every(periodMs: number, fromMs = this.opts.clock.nowMs()): void {
    const atMs = fromMs + periodMs;
    this.timer = this.opts.clock.setTimer(atMs, () => {
      this.sync();
      if (this.timer !== null) this.every(periodMs, atMs);
    });
  }

  private syncSoon(): void {
    this.soon ??= setImmediate(() => {
      this.soon = null;
      this.sync();
    });
  }

  /** One sync now: the Event of every unbound claim, written once the Lease is confirmed. */
  sync(): void {
    const world = this.opts.cm.world;
    const events: KubeEvent[] = [];
    const taken = boundVolumes(world.objects, world.bindings);
    for (const object of lookupOf(world.objects).ofKind('PersistentVolumeClaim')) {
      if (object.kind !== 'PersistentVolumeClaim') continue;
      const event = claimEventOf(world, object, taken);
      if (event !== undefined) events.push(event);
    }
    if (events.length === 0) return;
    void this.opts
      .fence()
      .then(() => Promise.all(events.map((event) => this.opts.recorder.record(event))))
      .catch((error: Error) => this.opts.say(`claim Events not written: ${error.message}`));
  }
}
