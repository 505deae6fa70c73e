/**
 * Pod → volumes resolution: the pure part of the kubelet's desired-state populator
 * (behaviour K2.6) and of the plugin manager's lookup (behaviour K1.1 naming rule).
 *
 * A volume that cannot be processed (missing claim, unbound claim, no plugin) becomes a
 * pod error with the kubelet's wording, and the pod's other volumes go on (docs/scenarios.md:
 * "runs and fails as it would there").
 */
import type { NodeAllocatable, PluginCaps } from '../events/index.js';
import {
  type ClusterObject,
  objectKey,
  parseQuantityBytes,
  type PersistentVolume,
  type PersistentVolumeClaim,
  type Pod,
  type PodVolume,
} from '../events/k8s.js';
import { UniqueVolumeName } from '../ids.js';
import {
  boundVolumes,
  type ClaimBinding,
  findVolumeForClaim,
  lookupOf,
} from '../binding/claims.js';
import { emptyDirMemoryBytes } from './downward-resources.js';
import { flat } from './flat.js';
import {
  claimClassName,
  nodeAffinityMismatch,
  storageClassOf,
  waitsForFirstConsumer,
} from '../binding/storage-class.js';
import { ClusterObjects } from './objects.js';
import { addReference, anyPersistentVolumeName, type References } from './references.js';
import { type ContentContext, contentPluginNames, contentSource } from './resolve-content.js';
import type { ResolvedVolume, VolumeSource } from '../operations/volume-spec.js';
import { volumeTraits } from '../operations/volume-traits.js';

/** Kubernetes' built-in plugin names for the in-tree sources vole knows. */
export const builtinPluginNames = {
  emptyDir: 'kubernetes.io/empty-dir',
  hostPath: 'kubernetes.io/host-path',
  configMap: contentPluginNames.configMap,
  secret: contentPluginNames.secret,
  downwardAPI: contentPluginNames.downwardAPI,
  projected: contentPluginNames.projected,
  local: 'kubernetes.io/local-volume',
} as const;

const volumeGidAnnotation = 'pv.beta.kubernetes.io/gid';

export interface ResolveInput {
  readonly objects: ReadonlyMap<string, ClusterObject>;
  readonly plugins: ReadonlyMap<string, PluginCaps>;
  /**
   * The bindings the log recorded (the kubelet core binds claims). Absent: a claim with
   * volumeName and no status counts as bound, as before binding existed (the controller).
   */
  readonly bindings?: ReadonlyMap<string, ClaimBinding>;
  /** PV name → the claim holding it (boundVolumes), computed once for many resolutions. */
  readonly taken?: () => ReadonlyMap<string, string>;
  /** false: another binds claims (cluster mode's controller); a wait says so. */
  readonly bindClaims?: boolean;
  /** The node's allocatable (EngineStarted): downwardAPI resourceFieldRef of unset limits. */
  readonly allocatable?: NodeAllocatable | undefined;
  /** This node's labels, for PVs' node affinity (node-labels.ts); absent: not checked. */
  readonly nodeLabels?: () => Readonly<Record<string, string>>;
  /** true: serviceAccountToken projections resolve (their tokens are asked for at setUp). */
  readonly tokenRequests?: boolean;
  /**
   * Kubernetes mode: CSIDriver objects say whether a CSI volume needs attaching
   * (attachableOf). Absent: the driver's capability says it.
   */
  readonly csiAttach?: CsiAttach | undefined;
}

/** Who attaches in Kubernetes mode: the attach/detach controller, or this node. */
export interface CsiAttach {
  readonly controllerAttachDetach: boolean;
}

/** The CsiAttach of a node's config. */
export function csiAttachOf(config: { controllerAttachDetach: boolean }): CsiAttach {
  return { controllerAttachDetach: config.controllerAttachDetach };
}

/**
 * Whether a volume needs attaching. In Kubernetes mode a CSI volume does, as the kubelet's
 * CSI plugin decides (CanAttach), unless its driver's CSIDriver object says
 * `attachRequired: false`; no CSIDriver object means attach required. This node then waits
 * for the controller's attachment (WaitForAttach, volumesAttached, the VolumeAttachment's
 * metadata as MountDevice's publish context). When this node attaches itself (kubelet
 * attach mode) it can only ControllerPublish, so a driver without PUBLISH_UNPUBLISH_VOLUME
 * stays not attachable. Otherwise the plugin's capability says it.
 */
