/**
 * Validation as strict as the API server's (k8s.io/apimachinery validation and the core
 * API's ValidatePod / ValidatePersistentVolume / ValidatePersistentVolumeClaim /
 * ValidateConfigMap / ValidateSecret), for what vole reads: an object that fails is refused
 * whole, before anything is mounted. Unknown fields are ignored, as the API server does.
 *
 * The one leniency: container fields that only a container runtime uses (image, command)
 * are not required — vole runs no containers; a pod without containers is accepted too (a
 * library shorthand: all of its volumes are expected).
 *
 *   validate(object) → FieldError[]   (empty: valid)
 */
import { fieldErrorsOfMeta } from './validate-meta.js';
import {
  validatePersistentVolume,
  validatePersistentVolumeClaim,
  validateStorageClass,
} from './validate-storage.js';
import { validatePodSpec } from './validate-pod.js';
import { type FieldError, invalid, isRecord, required } from './validate-util.js';
import { decodeBase64 } from './contents.js';

export type { FieldError } from './validate-util.js';

/** Kinds vole validates; anything else is refused by the source as a kind it cannot use. */
const validatedKinds = [
  'Pod',
  'PersistentVolume',
  'PersistentVolumeClaim',
  'ConfigMap',
  'Secret',
  'Node',
  'StorageClass',
  'CSIDriver',
  'VolumeAttachment',
] as const;

const namespaced = new Set(['Pod', 'PersistentVolumeClaim', 'ConfigMap', 'Secret']);

/** Every field error of one Kubernetes object (Pod, PV, PVC, ConfigMap, Secret, Node). */
export function validate(object: unknown): FieldError[] {
  if (!isRecord(object)) return [invalid('(object)', object, 'must be an object')];
  const kind = object['kind'];
  if (typeof kind !== 'string' || !(validatedKinds as readonly string[]).includes(kind))
    return [invalid('kind', kind, `must be one of ${validatedKinds.join(', ')}`)];
  const errors = fieldErrorsOfMeta(object['metadata'], { namespaced: namespaced.has(kind) });
  const spec = object['spec'];
  switch (kind) {
    case 'Pod':
      if (!isRecord(spec)) return [...errors, required('spec')];
      return [...errors, ...validatePodSpec(spec)];
    case 'PersistentVolume':
      if (!isRecord(spec)) return [...errors, required('spec')];
      return [...errors, ...validatePersistentVolume(spec)];
    case 'PersistentVolumeClaim':
      if (!isRecord(spec)) return [...errors, required('spec')];
      return [...errors, ...validatePersistentVolumeClaim(spec)];
    case 'ConfigMap':
    case 'Secret':
      return [...errors, ...validateData(kind, object)];
    case 'StorageClass':
      return [...errors, ...validateStorageClass(object)];
    default:
      return errors;
  }
}

const configMapKey = /^[-._a-zA-Z0-9]+$/;

/** IsConfigMapKey: what a ConfigMap or Secret key may be (it becomes a file name). */
function configMapKeyProblem(key: string): string | undefined {
  if (key.length > 253) return 'must be no more than 253 characters';
  if (!configMapKey.test(key))
    return "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";
  if (key === '.' || key === '..') return `must not be '${key}'`;
  if (key.startsWith('..')) return "must not start with '..'";
  return undefined;
}

/** The data maps of a ConfigMap or Secret: valid keys, no key twice, base64 where due. */
function validateData(kind: string, object: Record<string, unknown>): FieldError[] {
  const errors: FieldError[] = [];
  const maps = kind === 'ConfigMap' ? ['data', 'binaryData'] : ['data', 'stringData'];
  const seen = new Map<string, string>();
  let totalBytes = 0;
  for (const field of maps) {
    const map = object[field];
    if (map === undefined) continue;
    if (!isRecord(map)) {
      errors.push(invalid(field, map, 'must be a map of keys to strings'));
      continue;
    }
    for (const [key, value] of Object.entries(map)) {
      const path = `${field}[${key}]`;
      const problem = configMapKeyProblem(key);
      if (problem !== undefined) errors.push(invalid(path, key, problem));
      if (typeof value !== 'string') {
        errors.push(invalid(path, value, 'must be a string'));
        continue;
      }
      const base64 = field === 'binaryData' || (kind === 'Secret' && field === 'data');
      if (base64 && decodeBase64(value) === undefined)
        errors.push(invalid(path, '<value hidden>', 'must be base64 encoded'));
      // A ConfigMap key may not be in both data and binaryData (stringData overrides data).
      if (kind === 'ConfigMap' && seen.has(key))
        errors.push({
          field: path,
          message: `Duplicate value: "${key}": also in ${seen.get(key)}`,
        });
      seen.set(key, field);
      totalBytes += value.length;
    }
  }
  if (totalBytes > 1024 * 1024)
    errors.push({ field: 'data', message: `Too long: must have at most 1048576 bytes` });
  return errors;
}

/**
 * One line for people: `FILE: Pod "ns/name" is invalid: field: message; …` — the file
 * (when known), the object and every field at fault.
 */
export function describeInvalid(
  errors: readonly FieldError[],
  what: { kind: string; name?: string; namespace?: string; file?: string },
): string {
  const name =
    what.name === undefined
      ? '(unnamed)'
      : `${what.namespace === undefined ? '' : `${what.namespace}/`}${what.name}`;
  const fields = errors
    .slice(0, 10)
    .map((e) => `${e.field}: ${e.message}`)
    .join('; ');
  const more = errors.length > 10 ? `; and ${errors.length - 10} more` : '';
  const where = what.file === undefined ? '' : `${what.file}: `;
  return `${where}${what.kind} ${JSON.stringify(name)} is invalid: ${fields}${more}`;
}
