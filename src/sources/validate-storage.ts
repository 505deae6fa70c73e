/** ValidatePersistentVolume(Spec) and ValidatePersistentVolumeClaim(Spec), for vole's reads. */
import { dnsSubdomainMessage, isDnsSubdomain, qualifiedNameProblem } from './validate-meta.js';
import { exactlyOne, validateHostPath } from './validate-pod.js';
import {
  type FieldError,
  forbidden,
  invalid,
  isRecord,
  notSupported,
  quantityField,
  required,
  stringField,
} from './validate-util.js';

const accessModes = ['ReadWriteOnce', 'ReadOnlyMany', 'ReadWriteMany', 'ReadWriteOncePod'];
const volumeModes = ['Block', 'Filesystem'];

/** Every source field of core/v1 PersistentVolumeSource: a PV has exactly one. */
const persistentVolumeSources = [
  'gcePersistentDisk',
  'awsElasticBlockStore',
  'hostPath',
  'glusterfs',
  'nfs',
  'rbd',
  'iscsi',
  'cinder',
  'cephfs',
  'fc',
  'flocker',
  'flexVolume',
  'azureFile',
  'vsphereVolume',
  'quobyte',
  'azureDisk',
  'photonPersistentDisk',
  'portworxVolume',
  'scaleIO',
  'local',
  'storageos',
  'csi',
];

function validateAccessModes(errors: FieldError[], field: string, modes: unknown): void {
  if (modes === undefined || (Array.isArray(modes) && modes.length === 0))
    return void errors.push(required(field, 'at least 1 access mode is required'));
  if (!Array.isArray(modes)) return void errors.push(invalid(field, modes, 'must be a list'));
  for (const mode of modes)
    if (!accessModes.includes(mode as string)) errors.push(notSupported(field, mode, accessModes));
  if (modes.includes('ReadWriteOncePod') && modes.length > 1)
    errors.push(forbidden(field, 'may not use ReadWriteOncePod with other access modes'));
}

function validateCommon(errors: FieldError[], spec: Record<string, unknown>): void {
  const volumeMode = spec['volumeMode'];
  if (volumeMode !== undefined && !volumeModes.includes(volumeMode as string))
    errors.push(notSupported('spec.volumeMode', volumeMode, volumeModes));
  const storageClass = spec['storageClassName'];
  if (
    storageClass !== undefined &&
    storageClass !== '' &&
    (typeof storageClass !== 'string' || !isDnsSubdomain(storageClass))
  )
    errors.push(invalid('spec.storageClassName', storageClass, dnsSubdomainMessage));
}

export function validatePersistentVolume(spec: Record<string, unknown>): FieldError[] {
  const errors: FieldError[] = [];
  validateAccessModes(errors, 'spec.accessModes', spec['accessModes']);
  const capacity = spec['capacity'];
  if (!isRecord(capacity)) errors.push(required('spec.capacity'));
  else quantityField(errors, 'spec.capacity[storage]', capacity['storage'], true);
  validateCommon(errors, spec);
  const which = { field: 'spec', names: persistentVolumeSources, what: 'volume type' };
  const kind = exactlyOne(errors, spec, which);
  if (kind === 'hostPath') validateHostPath(errors, 'spec.hostPath', spec['hostPath']);
  if (kind === 'local' && isRecord(spec['local']))
    stringField(errors, 'spec.local.path', spec['local']['path'], true);
  if (kind === 'csi' && isRecord(spec['csi'])) {
    stringField(errors, 'spec.csi.driver', spec['csi']['driver'], true);
    stringField(errors, 'spec.csi.volumeHandle', spec['csi']['volumeHandle'], true);
  }
  const claimRef = spec['claimRef'];
  if (claimRef !== undefined && (!isRecord(claimRef) || typeof claimRef['name'] !== 'string'))
    errors.push(required('spec.claimRef.name'));
  return errors;
}

const inOrNotIn = "must be specified when `operator` is 'In' or 'NotIn'";
const existsOrNot = "may not be specified when `operator` is 'Exists' or 'DoesNotExist'";