function attachableOf(
  caps: PluginCaps,
  source: VolumeSource,
  input: ResolveInput,
  references: string[],
): boolean {
  const mode = input.csiAttach;
  if (mode === undefined || caps.csi === undefined || source.kind !== 'csi') return caps.attachable;
  addReference(references, 'CSIDriver', source.driver);
  const driver = input.objects.get(objectKey('CSIDriver', source.driver));
  const attachRequired = driver?.kind !== 'CSIDriver' || driver.spec?.attachRequired !== false;
  return attachRequired && (mode.controllerAttachDetach || caps.attachable);
}

export interface PodResolution {
  readonly expectedVolumes: readonly string[];
  readonly volumes: readonly ResolvedVolume[];
  readonly errors: ReadonlyMap<string, string>;
  /** The objects this resolution read (references.ts), so their changes re-resolve it. */
  readonly references: References;
}

type Step<T> = { ok: true; value: T } | { ok: false; error: string };
const fail = (error: string): { ok: false; error: string } => ({ ok: false, error });

/**
 * behaviour K2.5 WaitForAttachAndMount step 1: the volumes referenced by a container. A pod
 * that lists no containers (a scenario shorthand) expects all of its volumes.
 */
export function expectedVolumeNames(pod: Pod): string[] {
  const volumes = pod.spec.volumes ?? [];
  const containers = containersOf(pod);
  if (containers.length === 0) return volumes.map((v) => v.name);
  const used = new Set<string>();
  for (const c of containers) {
    for (const m of c.volumeMounts ?? []) used.add(m.name);
    for (const d of c.volumeDevices ?? []) used.add(d.name);
  }
  return volumes.filter((v) => used.has(v.name)).map((v) => v.name);
}

type Container = NonNullable<Pod['spec']['containers']>[number];
const noContainers: readonly Container[] = Object.freeze([]);

/** The pod's containers and init containers (no copy when it has only one kind). */
function containersOf(pod: Pod): readonly Container[] {
  const { containers, initContainers } = pod.spec;
  if (initContainers === undefined || initContainers.length === 0)
    return containers ?? noContainers;
  if (containers === undefined || containers.length === 0) return initContainers;
  return [...containers, ...initContainers];
}

interface Located {
  source: VolumeSource;
  pluginName: string;
  inline: boolean;
  pv?: PersistentVolume;
  pvc?: PersistentVolumeClaim;
  claimSizeBytes?: number;
}

function sourceOfPv(pv: PersistentVolume): Located | undefined {
  const { csi, local, hostPath } = pv.spec;
  if (csi !== undefined) {
    // Written field by field: a literal with spreads keeps room for fields it never gets.
    const source: VolumeSource & { kind: 'csi' } = {
      kind: 'csi',
      driver: csi.driver,
      volumeHandle: csi.volumeHandle ?? '',
      fsType: csi.fsType ?? '',
      inline: false,
    };
    if (csi.volumeAttributes !== undefined) source.volumeAttributes = csi.volumeAttributes;
    if (pv.spec.mountOptions !== undefined) source.mountOptions = pv.spec.mountOptions;
    return { source, pluginName: csi.driver, inline: false, pv };
  }
  if (local !== undefined) {
    const source: VolumeSource = { kind: 'local', path: local.path, fsType: local.fsType ?? '' };
    return { source, pluginName: builtinPluginNames.local, inline: false, pv };
  }
  if (hostPath !== undefined) {
    const source: VolumeSource = {
      kind: 'hostPath',
      path: hostPath.path,
      type: hostPath.type ?? '',
    };
    return { source, pluginName: builtinPluginNames.hostPath, inline: false, pv };
  }
  return undefined;
}

