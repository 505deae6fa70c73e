/**
 * The store port: what cluster mode asks of its shared store, in the shape both etcd and
 * the Kubernetes API answer — keys with create and mod revisions from one revision
 * counter, transactions guarded by compares, ranges (limited, paged, at a revision), a
 * watch from a revision, and leases (granted, kept alive, revoked, expiring with their
 * keys). Two adapters: etcd (store-etcd.ts) and the simulated store of
 * `vole chaos --cluster` (src/sim/store-sim.ts). Everything in src/cluster/ reaches the
 * store through this port only.
 */

export interface KeyValue {
  readonly key: string;
  readonly value: Buffer;
  /** The revision that created the key (0: it does not exist). */
  readonly createRevision: number;
  /** The revision of its last write: its resourceVersion. */
  readonly modRevision: number;
  /** The lease it is bound to ('0': none). */
  readonly lease: string;
}

/** A transaction's guard: every compare is an equality; all must hold. */
export type Compare =
  | { readonly key: string; readonly createRevision: number }
  | { readonly key: string; readonly modRevision: number }
  | { readonly key: string; readonly value: string };

export type TxnOp =
  | { readonly put: string; readonly value: string | Buffer; readonly lease?: string }
  /** Deletes `delete`, or every key in [delete, end) when `end` is given. */
  | { readonly delete: string; readonly end?: string | Buffer }
  | { readonly get: string };

export interface TxnResult {
  readonly succeeded: boolean;
  /** The store's revision after the transaction. */
  readonly revision: number;
  /** One entry per `get` of the branch taken, in order. */
  readonly gets: readonly (KeyValue | undefined)[];
  /** Keys deleted by the branch taken. */
  readonly deleted: number;
}

export interface RangeRequest {
  readonly start: string | Buffer;
  /** Exclusive. */
  readonly end: string | Buffer;
  readonly limit?: number;
  /** Read at this revision (0 or absent: the current one). */
  readonly revision?: number;
  readonly descending?: boolean;
  /** Sorted by mod revision instead of key (etcd reads the whole range to sort it). */
  readonly byModRevision?: boolean;
  /** Values come back empty. */
  readonly keysOnly?: boolean;
}

export interface RangeResult {
  readonly kvs: readonly KeyValue[];
  /** More keys lie in the range beyond `limit`. */
  readonly more: boolean;
  /** The revision read at. */
  readonly revision: number;
  /** How many keys the range holds, whatever the limit (absent: the adapter cannot say). */
  readonly count?: number;
}

export interface WatchHandlers {
  put(kv: KeyValue): void;
  delete(key: string, modRevision: number): void;
  /** The watch ended (compacted revision, lost stream); nothing more arrives. */
  error?(error: Error): void;
  /** The stream is (re)established. */
  connected?(): void;
}

export interface StoreWatch {
  cancel(): Promise<void>;
}

/** A lease kept alive by the adapter until it is revoked or lost. */
export interface StoreLease {
  readonly id: string;
  onKeepAlive(listener: () => void): void;
  /** Once: the lease is gone (expired, revoked elsewhere, keepalives failing too long). */
  onLost(listener: (error: Error) => void): void;
  revoke(): Promise<void>;
}

export type WatchRange = { readonly key: string } | { readonly prefix: string };

export interface KvStore {
  get(key: string): Promise<KeyValue | undefined>;
  range(request: RangeRequest): Promise<RangeResult>;
  txn(
    compares: readonly Compare[],
    then: readonly TxnOp[],
    otherwise?: readonly TxnOp[],
  ): Promise<TxnResult>;
  /** Every change in `range` from `fromRevision` on (absent: from now). */
  watch(
    range: WatchRange,
    fromRevision: number | undefined,
    handlers: WatchHandlers,
  ): Promise<StoreWatch>;
  grantLease(ttlS: number): Promise<StoreLease>;
}

/** The end of the range of every key starting with `prefix` (etcd's prefix rule). */
export function prefixEnd(prefix: string | Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]!++;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}

/** Every key under `prefix`, as a range. */
export function prefixRange(prefix: string): { start: string; end: Buffer } {
  return { start: prefix, end: prefixEnd(prefix) };
}

/** One put, unguarded. */
export async function put(store: KvStore, key: string, value: string | Buffer): Promise<number> {
  return (await store.txn([], [{ put: key, value }])).revision;
}

/** Deletes `key` (or [key, end)); answers how many keys went. */
export async function remove(store: KvStore, key: string, end?: string | Buffer): Promise<number> {
  return (await store.txn([], [end === undefined ? { delete: key } : { delete: key, end }]))
    .deleted;
}

/** The value of `key` as text, or null when absent. */
export async function getText(store: KvStore, key: string): Promise<string | null> {
  return (await store.get(key))?.value.toString() ?? null;
}
