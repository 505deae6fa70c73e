/**
 * The kubelet's part of expansion in cluster mode: once NodeExpandVolume grew a claim's
 * volume on this node, the claim's `status.capacity` in etcd becomes the new size (the
 * kubelet's updatePVCStatusCapacity after the resizer's ControllerExpandVolume), so
 * `vole get pvcs` shows it and a pod mounted later, anywhere, does not expand again.
 * Compared on the claim's mod revision (read again when it changed), never shrinking it.
 */
import { type Clock, sleep } from '../clock.js';
import { parseQuantityBytes, type PersistentVolumeClaim } from '../events/k8s.js';
import { bytesQuantity } from '../binding/expansion.js';
import type { ClusterKeys } from './keys.js';
import { decodeObject, storedForm } from './objects.js';
import type { KvStore } from './store.js';

/** Attempts of one capacity write (a claim changing under it, etcd unreachable). */
const attemptsMax = 20;
const retryMs = 500;

export interface ClaimCapacity {
  readonly namespace: string;
  readonly name: string;
  readonly sizeBytes: number;
}

/**
 * Writes the claim's new capacity; resolves once etcd holds at least that much, the claim
 * is gone or no longer bound, or the attempts ran out (said).
 */
export async function recordClaimCapacity(
  client: KvStore,
  keys: ClusterKeys,
  claim: ClaimCapacity,
  io: { readonly clock: Clock; readonly say: (line: string) => void; stopped(): boolean },
): Promise<void> {
  const key = keys.object('PersistentVolumeClaim', claim.name, claim.namespace);
  for (let attempt = 0; attempt < attemptsMax && !io.stopped(); attempt++) {
    try {
      const kv = await client.get(key);
      if (kv === undefined) return;
      const decoded = decodeObject(kv);
      if (!decoded.ok || decoded.value.kind !== 'PersistentVolumeClaim') return;
      const pvc: PersistentVolumeClaim = storedForm(decoded.value);
      if (pvc.status?.phase !== 'Bound') return;
      const held = parseQuantityBytes(pvc.status.capacity?.storage) ?? 0;
      if (held >= claim.sizeBytes) return;
      const storage = bytesQuantity(claim.sizeBytes);
      const status = { ...pvc.status, capacity: { ...pvc.status.capacity, storage } };
      const value = JSON.stringify({ ...pvc, status });
      const result = await client.txn(
        [{ key, modRevision: kv.modRevision }],
        [{ put: key, value }],
      );
      if (result.succeeded) return;
    } catch (error) {
      io.say(
        `claim ${claim.namespace}/${claim.name}: capacity not written yet: ${(error as Error).message}`,
      );
    }
    await sleep(io.clock, retryMs);
  }
  io.say(
    `claim ${claim.namespace}/${claim.name}: its capacity was not written; it is on the next expansion`,
  );
}