function sourceOfInline(
  v: PodVolume,
  pod: Pod,
  allocatable: NodeAllocatable | undefined,
): Located | undefined {
  if (v.csi !== undefined) {
    const handle = v.csi.volumeHandle ?? v.name;
    const source: VolumeSource = {
      kind: 'csi',
      driver: v.csi.driver,
      volumeHandle: handle,
      fsType: v.csi.fsType ?? '',
      inline: true,
      ...(v.csi.volumeAttributes === undefined ? {} : { volumeAttributes: v.csi.volumeAttributes }),
    };
    return { source, pluginName: v.csi.driver, inline: true };
  }
  if (v.emptyDir !== undefined) {
    const sizeLimitBytes = parseQuantityBytes(v.emptyDir.sizeLimit) ?? 0;
    const medium = v.emptyDir.medium ?? '';
    const tmpfsBytes =
      medium === 'Memory' ? emptyDirMemoryBytes(pod, sizeLimitBytes, allocatable) : undefined;
    const source: VolumeSource = {
      kind: 'emptyDir',
      medium,
      sizeLimitBytes,
      ...(tmpfsBytes === undefined ? {} : { tmpfsBytes }),
      // Kept as the pod has it: the plugin honours it only with its feature gate on.
      ...(v.emptyDir.mode === undefined ? {} : { mode: v.emptyDir.mode }),
    };
    return { source, pluginName: builtinPluginNames.emptyDir, inline: true };
  }
  if (v.hostPath !== undefined) {
    const source: VolumeSource = {
      kind: 'hostPath',
      path: v.hostPath.path,
      type: v.hostPath.type ?? '',
    };
    return { source, pluginName: builtinPluginNames.hostPath, inline: true };
  }
  return undefined;
}

function locateInline(
  pod: Pod,
  v: PodVolume,
  references: string[],
  opts: ContentContext,
): Step<Located> {
  const content = contentSource(pod, v, references, opts);
  if (content !== undefined) {
    if (!content.ok) return content;
    const { source, pluginName } = content;
    return { ok: true, value: { source, pluginName, inline: true } };
  }
  const located = sourceOfInline(v, pod, opts.allocatable);
  return located === undefined ? fail(noPlugin(v.name)) : { ok: true, value: located };
}

/** An object by kind and name: the world's store looks it up without building its key. */
function findObject(
  objects: ReadonlyMap<string, ClusterObject>,
  kind: string,
  name: string,
  namespace?: string,
): ClusterObject | undefined {
  return objects instanceof ClusterObjects
    ? objects.lookup(kind, name, namespace)
    : objects.get(objectKey(kind, name, namespace));
}

/** The kubelet's prefix of a claim's errors (built only for an error: most pods resolve). */
function pvcPrefix(namespace: string, claimName: string): string {
  return `error processing PVC ${namespace}/${claimName}`;
}

function locateClaim(
  namespace: string,
  claimName: string,
  input: ResolveInput,
  references: string[],
): Step<Located> {
  // The pod's own string names the claim in its references: no key is built.
  addReference(references, 'PersistentVolumeClaim', claimName);
  const pvc = findObject(input.objects, 'PersistentVolumeClaim', claimName, namespace);
  if (pvc === undefined || pvc.kind !== 'PersistentVolumeClaim') {
    return fail(
      `${pvcPrefix(namespace, claimName)}: failed to fetch PVC from API server: ` +
        `persistentvolumeclaims "${claimName}" not found`,
    );
  }
  if (pvc.metadata.deletionTimestamp !== undefined) {
    return fail(
      `${pvcPrefix(namespace, claimName)}: can't start pod because PVC ${namespace}/${claimName} is being deleted`,
    );
  }
  const bound = boundVolumeOf(pvc, input, references);
  if (!bound.ok) return bound;
  const { pvName, claimSizeBytes } = bound.value;
  addReference(references, 'PersistentVolume', pvName);
  const pv = findObject(input.objects, 'PersistentVolume', pvName);
  if (pv === undefined || pv.kind !== 'PersistentVolume') {
    return fail(
      `${pvcPrefix(namespace, claimName)}: failed to fetch PV "${pvName}" from API server: ` +
        `persistentvolumes "${pvName}" not found`,
    );
  }
  const affinity =
    pv.spec.nodeAffinity === undefined || input.nodeLabels === undefined
      ? undefined
      : nodeAffinityMismatch(pv, input.nodeLabels());
  if (affinity !== undefined) {
    return fail(
      `${pvcPrefix(namespace, claimName)}: volume node affinity conflict: PersistentVolume ` +
        `"${pvName}" cannot be used on this node: ${affinity}; run the pod on a node its ` +
        'topology allows',
    );
  }
  const located = sourceOfPv(pv);
  if (located === undefined) {
    return fail(
      `failed to get Plugin from volumeSpec for volume "${pvName}" ` +
        `err=no volume plugin matched`,
    );
  }
  return { ok: true, value: { ...located, pvc, claimSizeBytes } };
}

