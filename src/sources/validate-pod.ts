/** ValidatePodSpec, for what vole reads: volumes and the containers' use of them. */
import { downwardResources } from '../desired/downward-resources.js';
import {
  dnsLabelMessage,
  dnsSubdomainMessage,
  isDnsLabel,
  isDnsSubdomain,
} from './validate-meta.js';
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
  parseQuantity,
  quantityField,
  required,
  stringField,
} from './validate-util.js';

/** Every source field of core/v1 VolumeSource: a volume has exactly one. */
const podVolumeSources = [
  'hostPath',
  'emptyDir',
  'gcePersistentDisk',
  'awsElasticBlockStore',
  'gitRepo',
  'secret',
  'nfs',
  'iscsi',
  'glusterfs',
  'persistentVolumeClaim',
  'rbd',
  'flexVolume',
  'cinder',
  'cephfs',
  'flocker',
  'downwardAPI',
  'fc',
  'azureFile',
  'configMap',
  'vsphereVolume',
  'quobyte',
  'azureDisk',
  'photonPersistentDisk',
  'projected',
  'portworxVolume',
  'scaleIO',
  'storageos',
  'csi',
  'ephemeral',
  'image',
] as const;

const hostPathTypes = [
  '',
  'DirectoryOrCreate',
  'Directory',
  'FileOrCreate',
  'File',
  'Socket',
  'CharDevice',
  'BlockDevice',
] as const;

const projectionSources = [
  'configMap',
  'secret',
  'downwardAPI',
  'serviceAccountToken',
  'clusterTrustBundle',
  'podCertificate',
];

/** "exactly one of" `names` in `record`; returns the one present. */
export function exactlyOne(
  errors: FieldError[],
  record: Record<string, unknown>,
  which: { field: string; names: readonly string[]; what: string },
): string | undefined {
  const present = which.names.filter((n) => record[n] !== undefined && record[n] !== null);
  if (present.length === 0) errors.push(required(which.field, `must specify a ${which.what}`));
  if (present.length > 1) {
    const detail = `may not specify more than 1 ${which.what} (${present.join(', ')})`;
    errors.push(forbidden(`${which.field}.${present[1]}`, detail));
  }
  return present.length === 1 ? present[0] : undefined;
}

