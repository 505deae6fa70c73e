/**
 * Claim bindings in cluster mode: the leading controller's planner binds claims (its log
 * records each ClaimBound, by the persistent-volume controller's rules, src/binding/claims.ts)
 * and this writer makes each binding the cluster's: the claim gets `spec.volumeName` and
 * `status: {phase: Bound, capacity}`, the PV `spec.claimRef` and `status.phase: Bound`, both
 * in one transaction fenced on the leader's term and on the two objects' mod revisions (an
 * object changed meanwhile is read again). Node agents only read these bindings (their
 * planners bind nothing: EngineStarted `bindClaims: false`).
 *
 * A PV the leader provisioned (`pv.kubernetes.io/provisioned-by`, in its world only) is
 * created by the same transaction, compared absent: a deposed leader creates no volume
 * object, as it binds none. Once DeleteVolume removed a Released provisioned PV's volume,
 * the PV is deleted from etcd, fenced the same way.
 *
 * ControllerExpandVolume answered: the PV's capacity in etcd grows, fenced the same way.
 * pvc-protection's decision (ClaimFinalizerRemoved) removes the claim's
 * `kubernetes.io/pvc-protection` finalizer, fenced the same way; with no finalizer left the
 * claim being deleted goes, as the API server removes it.
 *
 * A binding is written once the ClaimBound holding it is durable in etcd. A new leader
 * writes every binding of its log that etcd lacks, and a claim or PV written again without
 * its binding (`vole apply` of the original manifest) gets it back.
 */
import type { ControllerManager } from '../agent/controller-manager.js';
import { assert } from '../assert.js';
import { type Clock, sleep } from '../clock.js';
import {
  type ManifestObject,
  objectKey,
  parseQuantityBytes,
  type PersistentVolume,
  type PersistentVolumeClaim,
} from '../events/k8s.js';
import type { ClaimBinding } from '../binding/claims.js';
import { provisionedByAnnotation } from '../binding/storage-class.js';
import { isProtectionCandidate, withoutProtectionFinalizer } from '../binding/claim-protection.js';
import type { EtcdEventLog } from './etcd-log.js';
import type { ClusterKeys } from './keys.js';
import type { Leadership } from './leadership.js';
import { decodeObject, storedForm } from './objects.js';
import type { Compare, KvStore, TxnOp } from './store.js';

type Controller = Pick<ControllerManager, 'world' | 'subscribe'>;

/** A dirty key naming a claim whose pvc-protection finalizer is to be removed. */
const releasePrefix = 'release:';
/** A dirty key naming a PV whose capacity grew (ControllerExpandVolume answered). */
const capacityPrefix = 'capacity:';

interface Stored<T> {
  readonly object: T;
  readonly modRevision: number;
}

/** The claim as a binding leaves it: volumeName, phase Bound, its capacity. */
function boundClaim(
  pvc: PersistentVolumeClaim,
  binding: ClaimBinding,
  pv: PersistentVolume,
): PersistentVolumeClaim {
  assert(
    pv.metadata.name === binding.volume,
    `claim ${pvc.metadata.name} is bound to ${binding.volume}, not to ${pv.metadata.name}`,
  );
  const pvStorage = pv.spec.capacity?.storage;
  const storage =
    pvStorage !== undefined && parseQuantityBytes(pvStorage) === binding.capacityBytes
      ? pvStorage
      : String(binding.capacityBytes);
  return {
    ...pvc,
    spec: { ...pvc.spec, volumeName: binding.volume },
    status: { ...pvc.status, phase: 'Bound', capacity: { ...pvc.status?.capacity, storage } },
  };
}

/** The PV as a binding leaves it: claimRef to the claim, phase Bound. */
function boundVolume(pv: PersistentVolume, pvc: PersistentVolumeClaim): PersistentVolume {
  const claimRef = {
    ...pv.spec.claimRef,
    kind: 'PersistentVolumeClaim',
    namespace: pvc.metadata.namespace ?? 'default',
    name: pvc.metadata.name,
    ...(pvc.metadata.uid === undefined ? {} : { uid: pvc.metadata.uid }),
  };
  return { ...pv, spec: { ...pv.spec, claimRef }, status: { ...pv.status, phase: 'Bound' } };
}