/**
 * The PV a claim is bound to, and the claim's capacity: the log's binding, else the claim's
 * status (the API server's record). An unbound claim fails with why it cannot bind yet.
 */
function boundVolumeOf(
  pvc: PersistentVolumeClaim,
  input: ResolveInput,
  references: string[],
): Step<{ pvName: string; claimSizeBytes: number }> {
  const { namespace = 'default', name } = pvc.metadata;
  // A key only when the log bound some claim (most worlds bind none).
  const binding =
    input.bindings === undefined || input.bindings.size === 0
      ? undefined
      : input.bindings.get(objectKey('PersistentVolumeClaim', name, namespace));
  if (binding !== undefined)
    return { ok: true, value: { pvName: binding.volume, claimSizeBytes: binding.capacityBytes } };
  const pvName = pvc.spec.volumeName ?? '';
  const phase = pvc.status?.phase;
  const statusBytes = parseQuantityBytes(pvc.status?.capacity?.storage) ?? 0;
  if (pvName !== '' && (phase === 'Bound' || (input.bindings === undefined && phase === undefined)))
    return { ok: true, value: { pvName, claimSizeBytes: statusBytes } };
  if (input.bindings === undefined || (phase !== undefined && phase !== 'Pending')) {
    return fail(
      `${pvcPrefix(namespace, name)}: PVC ${namespace}/${name} has non-bound phase ` +
        `("${phase ?? 'Pending'}") or empty pvc.Spec.VolumeName ("${pvName}")`,
    );
  }
  // Waiting for the planner to bind it: any PV change may change the answer.
  addReference(references, 'PersistentVolume', anyPersistentVolumeName);
  const taken = input.taken?.() ?? boundVolumes(input.objects, input.bindings);
  const verdict = findVolumeForClaim(pvc, input.objects, taken);
  const binder = input.bindClaims === false ? ' (the attach/detach controller binds claims)' : '';
  const provisioner = verdict.ok ? undefined : provisionerOf(pvc, input);
  const why = verdict.ok
    ? `binding to PersistentVolume "${verdict.pv.metadata.name}" is pending${binder}`
    : provisioner !== undefined
      ? `waiting for a volume to be created by ${provisioner}${binder}`
      : `it cannot bind: ${verdict.reason}`;
  return fail(`${pvcPrefix(namespace, name)}: PVC ${namespace}/${name} is not bound (${why})`);
}

/** The provisioner of the claim's class, in words, when the class names one. */
function provisionerOf(pvc: PersistentVolumeClaim, input: ResolveInput): string | undefined {
  const lookup = lookupOf(input.objects);
  const className = claimClassName(pvc, lookup);
  if (className === '') return undefined;
  const sc = storageClassOf(lookup, className);
  if (sc === undefined) return undefined; // no such class: the binder's reason says what fits
  const mode = waitsForFirstConsumer(sc) ? ', WaitForFirstConsumer' : '';
  return `provisioner "${sc.provisioner}" (StorageClass "${className}"${mode})`;
}

/**
 * What a source learns of its pod: an inline CSI volume's driver its name (CSI ephemeral
 * volume_context); a volume the kubelet puts on a tmpfs of its own, that tmpfs's size.
 */
function withPod(
  source: VolumeSource,
  pod: Pod,
  inline: boolean,
  allocatable: NodeAllocatable | undefined,
): VolumeSource {
  if (inline && source.kind === 'csi') {
    const podNamespace = pod.metadata.namespace ?? 'default';
    return { ...source, podName: pod.metadata.name, podNamespace };
  }
  if (source.kind === 'secret' || source.kind === 'downwardAPI' || source.kind === 'projected') {
    const tmpfsBytes = emptyDirMemoryBytes(pod, 0, allocatable);
    return tmpfsBytes === undefined ? source : { ...source, tmpfsBytes };
  }
  return source;
}

