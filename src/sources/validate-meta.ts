/** ObjectMeta validation: names, namespaces, labels, annotations (apimachinery). */
import {
  type FieldError,
  hasControlCharacters,
  invalid,
  isRecord,
  required,
} from './validate-util.js';

const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const qualifiedNamePart = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const labelValue = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** RFC 1123 label: namespaces, volume names, container names. */
export function isDnsLabel(value: string): boolean {
  return value.length <= 63 && dnsLabel.test(value);
}

/** RFC 1123 subdomain: pod, PV, PVC, ConfigMap and Secret names. */
export function isDnsSubdomain(value: string): boolean {
  return value.length <= 253 && dnsSubdomain.test(value);
}

export const dnsLabelMessage =
  'a lowercase RFC 1123 label must consist of lower case alphanumeric characters or ' +
  "'-', and must start and end with an alphanumeric character";
export const dnsSubdomainMessage =
  'a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, ' +
  "'-' or '.', and must start and end with an alphanumeric character";

const labelValueMessage =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' " +
  "or '.', at most 63 characters";

/** A label or annotation key: an optional DNS-subdomain prefix, `/`, and a name part. */
export function qualifiedNameProblem(key: string): string | undefined {
  const slash = key.lastIndexOf('/');
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  const name = slash < 0 ? key : key.slice(slash + 1);
  if (prefix !== undefined && !isDnsSubdomain(prefix)) return `prefix part ${dnsSubdomainMessage}`;
  if (name.length === 0 || name.length > 63 || !qualifiedNamePart.test(name))
    return (
      "name part must consist of alphanumeric characters, '-', '_' or '.', must start and " +
      'end with an alphanumeric character, and be at most 63 characters'
    );
  return undefined;
}

function validateStringMap(
  errors: FieldError[],
  field: string,
  map: unknown,
  values: 'label' | 'any',
): void {
  if (map === undefined) return;
  if (!isRecord(map)) return void errors.push(invalid(field, map, 'must be a map of strings'));
  let totalBytes = 0;
  for (const [key, value] of Object.entries(map)) {
    const keyProblem = qualifiedNameProblem(key);
    if (keyProblem !== undefined) errors.push(invalid(field, key, keyProblem));
    if (typeof value !== 'string') {
      errors.push(invalid(`${field}[${key}]`, value, 'must be a string'));
      continue;
    }
    totalBytes += key.length + value.length;
    if (values === 'label' && (value.length > 63 || !labelValue.test(value)))
      errors.push(invalid(`${field}[${key}]`, value, labelValueMessage));
  }
  if (values === 'any' && totalBytes > 256 * 1024)
    errors.push({ field, message: 'Too long: must have at most 262144 bytes' });
}

/** ValidateObjectMeta: name (DNS subdomain), namespace (DNS label), labels, annotations. */
export function fieldErrorsOfMeta(meta: unknown, opts: { namespaced: boolean }): FieldError[] {
  const errors: FieldError[] = [];
  if (!isRecord(meta)) return [required('metadata')];
  const name = meta['name'];
  if (name === undefined || name === '')
    errors.push(required('metadata.name', 'name or generateName is required'));
  else if (typeof name !== 'string')
    errors.push(invalid('metadata.name', name, 'must be a string'));
  else if (!isDnsSubdomain(name)) errors.push(invalid('metadata.name', name, dnsSubdomainMessage));
  const namespace = meta['namespace'];
  if (namespace !== undefined) {
    if (!opts.namespaced)
      errors.push({ field: 'metadata.namespace', message: 'Forbidden: not allowed on this type' });
    else if (typeof namespace !== 'string' || !isDnsLabel(namespace))
      errors.push(invalid('metadata.namespace', namespace, dnsLabelMessage));
  }
  const uid = meta['uid'];
  if (uid !== undefined && (typeof uid !== 'string' || hasControlCharacters(uid)))
    errors.push(invalid('metadata.uid', uid, 'must be a string without control characters'));
  validateStringMap(errors, 'metadata.labels', meta['labels'], 'label');
  validateStringMap(errors, 'metadata.annotations', meta['annotations'], 'any');
  return errors;
}
