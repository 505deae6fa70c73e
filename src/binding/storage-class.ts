/**
 * StorageClasses as the API server and the CSI external-provisioner read them: the
 * defaults the API server fills in, the default class the DefaultStorageClass admission
 * gives a claim without `storageClassName`, the class parameters with the provisioner's
 * own `csi.storage.k8s.io/` keys taken out, and topology as segments and node affinity.
 * Pure: answers from the objects and plugin capabilities the log recorded.
 */
import type { PluginCaps } from '../events/index.js';
import type {
  ClusterObject,
  NodeSelector,
  PersistentVolume,
  PersistentVolumeClaim,
  StorageClass,
} from '../events/k8s.js';

/** What the world keeps objects in (ClusterObjects has `lookup` and `ofKind`). */
export interface ObjectLookup {
  lookup(kind: string, name: string, namespace?: string): ClusterObject | undefined;
  ofKind(kind: string): IterableIterator<ClusterObject>;
}

const defaultClassAnnotation = 'storageclass.kubernetes.io/is-default-class';
const betaDefaultClassAnnotation = 'storageclass.beta.kubernetes.io/is-default-class';
/** The annotation a provisioned PV carries (the PV controller's AnnDynamicallyProvisioned). */
export const provisionedByAnnotation = 'pv.kubernetes.io/provisioned-by';

export function storageClassOf(objects: ObjectLookup, name: string): StorageClass | undefined {
  const object = objects.lookup('StorageClass', name);
  return object?.kind === 'StorageClass' ? object : undefined;
}

export function isDefaultClass(sc: StorageClass): boolean {
  const annotations = sc.metadata.annotations ?? {};
  return (
    annotations[defaultClassAnnotation] === 'true' ||
    annotations[betaDefaultClassAnnotation] === 'true'
  );
}

/**
 * GetDefaultClass: the class annotated as default; of several, the newest
 * (creationTimestamp), ties broken by name, as Kubernetes since 1.26 does.
 */
function defaultClassName(objects: ObjectLookup): string | undefined {
  let best: StorageClass | undefined;
  for (const object of objects.ofKind('StorageClass')) {
    if (object.kind !== 'StorageClass' || !isDefaultClass(object)) continue;
    if (best === undefined || newer(object, best)) best = object;
  }
  return best?.metadata.name;
}

function newer(a: StorageClass, b: StorageClass): boolean {
  const ta = String(a.metadata['creationTimestamp'] ?? '');
  const tb = String(b.metadata['creationTimestamp'] ?? '');
  if (ta !== tb) return ta > tb;
  return a.metadata.name < b.metadata.name;
}

/**
 * The class a claim asks for: its `storageClassName` when the key is there (`""`: no class,
 * only classless static PVs), else the default class (DefaultStorageClass admission, and
 * the PV controller's retroactive assignment to unbound claims), else none.
 */
export function claimClassName(pvc: PersistentVolumeClaim, objects: ObjectLookup): string {
  if (pvc.spec.storageClassName !== undefined) return pvc.spec.storageClassName;
  const legacy = pvc.metadata.annotations?.['volume.beta.kubernetes.io/storage-class'];
  if (legacy !== undefined) return legacy;
  return defaultClassName(objects) ?? '';
}

/** The API server's defaults. */
export function reclaimPolicyOf(sc: StorageClass): 'Retain' | 'Delete' {
  return sc.reclaimPolicy ?? 'Delete';
}

export function bindingModeOf(sc: StorageClass): 'Immediate' | 'WaitForFirstConsumer' {
  return sc.volumeBindingMode ?? 'Immediate';
}

/**
 * volumeBindingMode WaitForFirstConsumer (pv_controller.go shouldDelayBinding): a claim of
 * the class is bound or provisioned only once a pod uses it, for that pod's node.
 */
export function waitsForFirstConsumer(sc: StorageClass): boolean {
  return bindingModeOf(sc) === 'WaitForFirstConsumer';
}

/** The external-provisioner's prefix for its own parameters. */
const csiParameterPrefix = 'csi.storage.k8s.io/';

/** The reserved keys it knows (fstype, and the secrets' names and namespaces). */
const reservedKeys: ReadonlySet<string> = new Set(
  [
    'fstype',
    ...[
      'provisioner',
      'controller-publish',
      'node-stage',
      'node-publish',
      'controller-expand',
      'node-expand',
    ].flatMap((s) => [`${s}-secret-name`, `${s}-secret-namespace`]),
  ].map((k) => `${csiParameterPrefix}${k}`),
);

export type ClassParameters =
  | { readonly ok: true; readonly parameters: Record<string, string>; readonly fsType: string }
  | { readonly ok: false; readonly error: string };

/**
 * The class's parameters as CreateVolume gets them: the reserved keys taken out (fstype is
 * used for the PV), any other key in the reserved prefix an error naming it.
 */