function resolveOne(
  pod: Pod,
  v: PodVolume,
  input: ResolveInput,
  references: string[],
): Step<ResolvedVolume> {
  const namespace = pod.metadata.namespace ?? 'default';
  const uid = pod.metadata.uid ?? '';
  const claim = v.persistentVolumeClaim;
  const located: Step<Located> =
    claim !== undefined
      ? locateClaim(namespace, claim.claimName, input, references)
      : locateInline(pod, v, references, {
          tokenRequests: input.tokenRequests === true,
          allocatable: input.allocatable,
        });
  if (!located.ok) return located;
  const { pluginName, inline, pv } = located.value;
  const source = withPod(located.value.source, pod, inline, input.allocatable);
  const caps = input.plugins.get(pluginName);
  if (caps === undefined) return fail(noPlugin(v.name));
  const readOnly = (claim?.readOnly ?? v.csi?.readOnly ?? false) || pv?.spec.csi?.readOnly === true;
  const value = resolvedOf(located.value, source, caps, {
    outerVolumeSpecName: v.name,
    uid,
    readOnly,
    namespace,
    attachable: attachableOf(caps, source, input, references),
  });
  return { ok: true, value };
}

/**
 * A PV the attach/detach controller finds attached with no pod to say how (a
 * VolumeAttachment, a Node's volumesAttached): resolved as a claim bound to it would be.
 * undefined when no plugin serves it.
 */
export function resolvePersistentVolume(
  pv: PersistentVolume,
  plugins: ReadonlyMap<string, PluginCaps>,
): ResolvedVolume | undefined {
  const located = sourceOfPv(pv);
  const caps = located === undefined ? undefined : plugins.get(located.pluginName);
  if (located === undefined || caps === undefined) return undefined;
  const readOnly = pv.spec.csi?.readOnly === true;
  const outerVolumeSpecName = pv.metadata.name;
  return resolvedOf(located, located.source, caps, {
    outerVolumeSpecName,
    uid: '',
    readOnly,
    namespace: '',
  });
}

function resolvedOf(
  located: Located,
  source: VolumeSource,
  caps: PluginCaps,
  o: {
    outerVolumeSpecName: string;
    uid: string;
    readOnly: boolean;
    namespace: string;
    /** Whether it needs attaching (attachableOf); absent: the plugin's capability says. */
    attachable?: boolean;
  },
): ResolvedVolume {
  const { pluginName, inline, pv, pvc, claimSizeBytes } = located;
  const { uid, namespace } = o;
  // An inline CSI volume is neither attachable nor device-mountable (docs/scenarios.md).
  const attachable = !inline && (o.attachable ?? caps.attachable);
  const deviceMountable = caps.deviceMountable && !inline;
  const innerVolumeSpecName = pv?.metadata.name ?? o.outerVolumeSpecName;
  const handle = source.kind === 'csi' ? source.volumeHandle : innerVolumeSpecName;
  const volume = UniqueVolumeName(
    // Flat: the world keeps it in four maps' keys and its records.
    flat(
      uniqueVolumeName({
        caps,
        handle,
        shared: attachable || deviceMountable,
        uid,
        innerVolumeSpecName,
      }),
    ),
  );
  const accessModes = pv?.spec.accessModes ?? noAccessModes;
  const traits = volumeTraits({
    pluginName,
    attachable,
    deviceMountable,
    requiresRemount: caps.requiresRemount,
    multiAttachAllowed:
      accessModes.length > 0 &&
      !accessModes.includes('ReadWriteOnce') &&
      !accessModes.includes('ReadWriteOncePod'),
    volumeMode: pv?.spec.volumeMode ?? 'Filesystem',
    sizeBytes: parseQuantityBytes(pv?.spec.capacity?.storage) ?? 0,
    claimSizeBytes: claimSizeBytes ?? 0,
    volumeGidValue: pv?.metadata.annotations?.[volumeGidAnnotation] ?? '',
    readOnly: o.readOnly,
    accessModes,
  });
  return {
    outerVolumeSpecName: o.outerVolumeSpecName,
    innerVolumeSpecName,
    volume,
    traits,
    source,
    // Written for every volume (undefined without a claim): one shape for all, all its
    // fields in the object (a spread put the last ones in a separate property array).
    claim: pvc?.metadata.name,
    claimNamespace: pvc === undefined ? undefined : namespace,
  };
}