export function validatePersistentVolumeClaim(spec: Record<string, unknown>): FieldError[] {
  const errors: FieldError[] = [];
  validateAccessModes(errors, 'spec.accessModes', spec['accessModes']);
  const resources = spec['resources'];
  const requests = isRecord(resources) ? resources['requests'] : undefined;
  if (!isRecord(requests)) errors.push(required('spec.resources[storage]'));
  else quantityField(errors, 'spec.resources[storage]', requests['storage'], true);
  validateCommon(errors, spec);
  const volumeName = spec['volumeName'];
  if (
    volumeName !== undefined &&
    volumeName !== '' &&
    (typeof volumeName !== 'string' || !isDnsSubdomain(volumeName))
  )
    errors.push(invalid('spec.volumeName', volumeName, dnsSubdomainMessage));
  const selector = spec['selector'];
  if (isRecord(selector) && Array.isArray(selector['matchExpressions'])) {
    selector['matchExpressions'].forEach((e: unknown, i) => {
      const at = `spec.selector.matchExpressions[${i}]`;
      if (!isRecord(e)) return void errors.push(invalid(at, e, 'must be an object'));
      const op = e['operator'];
      if (!['In', 'NotIn', 'Exists', 'DoesNotExist'].includes(op as string))
        errors.push(notSupported(`${at}.operator`, op, ['In', 'NotIn', 'Exists', 'DoesNotExist']));
      const values = Array.isArray(e['values']) ? e['values'] : [];
      if ((op === 'In' || op === 'NotIn') && values.length === 0)
        errors.push(required(`${at}.values`, inOrNotIn));
      if ((op === 'Exists' || op === 'DoesNotExist') && values.length > 0)
        errors.push(forbidden(`${at}.values`, existsOrNot));
    });
  }
  return errors;
}

const reclaimPolicies = ['Delete', 'Retain'];
const bindingModes = ['Immediate', 'WaitForFirstConsumer'];
/** ValidateStorageClass's limits on parameters: 512 of them, 256 KiB in all. */
const parametersMax = 512;
const parametersBytesMax = 256 * 1024;

/** ValidateStorageClass: a provisioner, known policy and mode, bounded parameters. */
export function validateStorageClass(object: Record<string, unknown>): FieldError[] {
  const errors: FieldError[] = [];
  const provisioner = object['provisioner'];
  if (provisioner === undefined || provisioner === '') errors.push(required('provisioner'));
  else if (typeof provisioner !== 'string')
    errors.push(invalid('provisioner', provisioner, 'must be a string'));
  else {
    // A qualified name, lowercased first (kubernetes.io/no-provisioner is one).
    const problem = qualifiedNameProblem(provisioner.toLowerCase());
    if (problem !== undefined) errors.push(invalid('provisioner', provisioner, problem));
  }
  const policy = object['reclaimPolicy'];
  if (policy !== undefined && !reclaimPolicies.includes(policy as string))
    errors.push(notSupported('reclaimPolicy', policy, reclaimPolicies));
  const mode = object['volumeBindingMode'];
  if (mode !== undefined && !bindingModes.includes(mode as string))
    errors.push(notSupported('volumeBindingMode', mode, bindingModes));
  const parameters = object['parameters'];
  if (parameters !== undefined && !isRecord(parameters))
    errors.push(invalid('parameters', parameters, 'must be a map of strings'));
  if (isRecord(parameters)) {
    const entries = Object.entries(parameters);
    if (entries.length > parametersMax)
      errors.push(
        invalid('parameters', entries.length, `must have at most ${parametersMax} entries`),
      );
    const bytes = entries.reduce((n, [k, v]) => n + k.length + String(v).length, 0);
    if (bytes > parametersBytesMax)
      errors.push(invalid('parameters', bytes, `must be at most ${parametersBytesMax} bytes`));
    for (const [k, v] of entries)
      if (typeof v !== 'string') errors.push(invalid(`parameters[${k}]`, v, 'must be a string'));
  }
  const expansion = object['allowVolumeExpansion'];
  if (expansion !== undefined && typeof expansion !== 'boolean')
    errors.push(invalid('allowVolumeExpansion', expansion, 'must be true or false'));
  return errors;
}