export function classParameters(sc: StorageClass): ClassParameters {
  const parameters: Record<string, string> = {};
  let fsType = '';
  for (const [key, value] of Object.entries(sc.parameters ?? {}).sort(([a], [b]) =>
    a < b ? -1 : a > b ? 1 : 0,
  )) {
    if (!key.startsWith(csiParameterPrefix)) {
      parameters[key] = value;
      continue;
    }
    if (!reservedKeys.has(key))
      return {
        ok: false,
        error:
          `StorageClass "${sc.metadata.name}": parameter "${key}" is in the provisioner's ` +
          `reserved prefix ${csiParameterPrefix} but is no key it knows; remove or rename it`,
      };
    if (key === `${csiParameterPrefix}fstype`) fsType = value;
  }
  return { ok: true, parameters, fsType };
}

/**
 * A node's topology for a driver, as another node's provisioner reads it: the Node's labels
 * under the keys of the driver's accessible topology (the external-provisioner reads the keys
 * CSINode lists from the Node's labels). No keys or no labels: no topology.
 */
export function nodeLabelTopology(
  plugins: ReadonlyMap<string, PluginCaps>,
  driver: string,
  labels: Readonly<Record<string, string>>,
): Record<string, string> {
  const topology: Record<string, string> = {};
  for (const k of Object.keys(nodeTopology(plugins, driver)))
    if (labels[k] !== undefined) topology[k] = labels[k];
  return topology;
}

/** NodeGetInfo's accessible_topology of a CSI driver on this node ({} when none). */
export function nodeTopology(plugins: ReadonlyMap<string, PluginCaps>, driver: string) {
  return plugins.get(driver)?.csi?.accessibleTopology ?? {};
}

/** The class's allowedTopologies as segments: one per combination of the terms' values. */
function allowedSegments(sc: StorageClass): Record<string, string>[] {
  const segments: Record<string, string>[] = [];
  for (const term of sc.allowedTopologies ?? []) {
    let combos: Record<string, string>[] = [{}];
    for (const e of term.matchLabelExpressions ?? [])
      combos = combos.flatMap((c) => e.values.map((v) => ({ ...c, [e.key]: v })));
    segments.push(...combos.filter((c) => Object.keys(c).length > 0));
  }
  return segments;
}

function segmentAllowed(segment: Record<string, string>, allowed: Record<string, string>[]) {
  return allowed.some((a) => Object.entries(a).every(([k, v]) => segment[k] === v));
}

export type Requisite =
  | { readonly ok: true; readonly requisite: Record<string, string>[] }
  | { readonly ok: false; readonly error: string };

/**
 * accessibility_requirements (external-provisioner GenerateAccessibilityRequirements):
 * WaitForFirstConsumer asks for the selected node's topology, which must be allowed;
 * Immediate for the class's allowedTopologies, else the topology of the nodes that run
 * the driver (here: this node). No topology at all: no requirement.
 */
export function requisiteOf(
  sc: StorageClass,
  node: { readonly name: string; readonly topology: Record<string, string> },
  selected: boolean,
): Requisite {
  const allowed = allowedSegments(sc);
  const own = Object.keys(node.topology).length === 0 ? [] : [node.topology];
  if (!selected) return { ok: true, requisite: allowed.length > 0 ? allowed : own };
  if (allowed.length > 0 && own.length > 0 && !segmentAllowed(node.topology, allowed))
    return {
      ok: false,
      error:
        `the selected node ${node.name}'s topology ${JSON.stringify(node.topology)} is not in ` +
        `StorageClass "${sc.metadata.name}" allowedTopologies`,
    };
  return { ok: true, requisite: own };
}

/** The PV's node affinity from the created volume's accessible topology (one term each). */
export function nodeAffinityOf(topology: readonly Record<string, string>[]): NodeSelector {
  return {
    nodeSelectorTerms: topology.map((segment) => ({
      matchExpressions: Object.entries(segment)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([key, value]) => ({ key, operator: 'In', values: [value] })),
    })),
  };
}

/**
 * CheckNodeAffinity: why the PV's required node affinity excludes a node with these
 * labels, or undefined when it allows it (no affinity allows every node).
 */
export function nodeAffinityMismatch(
  pv: PersistentVolume,
  labels: Readonly<Record<string, string>>,
): string | undefined {
  const terms = pv.spec.nodeAffinity?.required?.nodeSelectorTerms;
  if (terms === undefined || terms.length === 0) return undefined;
  for (const term of terms) {
    const fits = (term.matchExpressions ?? []).every((e) => {
      const has = Object.hasOwn(labels, e.key);
      const values = e.values ?? [];
      if (e.operator === 'In') return has && values.includes(labels[e.key]!);
      if (e.operator === 'NotIn') return !has || !values.includes(labels[e.key]!);
      if (e.operator === 'Exists') return has;
      if (e.operator === 'DoesNotExist') return !has;
      return false;
    });
    if (fits) return undefined;
  }
  const wanted = terms
    .map((t) =>
      (t.matchExpressions ?? [])
        .map((e) => `${e.key} ${e.operator} [${(e.values ?? []).join(',')}]`)
        .join(' and '),
    )
    .join(' or ');
  return `its node affinity (${wanted}) excludes this node`;
}