/** The plugin name of every CSI driver's volumes, as in Kubernetes. */
export const csiPluginName = 'kubernetes.io/csi';

/**
 * behaviour K1.1: node-wide name for attachable or device-mountable volumes, per pod otherwise.
 * A CSI driver's volumes are `kubernetes.io/csi/<driver>^<volumeHandle>` (per pod:
 * `kubernetes.io/csi/<podUID>-<name>`), as Kubernetes names them.
 */
function uniqueVolumeName(v: {
  caps: PluginCaps;
  handle: string;
  shared: boolean;
  uid: string;
  innerVolumeSpecName: string;
}): string {
  if (v.caps.csi !== undefined) {
    return v.shared
      ? `${csiPluginName}/${v.caps.name}^${v.handle}`
      : `${csiPluginName}/${v.uid}-${v.innerVolumeSpecName}`;
  }
  return v.shared
    ? `${v.caps.name}/${v.handle}`
    : `${v.caps.name}/${v.uid}-${v.innerVolumeSpecName}`;
}

const noAccessModes: readonly string[] = Object.freeze([]);

function noPlugin(volumeName: string): string {
  return `failed to get Plugin from volumeSpec for volume "${volumeName}" err=no volume plugin matched`;
}

/**
 * behaviour K2.6: a Block PV must be used through volumeDevices and a Filesystem one through
 * volumeMounts (checked only for pods that list containers).
 */
function volumeModeMismatch(pod: Pod, v: ResolvedVolume): string | undefined {
  const containers = containersOf(pod);
  if (containers.length === 0) return undefined;
  const asDevice = containers.some((c) =>
    (c.volumeDevices ?? []).some((d) => d.name === v.outerVolumeSpecName),
  );
  const asMount = containers.some((c) =>
    (c.volumeMounts ?? []).some((m) => m.name === v.outerVolumeSpecName),
  );
  if (v.traits.volumeMode === 'Block' && asMount)
    return `volume ${v.outerVolumeSpecName} has volumeMode Block, but is specified in volumeMounts; use volumeDevices`;
  if (v.traits.volumeMode === 'Filesystem' && asDevice)
    return `volume ${v.outerVolumeSpecName} has volumeMode Filesystem, but is specified in volumeDevices; use volumeMounts`;
  return undefined;
}

/** The last pod volume of that name (a duplicated name resolves with its last definition). */
function lastNamed(volumes: readonly PodVolume[], name: string): PodVolume | undefined {
  for (let i = volumes.length - 1; i >= 0; i--) if (volumes[i]!.name === name) return volumes[i];
  return undefined;
}

/** Resolves every expected volume of a pod; never throws for what Kubernetes would accept. */
export function resolvePod(pod: Pod, input: ResolveInput): PodResolution {
  const expectedVolumes = expectedVolumeNames(pod);
  const podVolumes = pod.spec.volumes ?? [];
  const volumes: ResolvedVolume[] = [];
  let errors: Map<string, string> | undefined; // made on the first error: most pods have none
  const references: string[] = [];
  // Pods have a handful of volumes: linear lookups beat building a Map and a Set per pod.
  for (let i = 0; i < expectedVolumes.length; i++) {
    const name = expectedVolumes[i]!;
    const v = lastNamed(podVolumes, name);
    if (v === undefined) continue;
    if (expectedVolumes.indexOf(name) < i) {
      (errors ??= new Map()).set(
        name,
        `pod volume name "${name}" is used twice in pod.spec.volumes; names must be unique`,
      );
      continue;
    }
    const step = resolveOne(pod, v, input, references);
    const mismatch = step.ok ? volumeModeMismatch(pod, step.value) : undefined;
    if (step.ok && mismatch === undefined) volumes.push(step.value);
    else (errors ??= new Map()).set(name, step.ok ? mismatch! : step.error);
  }
  return {
    expectedVolumes,
    // Copies of exactly their length: an array grown by push keeps room for 16 more.
    volumes: volumes.slice(),
    // Most pods resolve cleanly: they share one empty map (a Map costs ~200 bytes a pod).
    errors: errors ?? noErrors,
    references: references.slice(),
  };
}

const noErrors: ReadonlyMap<string, string> = new Map();
