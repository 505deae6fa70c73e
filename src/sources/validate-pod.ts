/** ValidatePodSpec, for what vole reads: volumes and the containers' use of them. */
import { dnsLabelMessage, isDnsLabel, isDnsSubdomain, dnsSubdomainMessage } from './validate-meta.js';
import {
  backstepProblem,
  duplicate,
  type FieldError,
  forbidden,
  invalid,
  isRecord,
  localDescendingPathProblem,
  modeField,
  notSupported,
  quantityField,
  required,
  stringField,
} from './validate-util.js';

/** Every source field of core/v1 VolumeSource: a volume has exactly one. */
export const podVolumeSources = [
  'hostPath', 'emptyDir', 'gcePersistentDisk', 'awsElasticBlockStore', 'gitRepo', 'secret',
  'nfs', 'iscsi', 'glusterfs', 'persistentVolumeClaim', 'rbd', 'flexVolume', 'cinder',
  'cephfs', 'flocker', 'downwardAPI', 'fc', 'azureFile', 'configMap', 'vsphereVolume',
  'quobyte', 'azureDisk', 'photonPersistentDisk', 'projected', 'portworxVolume', 'scaleIO',
  'storageos', 'csi', 'ephemeral', 'image',
] as const;

export const hostPathTypes = [
  '', 'DirectoryOrCreate', 'Directory', 'FileOrCreate', 'File', 'Socket', 'CharDevice',
  'BlockDevice',
] as const;

/** "exactly one of" for a record's fields among `names`; returns the one present. */
export function exactlyOne(
  errors: FieldError[],
  field: string,
  record: Record<string, unknown>,
  names: readonly string[],
  what: string,
): string | undefined {
  const present = names.filter((n) => record[n] !== undefined && record[n] !== null);
  if (present.length === 0) errors.push(required(field, `must specify a ${what}`));
  if (present.length > 1)
    errors.push(forbidden(`${field}.${present[1]}`, `may not specify more than 1 ${what} (${present.join(', ')})`));
  return present.length === 1 ? present[0] : undefined;
}

export function validateHostPath(errors: FieldError[], field: string, source: unknown): void {
  if (!isRecord(source)) return void errors.push(invalid(field, source, 'must be an object'));
  if (stringField(errors, `${field}.path`, source['path'], true)) {
    const problem = backstepProblem(source['path']);
    if (problem !== undefined) errors.push(invalid(`${field}.path`, source['path'], problem));
  }
  const type = source['type'];
  if (type !== undefined && !(hostPathTypes as readonly unknown[]).includes(type))
    errors.push(notSupported(`${field}.type`, type, hostPathTypes.slice(1)));
}

function validateKeyItems(errors: FieldError[], field: string, items: unknown): void {
  if (items === undefined) return;
  if (!Array.isArray(items)) return void errors.push(invalid(field, items, 'must be a list'));
  items.forEach((item: unknown, i) => {
    const at = `${field}[${i}]`;
    if (!isRecord(item)) return void errors.push(invalid(at, item, 'must be an object'));
    stringField(errors, `${at}.key`, item['key'], true);
    if (stringField(errors, `${at}.path`, item['path'], true)) {
      const problem = localDescendingPathProblem(item['path']);
      if (problem !== undefined) errors.push(invalid(`${at}.path`, item['path'], problem));
    }
    modeField(errors, `${at}.mode`, item['mode']);
  });
}

const downwardFieldPaths = [
  'metadata.name', 'metadata.namespace', 'metadata.uid', 'metadata.labels',
  'metadata.annotations',
];
const downwardKeyedPath = /^metadata\.(labels|annotations)\['[^']+'\]$/;

