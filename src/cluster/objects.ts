/**
 * Cluster state in etcd: Pods, PersistentVolumes, claims and Nodes (and every other kind
 * the manifest source accepts), validated by the manifest source's own parser, written
 * under the cluster prefix. An object's resourceVersion is its etcd mod revision.
 */
import { statSync, readdirSync } from 'node:fs';
import { type ManifestObject, manifestObject, type Pod, pod as podSchema } from '../events/k8s.js';
import {
  type ManifestSet,
  manifestFilesMax,
  readManifestDir,
  readManifestFile,
} from '../sources/manifests.js';
import { admitObject, markedForDeletion } from '../binding/claim-protection.js';
import { ClusterError } from './client.js';
import { listPrefix } from './informer.js';
import { internKnownStrings } from './interned.js';
import { ClusterKeys } from './keys.js';
import { getText, type KeyValue, type KvStore, put, remove } from './store.js';

/** Attempts to delete one object that changes under the delete before giving up. */
const deleteAttemptsMax = 8;

/** Reads manifest files and directories (`-f`, repeatable) as the manifest source does. */
export function readManifestPaths(paths: readonly string[]): ManifestSet {
  const set: ManifestSet = {
    pods: new Map(),
    objects: new Map(),
    problems: [],
    assignedUids: new Set(),
  };
  for (const path of paths) {
    let isDir: boolean;
    try {
      isDir = statSync(path).isDirectory();
    } catch (error) {
      throw new ClusterError(`-f ${path}: ${(error as Error).message}`);
    }
    if (!isDir) {
      readManifestFile(set, path);
      continue;
    }
    const read = readManifestDir(path);
    for (const uid of read.assignedUids ?? []) set.assignedUids?.add(uid);
    for (const [uid, p] of read.pods) {
      if (set.pods.has(uid))
        set.problems.push({
          file: path,
          message: `pod UID ${uid} is used twice; podUidMustBeUnique`,
        });
      set.pods.set(uid, p);
    }
    for (const [k, o] of read.objects) set.objects.set(k, o);
    set.problems.push(...read.problems);
    if (readdirSync(path).length > manifestFilesMax) break;
  }
  return set;
}

/** What an object holds in etcd: the object without its resourceVersion (etcd keeps that). */
export function storedForm<T extends { metadata: Record<string, unknown> }>(object: T): T {
  const { resourceVersion: _rv, ...metadata } = object.metadata;
  return { ...object, metadata } as T;
}

export type Decoded<T> = { ok: true; value: T } | { ok: false; message: string };

/**
 * The value as compact objects. The schema's output objects are built a property at a
 * time, each with room to grow: about twice the heap of the same value from JSON.parse,
 * whose objects are exactly their size (a PV 498 → 305 bytes, a pod 546 → 274), and the
 * controller keeps every pod and object it lists. Read back from its JSON (no schema
 * transforms a value, so it is the same value): ~4 µs an object.
 */
export function compacted<T>(value: T): T {
  // Its well-known strings shared (interned.ts): some 100 bytes a pod with one claim.
  return internKnownStrings(JSON.parse(JSON.stringify(value)) as T);
}

/** The value with its resourceVersion; compacted unless the caller keeps only some. */
function withVersion<T extends { metadata: object }>(value: T, kv: KeyValue, compact: boolean): T {
  const versioned = {
    ...value,
    metadata: { ...value.metadata, resourceVersion: String(kv.modRevision) },
  };
  return compact ? compacted(versioned) : versioned;
}

/**
 * How a decode leaves its value: `compact: false` skips the compaction, for a caller that
 * compares most of what it decodes and throws it away (a new leader's list): it compacts
 * (`compacted`) what it keeps.
 */
export interface DecodeOptions {
  readonly compact?: boolean;
}

/**
 * An object read back from etcd, validated again (etcdctl can write anything). ConfigMaps
 * and Secrets keep their data, as in the API server's store: a node agent hands them to its
 * contents store, and every log gets only their content hash (toLoggedObject).
 */
export function decodeObject(kv: KeyValue, opts: DecodeOptions = {}): Decoded<ManifestObject> {
  try {
    const parsed = manifestObject.safeParse(JSON.parse(kv.value.toString()));
    if (!parsed.success)
      return { ok: false, message: `${kv.key.toString()}: ${parsed.error.issues[0]?.message}` };
    return { ok: true, value: withVersion(parsed.data, kv, opts.compact ?? true) };
  } catch (error) {
    return { ok: false, message: `${kv.key.toString()}: not JSON (${(error as Error).message})` };
  }
}

