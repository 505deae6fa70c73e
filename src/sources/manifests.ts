/**
 * The manifest directory source (like the kubelet's static pod path): every `*.yaml`,
 * `*.yml` and `*.json` file, each holding one or more Kubernetes documents (Pods,
 * PersistentVolumes, PersistentVolumeClaims, ConfigMaps, Secrets, Nodes). Each document is
 * validated as the API server would (validate.ts); an invalid one is refused whole, reported
 * with its file, its name and the fields at fault, and the others are used.
 */
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
import { type IdentifiedKind, type PodIdentities, uidFor, withUid } from './identities.js';
import { describeInvalid, validate } from './validate.js';
import { defaultFeatureGates, dropDisabledPodFields, type FeatureGates } from './feature-gates.js';

export {
  claimIdentitiesOf,
  type IdentifiedKind,
  type PodIdentities,
  withUid,
} from './identities.js';

/** The files a manifest directory may hold at most, and their size (a limit on everything). */
export const manifestFilesMax = 10_000;
const manifestBytesMax = 4 * 1024 * 1024;

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
  /** UIDs vole gave pods and claims whose manifest has no `metadata.uid` (the rest were given). */
  readonly assignedUids?: Set<string>;
  /** Fields of disabled feature gates dropped from pods, which were used without them. */
  readonly notices?: ManifestNotice[];
}

/** A field dropped from a pod because its feature gate is off (the pod is used without it). */
export interface ManifestNotice {
  readonly file: string;
  /** `namespace/name` of the pod. */
  readonly pod: string;
  readonly volume: string;
  readonly message: string;
}

/** The UIDs of a set's pods and claims by kind and `namespace/name`: what a later read keeps. */
export function identitiesOf(set: ManifestSet | undefined): PodIdentities {
  const byName = new Map<string, string>();
  for (const [uid, p] of set?.pods ?? [])
    byName.set(`Pod/${p.metadata.namespace ?? 'default'}/${p.metadata.name}`, uid);
  for (const o of set?.objects.values() ?? []) {
    if (o.kind !== 'PersistentVolumeClaim' || o.metadata.uid === undefined) continue;
    byName.set(`${o.kind}/${o.metadata.namespace ?? 'default'}/${o.metadata.name}`, o.metadata.uid);
  }
  return { uidOf: (namespace, name, kind) => byName.get(`${kind}/${namespace}/${name}`) };
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

/**
 * A pod's fields of disabled gates, dropped before validation as the API server drops
 * them (dropDisabledFields, then validation), each noted on the set.
 */
function dropDisabledFields(set: ManifestSet, file: string, raw: unknown, gates: FeatureGates) {
  const { doc, dropped } = dropDisabledPodFields(raw, gates);
  const metadata = (doc as { metadata?: { name?: unknown; namespace?: unknown } }).metadata;
  const pod = `${String(metadata?.namespace ?? 'default')}/${String(metadata?.name)}`;
  for (const d of dropped)
    set.notices?.push({
      file,
      pod,
      volume: d.volume,
      message:
        `pod ${pod} volume ${d.volume}: ${d.field} dropped, the ${d.gate} feature gate is ` +
        `off (vole run --feature-gates ${d.gate}=true honours it)`,
    });
  return doc;
}

function addDocument(
  set: ManifestSet,
  at: { file: string; index: number; ids: PodIdentities; gates: FeatureGates },
  raw: unknown,
): void {
  const { file, index, ids } = at;
  const where = `${file}${index > 0 ? ` (document ${index + 1})` : ''}`;
  const kind = (raw as { kind?: unknown } | null)?.kind;
  if (raw === null || raw === undefined) return;
  const doc = kind === 'Pod' ? dropDisabledFields(set, where, raw, at.gates) : raw;
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
    if (podNamed(set, namespace, p.metadata.name))
      return void set.problems.push({
        file: where,
        message:
          `pod ${namespace}/${p.metadata.name} is defined twice; ` +
          'names must be unique in a namespace',
      });
    const uid = uidFor({ ...p, kind: 'Pod' }, namespace, ids, set);
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
  const object = withUid(parsed.data, ids, set);
  const key = objectKey(object.kind, object.metadata.name, object.metadata.namespace);
  set.objects.set(key, object);
  set.origins?.set(key, file);
}

/** Each set's pod names (`namespace/name`), so a duplicate is found in O(1), not O(pods). */
const podNames = new WeakMap<ManifestSet, Set<string>>();

/** Is `namespace/name` taken in the set? Records it when it is not. */
function podNamed(set: ManifestSet, namespace: string, name: string): boolean {
  let names = podNames.get(set);
  if (names === undefined) {
    const existing = [...set.pods.values()];
    names = new Set(existing.map((p) => `${p.metadata.namespace}/${p.metadata.name}`));
    podNames.set(set, names);
  }
  const key = `${namespace}/${name}`;
  if (names.has(key)) return true;
  names.add(key);
  return false;
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
export function readManifestFile(
  set: ManifestSet,
  file: string,
  ids: PodIdentities = {},
  gates: FeatureGates = defaultFeatureGates,
): void {
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
      addDocument(set, { file, index, ids, gates }, doc.toJS({ maxAliasCount: 100 }));
    });
  } catch (error) {
    set.problems.push({ file, message: `cannot read: ${(error as Error).message}` });
  }
}

/**
 * Reads the whole directory now. Never throws for bad content; throws if `dir` is
 * unreadable. Pods without a UID get theirs from `ids` (identitiesOf the previous read);
 * the fields of gates off in `gates` are dropped from pods (noted in `notices`).
 */
export function readManifestDir(
  dir: string,
  ids: PodIdentities = {},
  gates: FeatureGates = defaultFeatureGates,
): ManifestSet {
  const set: ManifestSet = {
    pods: new Map(),
    objects: new Map(),
    problems: [],
    origins: new Map(),
    assignedUids: new Set(),
    notices: [],
  };
  const names = readdirSync(dir)
    .filter((n) => /\.(ya?ml|json)$/.test(n) && !n.startsWith('.'))
    .sort();
  for (const name of names.slice(0, manifestFilesMax))
    readManifestFile(set, join(dir, name), ids, gates);
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
