/**
 * The manifest directory source (like the kubelet's static pod path): every `*.yaml`,
 * `*.yml` and `*.json` file, each holding one or more Kubernetes documents (Pods,
 * PersistentVolumes, PersistentVolumeClaims, Nodes). A bad file or document is reported
 * with its file and field and skipped; the others are used.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { z } from 'zod';
import {
  type ClusterObject,
  clusterObject,
  objectKey,
  type Pod,
  pod as podSchema,
} from '../events/k8s.js';

/** The files a manifest directory may hold at most, and their size (a limit on everything). */
export const manifestFilesMax = 10_000;
export const manifestBytesMax = 4 * 1024 * 1024;

export interface ManifestProblem {
  readonly file: string;
  readonly message: string;
}

export interface ManifestSet {
  /** Pods by UID. */
  readonly pods: Map<string, Pod>;
  /** PVs, PVCs and Nodes by object key. */
  readonly objects: Map<string, ClusterObject>;
  readonly problems: ManifestProblem[];
}

/** A pod without a UID gets one derived from its namespace and name, as static pods do. */
export function derivedPodUid(namespace: string, name: string): string {
  return createHash('sha256').update(`${namespace}/${name}`).digest('hex').slice(0, 32);
}

function describe(error: z.ZodError): string {
  return error.issues
    .slice(0, 3)
    .map((i) => `${i.path.join('.') || '(document)'}: ${i.message}`)
    .join('; ');
}

const safeUid = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;

function addDocument(set: ManifestSet, file: string, index: number, doc: unknown): void {
  const where = `${file}${index > 0 ? ` (document ${index + 1})` : ''}`;
  const kind = (doc as { kind?: unknown } | null)?.kind;
  if (doc === null || doc === undefined) return;
  if (kind === 'Pod') {
    const parsed = podSchema.safeParse(doc);
    if (!parsed.success)
      return void set.problems.push({
        file: where,
        message: `invalid Pod: ${describe(parsed.error)}`,
      });
    const p = parsed.data;
    const namespace = p.metadata.namespace ?? 'default';
    const uid = p.metadata.uid ?? derivedPodUid(namespace, p.metadata.name);
    if (!safeUid.test(uid)) {
      return void set.problems.push({
        file: where,
        message: `metadata.uid "${uid}" must be letters, digits, '.', '_' or '-' (it becomes a directory name)`,
      });
    }
    if (set.pods.has(uid))
      return void set.problems.push({
        file: where,
        message: `pod UID ${uid} is used twice; podUidMustBeUnique`,
      });
    set.pods.set(uid, { ...p, metadata: { ...p.metadata, namespace, uid } });
    return;
  }
  const parsed = clusterObject.safeParse(doc);
  if (!parsed.success) {
    const what = typeof kind === 'string' ? `kind ${kind}` : 'a document without a kind';
    return void set.problems.push({
      file: where,
      message: `cannot use ${what}: expected Pod, PersistentVolume, PersistentVolumeClaim or Node${typeof kind === 'string' && ['PersistentVolume', 'PersistentVolumeClaim', 'Node'].includes(kind) ? ` (${describe(parsed.error)})` : ''}`,
    });
  }
  const object = parsed.data;
  set.objects.set(objectKey(object.kind, object.metadata.name, object.metadata.namespace), object);
}

/** Adds one manifest file's documents to `set` (bad content becomes problems; never throws). */
export function readManifestFile(set: ManifestSet, file: string): void {
  try {
    const stat = statSync(file);
    if (!stat.isFile()) return;
    if (stat.size > manifestBytesMax) {
      set.problems.push({
        file,
        message: `file is ${stat.size} bytes; manifests over ${manifestBytesMax} bytes are refused`,
      });
      return;
    }
    const text = readFileSync(file, 'utf8');
    if (text.includes('\uFFFD')) {
      set.problems.push({ file, message: 'file is not valid UTF-8' });
      return;
    }
    const docs = parseAllDocuments(text, { uniqueKeys: true });
    const list = Array.isArray(docs) ? docs : [docs];
    list.forEach((doc, index) => {
      if (doc.errors.length > 0) {
        set.problems.push({
          file,
          message: `not valid YAML: ${doc.errors[0]!.message.split('\n')[0]}`,
        });
        return;
      }
      addDocument(set, file, index, doc.toJS({ maxAliasCount: 100 }));
    });
  } catch (error) {
    set.problems.push({ file, message: `cannot read: ${(error as Error).message}` });
  }
}

/** Reads the whole directory now. Never throws for bad content; throws if `dir` is unreadable. */
export function readManifestDir(dir: string): ManifestSet {
  const set: ManifestSet = { pods: new Map(), objects: new Map(), problems: [] };
  const names = readdirSync(dir)
    .filter((n) => /\.(ya?ml|json)$/.test(n) && !n.startsWith('.'))
    .sort();
  for (const name of names.slice(0, manifestFilesMax)) readManifestFile(set, join(dir, name));
  if (names.length > manifestFilesMax) {
    set.problems.push({
      file: dir,
      message: `only the first ${manifestFilesMax} of ${names.length} files are read`,
    });
  }
  return set;
}

export interface ManifestChanges {
  readonly upsertObjects: ClusterObject[];
  readonly removeObjects: { kind: ClusterObject['kind']; name: string; namespace?: string }[];
  readonly upsertPods: Pod[];
  readonly removePods: string[];
}

/** What changed between two reads: objects first (so pods resolve), then pods. */
export function diffManifests(
  before: ManifestSet | undefined,
  after: ManifestSet,
): ManifestChanges {
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  const upsertObjects = [...after.objects]
    .filter(([k, o]) => !same(before?.objects.get(k), o))
    .map(([, o]) => o);
  const removeObjects = [...(before?.objects ?? [])]
    .filter(([k]) => !after.objects.has(k))
    .map(([, o]) => ({
      kind: o.kind,
      name: o.metadata.name,
      ...(o.metadata.namespace === undefined ? {} : { namespace: o.metadata.namespace }),
    }));
  const upsertPods = [...after.pods]
    .filter(([uid, p]) => !same(before?.pods.get(uid), p))
    .map(([, p]) => p);
  const removePods = [...(before?.pods.keys() ?? [])].filter((uid) => !after.pods.has(uid));
  return { upsertObjects, removeObjects, upsertPods, removePods };
}