/** A path field that must be relative and stay below the volume. */
function descendingPath(errors: FieldError[], field: string, value: unknown): void {
  if (!stringField(errors, field, value, true)) return;
  const problem = localDescendingPathProblem(value);
  if (problem !== undefined) errors.push(invalid(field, value, problem));
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

/** Each entry of a list field, or an error when it is not a list of objects. */
function eachRecord(
  errors: FieldError[],
  field: string,
  list: unknown,
  visit: (item: Record<string, unknown>, at: string) => void,
): void {
  if (list === undefined) return;
  if (!Array.isArray(list)) return void errors.push(invalid(field, list, 'must be a list'));
  list.forEach((item: unknown, i) => {
    const at = `${field}[${i}]`;
    if (isRecord(item)) visit(item, at);
    else errors.push(invalid(at, item, 'must be an object'));
  });
}

function validateKeyItems(errors: FieldError[], field: string, items: unknown): void {
  eachRecord(errors, field, items, (item, at) => {
    stringField(errors, `${at}.key`, item['key'], true);
    descendingPath(errors, `${at}.path`, item['path']);
    modeField(errors, `${at}.mode`, item['mode']);
  });
}

const downwardFieldPaths = [
  'metadata.name',
  'metadata.namespace',
  'metadata.uid',
  'metadata.labels',
  'metadata.annotations',
];
const downwardKeyedPath = /^metadata\.(labels|annotations)\['[^']+'\]$/;

const cpuDivisors = ['1m', '1'];
const byteDivisors = [
  '1',
  '1k',
  '1M',
  '1G',
  '1T',
  '1P',
  '1E',
  '1Ki',
  '1Mi',
  '1Gi',
  '1Ti',
  '1Pi',
  '1Ei',
];

/**
 * validateContainerResourceFieldSelector (volume = true) and validateContainerResourceDivisor:
 * containerName is required, the resource one of downwardResources, the divisor one of the
 * values the API server accepts for that resource.
 */
function validateResourceFieldRef(errors: FieldError[], at: string, ref: unknown): void {
  if (!isRecord(ref)) return void errors.push(invalid(at, ref, 'must be an object'));
  const resource = ref['resource'];
  if (!stringField(errors, `${at}.containerName`, ref['containerName'], true)) return;
  if (!stringField(errors, `${at}.resource`, resource, true)) return;
  if (!(downwardResources as readonly string[]).includes(resource))
    return void errors.push(notSupported(`${at}.resource`, resource, downwardResources));
  const divisor = ref['divisor'];
  if (divisor === undefined || parseQuantity(divisor) === 0) return;
  const allowed = resource.endsWith('.cpu') ? cpuDivisors : byteDivisors;
  if (!allowed.includes(String(divisor))) {
    const detail = `only divisor's values ${allowed.join(', ')} are supported with this resource`;
    errors.push(invalid(`${at}.divisor`, divisor, detail));
  }
}

function validateDownwardItems(errors: FieldError[], field: string, items: unknown): void {
  eachRecord(errors, field, items, (item, at) => {
    descendingPath(errors, `${at}.path`, item['path']);
    modeField(errors, `${at}.mode`, item['mode']);
    const names = ['fieldRef', 'resourceFieldRef'];
    const what = 'fieldRef or resourceFieldRef';
    const which = exactlyOne(errors, item, { field: at, names, what });
    if (which === 'resourceFieldRef')
      return validateResourceFieldRef(errors, `${at}.resourceFieldRef`, item['resourceFieldRef']);
    const ref = item['fieldRef'];
    if (which !== 'fieldRef' || !isRecord(ref)) return;
    const path = ref['fieldPath'];
    const pathField = `${at}.fieldRef.fieldPath`;
    if (!stringField(errors, pathField, path, true)) return;
    if (!downwardFieldPaths.includes(path) && !downwardKeyedPath.test(path))
      errors.push(notSupported(pathField, path, downwardFieldPaths));
  });
}

/** One projection of a projected volume; returns the paths it writes. */
function validateProjection(errors: FieldError[], s: Record<string, unknown>, at: string) {
  const kind = exactlyOne(errors, s, { field: at, names: projectionSources, what: 'projection' });
  const inner = kind === undefined ? undefined : s[kind];
  if (!isRecord(inner)) return [];
  if (kind === 'configMap' || kind === 'secret') {
    stringField(errors, `${at}.${kind}.name`, inner['name'], true);
    validateKeyItems(errors, `${at}.${kind}.items`, inner['items']);
  }
  if (kind === 'downwardAPI')
    validateDownwardItems(errors, `${at}.downwardAPI.items`, inner['items']);
  if (kind === 'serviceAccountToken')
    descendingPath(errors, `${at}.serviceAccountToken.path`, inner['path']);
  const items = Array.isArray(inner['items']) ? inner['items'] : [inner];
  return items.map((i: unknown) => (isRecord(i) ? i['path'] : undefined));
}

function validateProjected(errors: FieldError[], field: string, source: Record<string, unknown>) {
  modeField(errors, `${field}.defaultMode`, source['defaultMode']);
  const paths = new Set<unknown>();
  eachRecord(errors, `${field}.sources`, source['sources'], (s, at) => {
    for (const path of validateProjection(errors, s, at)) {
      if (typeof path !== 'string') continue;
      if (paths.has(path)) errors.push(invalid(at, path, 'conflicting duplicate paths'));
      paths.add(path);
    }
  });
}

const emptyDirMedia = /^(|Memory|HugePages|HugePages-.+)$/;

/**
 * emptyDir.mode, when present (a disabled gate dropped it before): validateVolumeSource's
 * range, 0 to 01777 with the sticky bit.
 */
function emptyDirModeField(errors: FieldError[], field: string, mode: unknown): void {
  if (mode === undefined) return;
  if (typeof mode !== 'number' || !Number.isInteger(mode) || mode < 0 || mode > 0o1777)
    errors.push(
      invalid(field, mode, 'must be a number between 0 and 01777 (octal), both inclusive'),
    );
}
const csiDriverMessage =
  "a CSI driver name must be 63 characters or less, alphanumeric, '-' or '.'";

function validateCsiDriver(errors: FieldError[], field: string, driver: unknown): void {
  if (!stringField(errors, field, driver, true)) return;
  if (driver.length > 63 || !isDnsSubdomain(driver.toLowerCase()))
    errors.push(invalid(field, driver, csiDriverMessage));
}

/** One volume's source, by its kind (the kinds vole serves closely; others by presence). */
function validateSource(errors: FieldError[], at: string, kind: string, source: unknown): void {
  const field = `${at}.${kind}`;
  if (!isRecord(source)) return void errors.push(invalid(field, source, 'must be an object'));
  switch (kind) {
    case 'hostPath':
      return validateHostPath(errors, field, source);
    case 'emptyDir':
      if (source['medium'] !== undefined && !emptyDirMedia.test(String(source['medium'])))
        errors.push(notSupported(`${field}.medium`, source['medium'], ['', 'Memory', 'HugePages']));
      emptyDirModeField(errors, `${field}.mode`, source['mode']);
      return quantityField(errors, `${field}.sizeLimit`, source['sizeLimit'], false);
    case 'persistentVolumeClaim':
      stringField(errors, `${field}.claimName`, source['claimName'], true);
      return;
    case 'configMap':
    case 'secret': {
      const nameKey = kind === 'secret' ? 'secretName' : 'name';
      stringField(errors, `${field}.${nameKey}`, source[nameKey], true);
      modeField(errors, `${field}.defaultMode`, source['defaultMode']);
      return validateKeyItems(errors, `${field}.items`, source['items']);
    }
    case 'downwardAPI':
      modeField(errors, `${field}.defaultMode`, source['defaultMode']);
      return validateDownwardItems(errors, `${field}.items`, source['items']);
    case 'projected':
      return validateProjected(errors, field, source);
    case 'csi':
      return validateCsiDriver(errors, `${field}.driver`, source['driver']);
    default:
      return;
  }
}

/** A DNS-label name, unique among `seen` (volumes, containers). */
function uniqueLabel(errors: FieldError[], field: string, name: unknown, seen: Set<string>) {
  if (name === undefined || name === '') errors.push(required(field));
  else if (typeof name !== 'string' || !isDnsLabel(name))
    errors.push(invalid(field, name, dnsLabelMessage));
  else if (seen.has(name)) errors.push(duplicate(field, name));
  if (typeof name === 'string') seen.add(name);
}

/** spec.volumes: DNS-label names, unique, each with exactly one source. */
function validateVolumes(errors: FieldError[], volumes: unknown): Set<string> {
  const names = new Set<string>();
  eachRecord(errors, 'spec.volumes', volumes, (volume, at) => {
    uniqueLabel(errors, `${at}.name`, volume['name'], names);
    const which = { field: at, names: podVolumeSources, what: 'volume type' };
    const kind = exactlyOne(errors, volume, which);
    if (kind !== undefined) validateSource(errors, at, kind, volume[kind]);
  });
  return names;
}

const containerUses = [
  ['volumeMounts', 'mountPath'],
  ['volumeDevices', 'devicePath'],
] as const;

/** volumeMounts / volumeDevices name volumes that exist; their paths present and unique. */
function validateUses(
  errors: FieldError[],
  c: Record<string, unknown>,
  at: string,
  volumes: Set<string>,
) {
  for (const [list, pathKey] of containerUses) {
    const paths = new Set<string>();
    eachRecord(errors, `${at}.${list}`, c[list], (m, mat) => {
      const name = m['name'];
      if (stringField(errors, `${mat}.name`, name, true) && !volumes.has(name))
        errors.push({ field: `${mat}.name`, message: `Not found: ${JSON.stringify(name)}` });
      const path = m[pathKey];
      if (!stringField(errors, `${mat}.${pathKey}`, path, true)) return;
      if (paths.has(path)) errors.push(invalid(`${mat}.${pathKey}`, path, 'must be unique'));
      paths.add(path);
    });
  }
}

function validateContainers(
  errors: FieldError[],
  field: string,
  containers: unknown,
  volumes: Set<string>,
) {
  const names = new Set<string>();
  eachRecord(errors, field, containers, (c, at) => {
    uniqueLabel(errors, `${at}.name`, c['name'], names);
    validateUses(errors, c, at, volumes);
  });
}

const fsGroupMessage = 'must be between 0 and 2147483647, inclusive';

export function validatePodSpec(spec: Record<string, unknown>): FieldError[] {
  const errors: FieldError[] = [];
  const volumes = validateVolumes(errors, spec['volumes']);
  validateContainers(errors, 'spec.containers', spec['containers'], volumes);
  validateContainers(errors, 'spec.initContainers', spec['initContainers'], volumes);
  const nodeName = spec['nodeName'];
  if (nodeName !== undefined && (typeof nodeName !== 'string' || !isDnsSubdomain(nodeName)))
    errors.push(invalid('spec.nodeName', nodeName, dnsSubdomainMessage));
  const sc = spec['securityContext'];
  const fsGroup = isRecord(sc) ? sc['fsGroup'] : undefined;
  const validGroup =
    typeof fsGroup === 'number' && Number.isInteger(fsGroup) && fsGroup >= 0 && fsGroup < 2 ** 31;
  if (fsGroup !== undefined && !validGroup)
    errors.push(invalid('spec.securityContext.fsGroup', fsGroup, fsGroupMessage));
  return errors;
}