function claimHolds(pvc: PersistentVolumeClaim, binding: ClaimBinding): boolean {
  return pvc.spec.volumeName === binding.volume && pvc.status?.phase === 'Bound';
}

function volumeHolds(pv: PersistentVolume, pvc: PersistentVolumeClaim): boolean {
  const ref = pv.spec.claimRef;
  return (
    pv.status?.phase === 'Bound' &&
    ref?.name === pvc.metadata.name &&
    (ref.namespace ?? 'default') === (pvc.metadata.namespace ?? 'default')
  );
}

/** Why etcd's objects name another binding (a claim's volumeName or a PV's claimRef is never taken back). */
function conflictOf(
  pvc: PersistentVolumeClaim,
  pv: PersistentVolume,
  binding: ClaimBinding,
): string | undefined {
  const volumeName = pvc.spec.volumeName ?? '';
  if (volumeName !== '' && volumeName !== binding.volume)
    return `the claim names volumeName ${volumeName}`;
  const ref = pv.spec.claimRef;
  const claim = `${pvc.metadata.namespace ?? 'default'}/${pvc.metadata.name}`;
  if (ref?.name !== undefined && `${ref.namespace ?? 'default'}/${ref.name}` !== claim)
    return `the PersistentVolume's claimRef names ${ref.namespace ?? 'default'}/${ref.name}`;
  return undefined;
}

export class ClaimBindingWriter {
  /** Claim keys whose binding etcd may lack. */
  private readonly dirty = new Set<string>();
  /** A running deleteVolume or controllerExpand operation → its PV. */
  private readonly pvOfOp = new Map<string, string>();
  /** PV name → the claim key bound to it (a PV written again names its claim). */
  private readonly claimOfVolume = new Map<string, string>();
  private scheduled = false;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;
  private unsubscribe: (() => void) | null = null;
  /** Bindings written (for tests and the progress line). */
  written = 0;

  constructor(
    private readonly client: KvStore,
    private readonly keys: ClusterKeys,
    private readonly leadership: Leadership,
    private readonly log: Pick<EtcdEventLog, 'durable'>,
    private readonly cm: Controller,
    private readonly say: (line: string) => void,
    private readonly clock: Clock,
  ) {}

  start(): void {
    // A new leader: the bindings of its log that the claims and PVs it holds lack (what the
    // old leader had not written yet). Objects that changed in etcd meanwhile come in as
    // ObjectUpserted once the inputs list them, and are looked at then: no read per binding.
    const { world } = this.cm;
    for (const [key, binding] of world.bindings) {
      this.claimOfVolume.set(binding.volume, key);
      const pvc = world.objects.get(key);
      const pv = world.objects.get(objectKey('PersistentVolume', binding.volume));
      if (pvc?.kind !== 'PersistentVolumeClaim' || pv?.kind !== 'PersistentVolume') continue;
      // A provisioned PV may be in the log only (its creation cut off with the old leader).
      const provisioned = pv.metadata.annotations?.[provisionedByAnnotation] !== undefined;
      if (provisioned || !claimHolds(pvc, binding) || !volumeHolds(pv, pvc)) this.dirty.add(key);
    }
    this.unsubscribe = this.cm.subscribe((event, world) => {
      const ofPv = event.type === 'OperationStarted' && event.pv !== undefined;
      if (ofPv && (event.op === 'deleteVolume' || event.op === 'controllerExpand'))
        this.pvOfOp.set(event.opId, event.pv!);
      else if (event.type === 'OperationFinished') this.pvOfOp.delete(event.opId);
      else if (event.type === 'CallSucceeded' && event.call === 'deleteVolume') {
        const pv = this.pvOfOp.get(event.opId);
        if (pv !== undefined) this.mark(`PersistentVolume//${pv}`);
      } else if (event.type === 'CallSucceeded' && event.call === 'controllerExpand') {
        const pv = this.pvOfOp.get(event.opId);
        if (pv !== undefined) this.mark(capacityPrefix + pv);
      } else if (event.type === 'ClaimFinalizerRemoved') {
        this.mark(releasePrefix + objectKey('PersistentVolumeClaim', event.claim, event.namespace));
      } else if (event.type === 'ClaimBound') {
        const key = objectKey('PersistentVolumeClaim', event.claim, event.namespace);
        this.claimOfVolume.set(event.volume, key);
        this.mark(key);
      } else if (event.type === 'ObjectUpserted') {
        const { object } = event;
        if (object.kind === 'PersistentVolumeClaim') {
          const key = objectKey(object.kind, object.metadata.name, object.metadata.namespace);
          const binding = world.bindings.get(key);
          if (binding !== undefined && !claimHolds(object, binding)) this.mark(key);
        } else if (object.kind === 'PersistentVolume') {
          const key = this.claimOfVolume.get(object.metadata.name);
          if (key === undefined || world.bindings.get(key)?.volume !== object.metadata.name) return;
          const pvc = world.objects.get(key);
          if (pvc?.kind !== 'PersistentVolumeClaim' || !volumeHolds(object, pvc)) this.mark(key);
        }
      }
    });
    this.schedule();
  }