export function decodePod(kv: KeyValue, opts: DecodeOptions = {}): Decoded<Pod> {
  try {
    const parsed = podSchema.safeParse(JSON.parse(kv.value.toString()));
    if (!parsed.success || parsed.data.metadata.uid === undefined)
      return { ok: false, message: `${kv.key.toString()}: not a pod with metadata.uid` };
    return { ok: true, value: withVersion(parsed.data, kv, opts.compact ?? true) };
  } catch (error) {
    return { ok: false, message: `${kv.key.toString()}: not JSON (${(error as Error).message})` };
  }
}

export interface ApplyResult {
  readonly created: string[];
  readonly configured: string[];
  readonly unchanged: string[];
}

function describeObject(object: ManifestObject | Pod): string {
  const kind = object.kind ?? 'Pod';
  const ns = object.metadata.namespace;
  return `${kind.toLowerCase()}/${ns !== undefined && kind !== 'PersistentVolume' && kind !== 'Node' ? `${ns}/` : ''}${object.metadata.name}`;
}

/** The keys of pods named namespace/name under any node (a pod that moved is deleted). */
async function podKeysByName(client: KvStore, keys: ClusterKeys): Promise<Map<string, string[]>> {
  const { kvs } = await listPrefix(client, keys.pods);
  const byName = new Map<string, string[]>();
  for (const key of kvs.map((kv) => kv.key.toString())) {
    const [, namespace, name] = ClusterKeys.rest(key, keys.pods).split('/');
    const id = `${namespace}/${name}`;
    byName.set(id, [...(byName.get(id) ?? []), key]);
  }
  return byName;
}

/**
 * What the binder wrote stays when a manifest is applied again without it, as the API
 * server keeps a claim's and a PV's status (a subresource) and fields another writer set:
 * the claim's spec.volumeName, the PV's spec.claimRef, and both statuses. A claim whose
 * manifest has no `metadata.uid` (`assignedUid`: the reader gave it a fresh one) keeps the
 * stored claim's UID, as an update keeps the object's UID.
 */
function keepBinding(
  object: ManifestObject,
  existingText: string | null,
  assignedUid = false,
): ManifestObject {
  if (
    existingText === null ||
    (object.kind !== 'PersistentVolumeClaim' && object.kind !== 'PersistentVolume')
  )
    return object;
  let existing: {
    kind?: unknown;
    metadata?: { uid?: unknown; deletionTimestamp?: unknown; finalizers?: unknown };
    spec?: Record<string, unknown>;
    status?: unknown;
  };
  try {
    existing = JSON.parse(existingText) as typeof existing;
  } catch {
    return object;
  }
  if (existing.kind !== object.kind) return object;
  const field = object.kind === 'PersistentVolumeClaim' ? 'volumeName' : 'claimRef';
  const spec = object.spec as Record<string, unknown>;
  const kept = spec[field] === undefined && existing.spec?.[field] !== undefined;
  const status = object.status ?? existing.status;
  const uid = existing.metadata?.uid;
  const keptUid = assignedUid && typeof uid === 'string' ? { uid } : {};
  // A deletion under way stays (the API server never clears a deletionTimestamp), and so
  // do the finalizers holding it.
  const deleting = existing.metadata?.deletionTimestamp;
  const finalizers = existing.metadata?.finalizers;
  const keptDeletion =
    typeof deleting === 'string'
      ? { deletionTimestamp: deleting, ...(Array.isArray(finalizers) ? { finalizers } : {}) }
      : {};
  return {
    ...object,
    metadata: { ...object.metadata, ...keptUid, ...keptDeletion },
    spec: kept ? { ...spec, [field]: existing.spec![field] } : spec,
    ...(status === undefined ? {} : { status }),
  } as ManifestObject;
}

async function putIfChanged(
  client: KvStore,
  key: string,
  value: string | ((existing: string | null) => string),
  stale: readonly string[],
  result: ApplyResult,
  what: string,
): Promise<void> {
  const existing = await getText(client, key);
  if (typeof value === 'function') value = value(existing);
  if (existing === value && stale.length === 0) return void result.unchanged.push(what);
  // One transaction moves the pod.
  if (stale.length === 0) await put(client, key, value);
  else await client.txn([], [{ put: key, value }, ...stale.map((old) => ({ delete: old }))]);
  (existing === null ? result.created : result.configured).push(what);
}

