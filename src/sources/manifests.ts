/**
 * The manifest directory source (like the kubelet's static pod path): every `*.yaml`,
 * `*.yml` and `*.json` file, each holding one or more Kubernetes documents (Pods,
 * PersistentVolumes, PersistentVolumeClaims, ConfigMaps, Secrets, Nodes). Each document is
 * validated as the API server would (validate.ts); an invalid one is refused whole, reported
 * with its file, its name and the fields at fault, and the others are used.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { z } from 'zod';
import {
  type ManifestObject,
  manifestObject,
  objectKey,
  type Pod,
  pod as podSchema,
} from '../events/k8s.js';
import { toLoggedObject } from './contents.js';
import { describeInvalid, validate } from './validate.js';

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
  /** PVs, PVCs, ConfigMaps, Secrets and Nodes by object key (ConfigMaps and Secrets with data). */
  readonly objects: Map<string, ManifestObject>;
  readonly problems: ManifestProblem[];
  /** The file each pod (`Pod/<uid>`) and object (its key) came from, when read from files. */
  readonly origins?: Map<string, string>;
}

/** A pod without a UID gets one derived from its namespace and name, as static pods do. */
export function derivedPodUid(namespace: string, name: string): string {
  return createHash('sha256').update(`${namespace}/${name}`).digest('hex').slice(0, 32);
}

function describe(error: z.ZodError): string {
  return error.issues
    .slice(0, 3)
    .map((i) => {
      const missing = i.code === 'invalid_type' && / received undefined$/.test(i.message);
      return `${i.path.join('.') || '(document)'}: ${missing ? 'missing (a required key)' : i.message}`;
    })
    .join('; ');
}

const safeUid = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;

function addDocument(set: ManifestSet, file: string, index: number, doc: unknown): void {
  const where = `${file}${index > 0 ? ` (document ${index + 1})` : ''}`;
  const kind = (doc as { kind?: unknown } | null)?.kind;
  if (doc === null || doc === undefined) return;
  if (!refuseInvalid(set, where, doc)) return;
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
    set.origins?.set(`Pod/${uid}`, file);
    return;
  }
  const parsed = manifestObject.safeParse(doc);
  if (!parsed.success) {
    return void set.problems.push({
      file: where,
      message: `invalid ${String(kind)}: ${describe(parsed.error)}`,
    });
  }
  const object = parsed.data;
  const key = objectKey(object.kind, object.metadata.name, object.metadata.namespace);
  set.objects.set(key, object);
  set.origins?.set(key, file);
}

/**
 * Refuses an object the API server would refuse (reported with file, name and fields);
 * true when it is valid. A kind vole does not use is reported as such.
 */
function refuseInvalid(set: ManifestSet, where: string, doc: unknown): boolean {
  const errors = validate(doc);
  if (errors.length === 0) return true;
  const d = doc as { kind?: unknown; metadata?: { name?: unknown; namespace?: unknown } };
  if (errors[0]!.field === 'kind') {
    const what = typeof d.kind === 'string' ? `kind ${d.kind}` : 'a document without a kind';
    set.problems.push({
      file: where,
      message:
        `cannot use ${what}: expected Pod, PersistentVolume, PersistentVolumeClaim, ` +
        'StorageClass, ConfigMap, Secret or Node',
    });
    return false;
  }
  const name = d.metadata?.name;
  const namespace = d.metadata?.namespace;
  const message = describeInvalid(errors, {
    kind: String(d.kind),
    ...(typeof name === 'string' ? { name } : {}),
    ...(typeof namespace === 'string'
      ? { namespace }
      : d.kind === 'Pod'
        ? { namespace: 'default' }
        : {}),
  });
  set.problems.push({ file: where, message: `${message}; refused whole, nothing of it is used` });
  return false;
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
  const set: ManifestSet = {
    pods: new Map(),
    objects: new Map(),
    problems: [],
    origins: new Map(),
  };
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
  readonly upsertObjects: ManifestObject[];
  readonly removeObjects: { kind: ManifestObject['kind']; name: string; namespace?: string }[];
  readonly upsertPods: Pod[];
  readonly removePods: string[];
  /** Every ConfigMap and Secret of the directory, with data (for the plugins, not the log). */
  readonly contents: ManifestObject[];
}

/** What changed between two reads: objects first (so pods resolve), then pods. */
export function diffManifests(
  before: ManifestSet | undefined,
  after: ManifestSet,
): ManifestChanges {
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  // Objects compare as the log holds them: a ConfigMap or Secret by its content hash.
  const logged = (o: ManifestObject | undefined) => (o === undefined ? o : toLoggedObject(o));
  const upsertObjects = [...after.objects]
    .filter(([k, o]) => !same(logged(before?.objects.get(k)), logged(o)))
    .map(([, o]) => o);
  const contents = [...after.objects.values()].filter(
    (o) => o.kind === 'ConfigMap' || o.kind === 'Secret',
  );
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
  return { upsertObjects, removeObjects, upsertPods, removePods, contents };
}