  private mark(key: string): void {
    this.dirty.add(key);
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled || this.stopped || this.dirty.size === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const claims = [...this.dirty];
      this.dirty.clear();
      this.running = this.running.then(() => this.writeAll(claims));
    });
  }

  private async writeAll(claims: readonly string[]): Promise<void> {
    if (this.stopped || this.leadership.isLost) return;
    let failed: string[] = [];
    try {
      await this.log.durable();
      for (let i = 0; i < claims.length; i++) {
        if (this.stopped || this.leadership.isLost) return;
        const key = claims[i]!;
        const write = key.startsWith(releasePrefix)
          ? this.releaseOne(key.slice(releasePrefix.length))
          : key.startsWith(capacityPrefix)
            ? this.growOne(key.slice(capacityPrefix.length))
            : key.startsWith('PersistentVolume/')
              ? this.deleteOne(key)
              : this.writeOne(key);
        const ok = await write.catch((error: Error) => {
          this.say(`writing the binding of claim ${claims[i]} failed, retrying: ${error.message}`);
          return false;
        });
        if (!ok) failed.push(claims[i]!);
      }
    } catch (error) {
      if (this.leadership.isLost) return;
      this.say(`writing claim bindings failed, retrying: ${(error as Error).message}`);
      failed = [...claims];
    }
    if (failed.length === 0 || this.stopped) return;
    await sleep(this.clock, 500);
    for (const key of failed) this.dirty.add(key);
    this.schedule();
  }

  /** The object under `key` as stored (validated again: etcdctl can write anything). */
  private async read<K extends 'PersistentVolume' | 'PersistentVolumeClaim'>(
    key: string,
    kind: K,
  ): Promise<Stored<Extract<ManifestObject, { kind: K }>> | undefined> {
    const kv = await this.client.get(key);
    if (kv === undefined) return undefined;
    const decoded = decodeObject(kv);
    if (!decoded.ok || decoded.value.kind !== kind) {
      this.say(`not binding through ${key}: ${decoded.ok ? `not a ${kind}` : decoded.message}`);
      return undefined;
    }
    const object = storedForm(decoded.value) as Extract<ManifestObject, { kind: K }>;
    return { object, modRevision: kv.modRevision };
  }

  /**
   * Writes one claim's binding; true when etcd holds it (or there is nothing to write: the
   * claim, its PV or its binding is gone), false to try again later.
   */
  private async writeOne(claimKey: string): Promise<boolean> {
    const binding = this.cm.world.bindings.get(claimKey);
    if (binding === undefined) return true;
    const [kind, namespace, name] = claimKey.split('/');
    assert(
      kind === 'PersistentVolumeClaim' && namespace !== undefined && name !== undefined,
      `a binding is kept under a claim's key, not under "${claimKey}"`,
    );
    const pvcKey = this.keys.object('PersistentVolumeClaim', name!, namespace);
    const pvKey = this.keys.object('PersistentVolume', binding.volume);
    const [pvc, stored] = await Promise.all([
      this.read(pvcKey, 'PersistentVolumeClaim'),
      this.read(pvKey, 'PersistentVolume'),
    ]);
    // A PV the leader provisioned exists in its log only until this transaction creates it.
    const pv = stored ?? this.provisioned(binding.volume);
    if (pvc === undefined || pv === undefined) return true;
    const conflict = conflictOf(pvc.object, pv.object, binding);
    if (conflict !== undefined) {
      this.say(
        `not writing claim ${claimKey}'s binding to PersistentVolume ${binding.volume}: ${conflict}`,
      );
      return true;
    }
    const claimDone = claimHolds(pvc.object, binding);
    const volumeDone = volumeHolds(pv.object, pvc.object);
    if (claimDone && volumeDone) return true;
    const ops: TxnOp[] = [];
    const claim = boundClaim(pvc.object, binding, pv.object);
    if (!claimDone) ops.push({ put: pvcKey, value: JSON.stringify(claim) });
    if (!volumeDone)
      ops.push({ put: pvKey, value: JSON.stringify(boundVolume(pv.object, pvc.object)) });
    assert(ops.length > 0, `claim ${claimKey}: a binding transaction writes something`);
    const compares = [
      ...this.leadership.fence(),
      { key: pvcKey, modRevision: pvc.modRevision },
      // A PV being created: etcd compares an absent key's create revision as 0.
      stored === undefined
        ? { key: pvKey, createRevision: 0 }
        : { key: pvKey, modRevision: pv.modRevision },
    ];
    this.assertFenced(compares);
    const result = await this.client.txn(compares, ops);
    if (result.succeeded) {
      this.written++;
      return true;
    }
    // Refused: this term no longer leads, or one of the objects changed (read it again).
    const leader = await this.client.get(this.keys.leader);
    if (leader?.createRevision !== this.leadership.term)
      this.leadership.lose('a claim binding write was refused (fenced)');
    return false;
  }

  /**
   * Deletes a provisioned PV whose volume DeleteVolume removed (deleteVolumeOperation),
   * fenced on the term and its mod revision; true when etcd no longer holds it, or holds
   * another PV of that name now (not this provisioner's to delete), false to try again.
   */
  private async deleteOne(pvObjectKey: string): Promise<boolean> {
    assert(
      pvObjectKey.startsWith('PersistentVolume//'),
      `a PersistentVolume delete names a PV's key, not "${pvObjectKey}"`,
    );
    const name = pvObjectKey.slice('PersistentVolume//'.length);
    assert(name !== '', 'a PersistentVolume delete names the PV');
    if (this.cm.world.objects.has(pvObjectKey)) return true; // back in the world: not deleted
    const pvKey = this.keys.object('PersistentVolume', name);
    const pv = await this.read(pvKey, 'PersistentVolume');
    if (pv === undefined) return true;
    if (pv.object.metadata.annotations?.[provisionedByAnnotation] === undefined) return true;
    const compares = [...this.leadership.fence(), { key: pvKey, modRevision: pv.modRevision }];
    this.assertFenced(compares);
    const result = await this.client.txn(compares, [{ delete: pvKey }]);
    if (result.succeeded) return true;
    const leader = await this.client.get(this.keys.leader);
    if (leader?.createRevision !== this.leadership.term)
      this.leadership.lose('a PersistentVolume delete was refused (fenced)');
    return false;
  }

  /** Every write of this writer compares the leader key's create revision first. */
  private assertFenced(compares: readonly Compare[]): void {
    const fence = compares[0];
    assert(
      fence !== undefined &&
        fence.key === this.keys.leader &&
        'createRevision' in fence &&
        fence.createRevision === this.leadership.term,
      () => `a claim binding write not fenced on term ${this.leadership.term}`,
    );
  }

  /**
   * removeFinalizer (pvc_protection_controller.go): the claim loses its pvc-protection
   * finalizer, and goes with it when that was its last one and it is being deleted; fenced
   * on the term and its mod revision. True when done (or the claim is not one being deleted
   * with the finalizer any more), false to try again.
   */
  private async releaseOne(claimKey: string): Promise<boolean> {
    const [kind, namespace, name] = claimKey.split('/');
    assert(
      kind === 'PersistentVolumeClaim' && namespace !== undefined && name !== undefined,
      `a finalizer removal names a claim's key, not "${claimKey}"`,
    );
    const pvcKey = this.keys.object('PersistentVolumeClaim', name!, namespace);
    const pvc = await this.read(pvcKey, 'PersistentVolumeClaim');
    if (pvc === undefined || !isProtectionCandidate(pvc.object)) return true;
    const next = withoutProtectionFinalizer(pvc.object);
    const op: TxnOp =
      next === undefined ? { delete: pvcKey } : { put: pvcKey, value: JSON.stringify(next) };
    const compares = [...this.leadership.fence(), { key: pvcKey, modRevision: pvc.modRevision }];
    this.assertFenced(compares);
    const result = await this.client.txn(compares, [op]);
    if (result.succeeded) return true;
    await this.checkTerm('a claim finalizer removal was refused (fenced)');
    return false;
  }

  /**
   * The resizer's record: the PV's capacity in etcd becomes the one ControllerExpandVolume
   * answered (the leader's world holds it), fenced on the term and its mod revision; node
   * agents expand their mounts from it. True when done (or etcd holds as much or the PV is
   * gone), false to try again.
   */
  private async growOne(pvName: string): Promise<boolean> {
    const held = this.cm.world.objects.get(objectKey('PersistentVolume', pvName));
    const storage = held?.kind === 'PersistentVolume' ? held.spec.capacity?.storage : undefined;
    const pvKey = this.keys.object('PersistentVolume', pvName);
    const pv = await this.read(pvKey, 'PersistentVolume');
    if (pv === undefined || storage === undefined) return true;
    const stored = parseQuantityBytes(pv.object.spec.capacity?.storage) ?? 0;
    if (stored >= (parseQuantityBytes(storage) ?? 0)) return true;
    const capacity = { ...pv.object.spec.capacity, storage };
    const grown = { ...pv.object, spec: { ...pv.object.spec, capacity } };
    const compares = [...this.leadership.fence(), { key: pvKey, modRevision: pv.modRevision }];
    this.assertFenced(compares);
    const result = await this.client.txn(compares, [{ put: pvKey, value: JSON.stringify(grown) }]);
    if (result.succeeded) return true;
    await this.checkTerm('a PersistentVolume capacity write was refused (fenced)');
    return false;
  }

  /** A fenced write was refused: lose leadership if the term is no longer the leader's. */
  private async checkTerm(why: string): Promise<void> {
    const leader = await this.client.get(this.keys.leader);
    if (leader?.createRevision !== this.leadership.term) this.leadership.lose(why);
  }

  /**
   * The PV the leader's world holds for a provisioned volume (its `provisioned-by`
   * annotation: the provisioner's record, not a PV someone deleted from etcd), to create.
   */
  private provisioned(name: string): Stored<PersistentVolume> | undefined {
    const pv = this.cm.world.objects.get(objectKey('PersistentVolume', name));
    if (pv?.kind !== 'PersistentVolume') return undefined;
    if (pv.metadata.annotations?.[provisionedByAnnotation] === undefined) return undefined;
    return { object: storedForm(pv), modRevision: 0 };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    await this.running.catch(() => undefined);
  }
}