/** Writes every object and pod of `set` (objects first, so pods find their claims). */
export async function applyManifestSet(
  client: KvStore,
  keys: ClusterKeys,
  set: ManifestSet,
): Promise<ApplyResult> {
  const result: ApplyResult = { created: [], configured: [], unchanged: [] };
  for (const object of set.objects.values()) {
    const assigned = set.assignedUids?.has(object.metadata.uid ?? '') === true;
    // Admission: a new claim gets the pvc-protection finalizer.
    const value = (existing: string | null) =>
      JSON.stringify(storedForm(admitObject(keepBinding(object, existing, assigned))));
    await putIfChanged(client, keys.objectOf(object), value, [], result, describeObject(object));
  }
  const byName = set.pods.size === 0 ? new Map() : await podKeysByName(client, keys);
  for (const given of set.pods.values()) {
    const ns = given.metadata.namespace ?? 'default';
    const existing: string[] = byName.get(`${ns}/${given.metadata.name}`) ?? [];
    const pod = set.assignedUids?.has(given.metadata.uid ?? '')
      ? await keepStoredUid(client, given, existing)
      : given;
    const key = keys.podOf(pod);
    const stale = existing.filter((k) => k !== key);
    await putIfChanged(
      client,
      key,
      JSON.stringify(storedForm(pod)),
      stale,
      result,
      describeObject(pod),
    );
  }
  return result;
}

/**
 * A pod whose manifest has no `metadata.uid` keeps the UID of the stored pod of its name,
 * as an update through the API server keeps the object's UID; only a pod that does not
 * exist yet gets the fresh one the manifest reader gave it.
 */
async function keepStoredUid(
  client: KvStore,
  pod: Pod,
  keysOfName: readonly string[],
): Promise<Pod> {
  for (const key of keysOfName) {
    const text = await getText(client, key);
    if (text === null) continue;
    const parsed = podSchema.safeParse(JSON.parse(text));
    const uid = parsed.success ? parsed.data.metadata.uid : undefined;
    if (uid !== undefined) return { ...pod, metadata: { ...pod.metadata, uid } };
  }
  return pod;
}

/** Deletes every object and pod named in `set`; returns what was deleted and what was absent. */
export async function deleteManifestSet(
  client: KvStore,
  keys: ClusterKeys,
  set: ManifestSet,
  now: () => Date = () => new Date(),
): Promise<{ deleted: string[]; absent: string[] }> {
  const deleted: string[] = [];
  const absent: string[] = [];
  const byName = set.pods.size === 0 ? new Map() : await podKeysByName(client, keys);
  for (const pod of set.pods.values()) {
    const found: string[] =
      byName.get(`${pod.metadata.namespace ?? 'default'}/${pod.metadata.name}`) ?? [];
    for (const key of found) await remove(client, key);
    (found.length > 0 ? deleted : absent).push(describeObject(pod));
  }
  for (const object of set.objects.values()) {
    const gone = await deleteObject(client, keys.objectOf(object), now);
    (gone ? deleted : absent).push(describeObject(object));
  }
  return { deleted, absent };
}

/**
 * Deletes one object as the API server does: one with finalizers is only marked (its
 * deletionTimestamp set, compared on its mod revision, read again if it changed); the
 * holder of the last finalizer removes it. True when the object was there.
 */
async function deleteObject(client: KvStore, key: string, now: () => Date): Promise<boolean> {
  for (let attempt = 0; attempt < deleteAttemptsMax; attempt++) {
    const kv = await client.get(key);
    if (kv === undefined) return false;
    const decoded = decodeObject(kv);
    const stored = decoded.ok ? storedForm(decoded.value) : undefined;
    const timestamp = now()
      .toISOString()
      .replace(/\.\d+Z$/, 'Z');
    const marked = stored === undefined ? undefined : markedForDeletion(stored, timestamp);
    if (marked !== undefined && marked === stored) return true; // being deleted already
    const op = marked === undefined ? { delete: key } : { put: key, value: JSON.stringify(marked) };
    const result = await client.txn([{ key, modRevision: kv.modRevision }], [op]);
    if (result.succeeded) return true;
  }
  throw new ClusterError(`deleting ${key}: it kept changing; try again`);
}

export interface ListedState {
  readonly revision: number;
  readonly pods: Pod[];
  readonly objects: ManifestObject[];
  readonly problems: string[];
}

/** Every pod (or those of one node) and every object, at one revision. */
export async function listState(
  client: KvStore,
  keys: ClusterKeys,
  opts: { node?: string } = {},
): Promise<ListedState> {
  const objects = await listPrefix(client, keys.objects);
  const revision = objects.revision;
  const podPrefix = opts.node === undefined ? keys.pods : keys.podsOn(opts.node);
  const pods = await listPrefix(client, podPrefix, { revision });
  const state: ListedState = { revision, pods: [], objects: [], problems: [] };
  for (const kv of objects.kvs) {
    const decoded = decodeObject(kv);
    if (decoded.ok) state.objects.push(decoded.value);
    else state.problems.push(decoded.message);
  }
  for (const kv of pods.kvs) {
    const decoded = decodePod(kv);
    if (decoded.ok) state.pods.push(decoded.value);
    else state.problems.push(decoded.message);
  }
  return state;
}