function validateDownwardItems(errors: FieldError[], field: string, items: unknown): void {
  if (items === undefined) return;
  if (!Array.isArray(items)) return void errors.push(invalid(field, items, 'must be a list'));
  items.forEach((item: unknown, i) => {
    const at = `${field}[${i}]`;
    if (!isRecord(item)) return void errors.push(invalid(at, item, 'must be an object'));
    if (stringField(errors, `${at}.path`, item['path'], true)) {
      const problem = localDescendingPathProblem(item['path']);
      if (problem !== undefined) errors.push(invalid(`${at}.path`, item['path'], problem));
    }
    modeField(errors, `${at}.mode`, item['mode']);
    const which = exactlyOne(errors, at, item, ['fieldRef', 'resourceFieldRef'], 'fieldRef or resourceFieldRef');
    const ref = item['fieldRef'];
    if (which === 'fieldRef' && isRecord(ref)) {
      const path = ref['fieldPath'];
      if (stringField(errors, `${at}.fieldRef.fieldPath`, path, true) &&
          !downwardFieldPaths.includes(path) && !downwardKeyedPath.test(path))
        errors.push(notSupported(`${at}.fieldRef.fieldPath`, path, downwardFieldPaths));
    }
  });
}

function validateProjected(errors: FieldError[], field: string, source: Record<string, unknown>) {
  modeField(errors, `${field}.defaultMode`, source['defaultMode']);
  const sources = source['sources'];
  if (sources === undefined) return;
  if (!Array.isArray(sources)) return void errors.push(invalid(`${field}.sources`, sources, 'must be a list'));
  const paths = new Set<string>();
  sources.forEach((s: unknown, i) => {
    const at = `${field}.sources[${i}]`;
    if (!isRecord(s)) return void errors.push(invalid(at, s, 'must be an object'));
    const kinds = ['configMap', 'secret', 'downwardAPI', 'serviceAccountToken', 'clusterTrustBundle', 'podCertificate'];
    const kind = exactlyOne(errors, at, s, kinds, 'projection source');
    const inner = kind === undefined ? undefined : s[kind];
    if (!isRecord(inner)) return;
    if (kind === 'configMap' || kind === 'secret') {
      stringField(errors, `${at}.${kind}.name`, inner['name'], true);
      validateKeyItems(errors, `${at}.${kind}.items`, inner['items']);
    }
    if (kind === 'downwardAPI') validateDownwardItems(errors, `${at}.downwardAPI.items`, inner['items']);
    if (kind === 'serviceAccountToken' && stringField(errors, `${at}.serviceAccountToken.path`, inner['path'], true)) {
      const problem = localDescendingPathProblem(inner['path']);
      if (problem !== undefined) errors.push(invalid(`${at}.serviceAccountToken.path`, inner['path'], problem));
    }
    const items = Array.isArray(inner['items']) ? inner['items'] : [inner];
    for (const item of items) {
      const path = isRecord(item) ? item['path'] : undefined;
      if (typeof path !== 'string') continue;
      if (paths.has(path)) errors.push(invalid(at, path, 'conflicting duplicate paths'));
      paths.add(path);
    }
  });
}

const emptyDirMedia = /^(|Memory|HugePages|HugePages-.+)$/;

/** One volume's source, by its kind (the kinds vole knows closely; others by presence). */
function validateSource(errors: FieldError[], at: string, kind: string, source: unknown): void {
  const field = `${at}.${kind}`;
  if (!isRecord(source)) return void errors.push(invalid(field, source, 'must be an object'));
  switch (kind) {
    case 'hostPath':
      return validateHostPath(errors, field, source);
    case 'emptyDir':
      if (source['medium'] !== undefined && !emptyDirMedia.test(String(source['medium'])))
        errors.push(notSupported(`${field}.medium`, source['medium'], ['', 'Memory', 'HugePages']));
      return quantityField(errors, `${field}.sizeLimit`, source['sizeLimit'], false);
    case 'persistentVolumeClaim':
      stringField(errors, `${field}.claimName`, source['claimName'], true);
      return;
    case 'configMap':
    case 'secret':
      stringField(errors, `${field}.${kind === 'secret' ? 'secretName' : 'name'}`, source[kind === 'secret' ? 'secretName' : 'name'], true);
      modeField(errors, `${field}.defaultMode`, source['defaultMode']);
      return validateKeyItems(errors, `${field}.items`, source['items']);
    case 'downwardAPI':
      modeField(errors, `${field}.defaultMode`, source['defaultMode']);
      return validateDownwardItems(errors, `${field}.items`, source['items']);
    case 'projected':
      return validateProjected(errors, field, source);
    case 'csi':
      if (stringField(errors, `${field}.driver`, source['driver'], true) &&
          (source['driver'].length > 63 || !isDnsSubdomain(source['driver'].toLowerCase())))
        errors.push(invalid(`${field}.driver`, source['driver'], 'a CSI driver name must be 63 characters or less, alphanumeric, \'-\' or \'.\''));
      return;
    default:
      return;
  }
}

