/**
 * ConfigMap and Secret content, kept out of the log (docs/design.md "Secrets stay out of the
 * log"): a source hands the engine the object with a content hash in place of its data
 * (toLoggedObject) and keeps the data here, where the configMap, secret and projected
 * plugins read it at setUp time.
 */
import { createHash } from 'node:crypto';
import {
  type ClusterObject,
  type ConfigMapManifest,
  type ManifestObject,
  objectKey,
  type SecretManifest,
} from '../events/k8s.js';

export type ContentKind = 'ConfigMap' | 'Secret';

/** A ConfigMap's or Secret's keys and their bytes. */
export type ObjectData = ReadonlyMap<string, Buffer>;

const base64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Decodes base64 as the API server does: refuses what is not base64 (never guesses). */
export function decodeBase64(value: string): Buffer | undefined {
  const compact = value.replace(/\s+/g, '');
  if (compact.length % 4 !== 0 || !base64.test(compact)) return undefined;
  return Buffer.from(compact, 'base64');
}

/** The bytes of each key: ConfigMap data (UTF-8) and binaryData, Secret data and stringData. */
function dataOf(object: ConfigMapManifest | SecretManifest): Map<string, Buffer> {
  const data = new Map<string, Buffer>();
  if (object.kind === 'ConfigMap') {
    for (const [k, v] of Object.entries(object.data ?? {})) data.set(k, Buffer.from(v, 'utf8'));
    for (const [k, v] of Object.entries(object.binaryData ?? {}))
      data.set(k, decodeBase64(v) ?? Buffer.alloc(0));
  } else {
    for (const [k, v] of Object.entries(object.data ?? {}))
      data.set(k, decodeBase64(v) ?? Buffer.alloc(0));
    // stringData is merged over data, as the API server does on write.
    for (const [k, v] of Object.entries(object.stringData ?? {}))
      data.set(k, Buffer.from(v, 'utf8'));
  }
  return data;
}

/** `sha256:<hex>` over the sorted keys and their bytes: equal content, equal hash. */
function contentHash(data: ObjectData): string {
  const hash = createHash('sha256');
  for (const key of [...data.keys()].sort()) {
    const value = data.get(key)!;
    hash.update(`${Buffer.byteLength(key)}:${key}:${value.length}:`);
    hash.update(value);
  }
  return `sha256:${hash.digest('hex')}`;
}

/** The object as the log may hold it: ConfigMaps and Secrets lose their data for a hash. */
export function toLoggedObject(object: ManifestObject): ClusterObject {
  if (object.kind !== 'ConfigMap' && object.kind !== 'Secret') return object;
  const already = object as { contentHash?: unknown; data?: unknown; stringData?: unknown };
  const logged = already.data === undefined && already.stringData === undefined;
  if (typeof already.contentHash === 'string' && logged) return object as unknown as ClusterObject; // already the log's form

  const { data: _d, binaryData: _b, stringData: _s, ...rest } = object as Record<string, unknown>;
  const metadata = withoutLastApplied(object.metadata);
  return { ...rest, metadata, contentHash: contentHash(dataOf(object)) } as ClusterObject;
}

/**
 * `kubectl apply` keeps the whole applied object, data included, in this annotation: a
 * ConfigMap or Secret would carry its content into the log through it.
 */
const lastAppliedAnnotation = 'kubectl.kubernetes.io/last-applied-configuration';

function withoutLastApplied<M extends { annotations?: Record<string, string> }>(metadata: M): M {
  if (metadata.annotations?.[lastAppliedAnnotation] === undefined) return metadata;
  const { [lastAppliedAnnotation]: _applied, ...annotations } = metadata.annotations;
  return { ...metadata, annotations };
}

/** Where the atomic-writer plugins read ConfigMap and Secret data (the agent keeps one). */
export class ObjectContents {
  private readonly byKey = new Map<string, ObjectData>();

  /** Records a ConfigMap's or Secret's data; other kinds are ignored. */
  set(object: ManifestObject): void {
    if (object.kind !== 'ConfigMap' && object.kind !== 'Secret') return;
    const key = objectKey(object.kind, object.metadata.name, object.metadata.namespace);
    this.byKey.set(key, dataOf(object));
  }

  delete(kind: string, name: string, namespace?: string): void {
    this.byKey.delete(objectKey(kind, name, namespace));
  }

  get(kind: ContentKind, namespace: string, name: string): ObjectData | undefined {
    return this.byKey.get(objectKey(kind, name, namespace));
  }
}