/** spec.volumes: DNS-label names, unique, each with exactly one source. */
function validateVolumes(errors: FieldError[], volumes: unknown): Set<string> {
  const names = new Set<string>();
  if (volumes === undefined) return names;
  if (!Array.isArray(volumes)) {
    errors.push(invalid('spec.volumes', volumes, 'must be a list'));
    return names;
  }
  volumes.forEach((volume: unknown, i) => {
    const at = `spec.volumes[${i}]`;
    if (!isRecord(volume)) return void errors.push(invalid(at, volume, 'must be an object'));
    const name = volume['name'];
    if (name === undefined || name === '') errors.push(required(`${at}.name`));
    else if (typeof name !== 'string' || !isDnsLabel(name))
      errors.push(invalid(`${at}.name`, name, dnsLabelMessage));
    else if (names.has(name)) errors.push(duplicate(`${at}.name`, name));
    if (typeof name === 'string') names.add(name);
    const kind = exactlyOne(errors, at, volume, podVolumeSources, 'volume type');
    if (kind !== undefined) validateSource(errors, at, kind, volume[kind]);
  });
  return names;
}

/** volumeMounts / volumeDevices name volumes that exist; paths present and unique. */
function validateContainers(errors: FieldError[], field: string, containers: unknown, volumes: Set<string>) {
  if (containers === undefined) return;
  if (!Array.isArray(containers)) return void errors.push(invalid(field, containers, 'must be a list'));
  const containerNames = new Set<string>();
  containers.forEach((c: unknown, i) => {
    const at = `${field}[${i}]`;
    if (!isRecord(c)) return void errors.push(invalid(at, c, 'must be an object'));
    const name = c['name'];
    if (name === undefined || name === '') errors.push(required(`${at}.name`));
    else if (typeof name !== 'string' || !isDnsLabel(name)) errors.push(invalid(`${at}.name`, name, dnsLabelMessage));
    else if (containerNames.has(name)) errors.push(duplicate(`${at}.name`, name));
    if (typeof name === 'string') containerNames.add(name);
    for (const [list, pathKey] of [['volumeMounts', 'mountPath'], ['volumeDevices', 'devicePath']] as const) {
      const entries = c[list];
      if (entries === undefined) continue;
      if (!Array.isArray(entries)) { errors.push(invalid(`${at}.${list}`, entries, 'must be a list')); continue; }
      const paths = new Set<string>();
      entries.forEach((m: unknown, j) => {
        const mat = `${at}.${list}[${j}]`;
        if (!isRecord(m)) return void errors.push(invalid(mat, m, 'must be an object'));
        if (stringField(errors, `${mat}.name`, m['name'], true) && !volumes.has(m['name']))
          errors.push({ field: `${mat}.name`, message: `Not found: ${JSON.stringify(m['name'])}` });
        if (stringField(errors, `${mat}.${pathKey}`, m[pathKey], true)) {
          if (paths.has(m[pathKey])) errors.push(invalid(`${mat}.${pathKey}`, m[pathKey], 'must be unique'));
          paths.add(m[pathKey]);
        }
      });
    }
  });
}

export function validatePodSpec(spec: Record<string, unknown>): FieldError[] {
  const errors: FieldError[] = [];
  const volumes = validateVolumes(errors, spec['volumes']);
  validateContainers(errors, 'spec.containers', spec['containers'], volumes);
  validateContainers(errors, 'spec.initContainers', spec['initContainers'], volumes);
  const nodeName = spec['nodeName'];
  if (nodeName !== undefined && (typeof nodeName !== 'string' || !isDnsSubdomain(nodeName)))
    errors.push(invalid('spec.nodeName', nodeName, dnsSubdomainMessage));
  const sc = spec['securityContext'];
  if (isRecord(sc) && sc['fsGroup'] !== undefined) {
    const g = sc['fsGroup'];
    if (typeof g !== 'number' || !Number.isInteger(g) || g < 0 || g > 2 ** 31 - 1)
      errors.push(invalid('spec.securityContext.fsGroup', g, 'must be between 0 and 2147483647, inclusive'));
  }
  return errors;
}
