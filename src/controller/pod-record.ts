/**
 * What the controller keeps of a Pod in its record, to resolve it again when an object it
 * read changes, and for its readers (`vole why`, the node status, the informer's keys):
 * its name, namespace and uid; its node, service account, volumes, and the names each
 * container mounts or uses as a device (which volumes it expects, behaviour C2.6); its phase.
 * A pod from the API server carries much more (labels, annotations, managed fields,
 * container images, commands, environment, probes, status conditions) that none of them
 * reads, kept 150,000 times over.
 *
 * What it drops changes no attachable volume and no reference of the pod's resolution:
 * labels and annotations feed only downward API files, which the controller does not
 * handle (resolveControllerPod in test/controller/pod-record.unit.test.ts checks it).
 */
import type { ClusterObjects } from '../desired/objects.js';
import type { Pod } from '../events/k8s.js';
import { sharedValue } from './shared-values.js';

type Container = NonNullable<Pod['spec']['containers']>[number];

/**
 * The pod cut to what the controller reads, as compact objects (see above); with `objects`,
 * its claim names are the known claims' own strings and its volumes of no claim shared
 * (volumesAsKept).
 */
export function controllerPodOf(pod: Pod, objects?: Pick<ClusterObjects, 'lookup'>): Pod {
  const { name, namespace, uid } = pod.metadata;
  const { nodeName, serviceAccountName, containers, initContainers } = pod.spec;
  const volumes =
    objects === undefined
      ? pod.spec.volumes
      : volumesAsKept(pod.spec.volumes, namespace ?? 'default', objects);
  // Built field by field (no JSON round trip on the fold's path): absent fields stay absent.
  // A literal of its exact fields where it can: a spread or an object filled a field at a
  // time keeps room for more, or its fields in a separate array (the metadata 80 → 48 bytes).
  const metadata =
    namespace !== undefined && uid !== undefined
      ? { name, namespace, uid }
      : { name, ...definedOnly({ namespace, uid }) };
  const spec =
    serviceAccountName === undefined && containers === undefined && initContainers === undefined
      ? definedOnly({ nodeName, volumes })
      : definedOnly({
          nodeName,
          serviceAccountName,
          volumes,
          containers: containers?.map(volumeUsesOf),
          initContainers: initContainers?.map(volumeUsesOf),
        });
  if (pod.status === undefined) return { metadata, spec };
  return { metadata, spec, status: definedOnly({ phase: pod.status.phase }) };
}

/**
 * The pod's volumes as the record keeps them:
 * - each claim name the claim's own string, where the claim is known (in `objects`): the
 *   pod and the claim are parsed apart, so each kept its own copy of every claim name (32
 *   bytes a pod for a 13-character name, 56 for a claim named after a StatefulSet's pod).
 *   Strings cannot be told apart by identity, so a volume of a known claim is always
 *   rebuilt, as a literal of its exact fields (a spread of a parsed object here took more
 *   than the string saved);
 * - a volume of no claim (an emptyDir, a ConfigMap, a Secret: every replica of a workload
 *   declares them alike) the one shared object of that volume (shared-values.ts);
 * - any other volume kept as it is. Equal values; `volumes` itself when there are none.
 */
function volumesAsKept(
  volumes: Pod['spec']['volumes'],
  namespace: string,
  objects: Pick<ClusterObjects, 'lookup'>,
): Pod['spec']['volumes'] {
  if (volumes === undefined || volumes.length === 0) return volumes;
  return volumes.map((v) => {
    const pvc = v.persistentVolumeClaim;
    if (pvc === undefined) return sharedValue(v);
    const claim = objects.lookup('PersistentVolumeClaim', pvc.claimName, namespace);
    const claimName = claim?.metadata.name;
    if (claimName === undefined || Object.keys(v).length !== 2) return v;
    const { readOnly } = pvc;
    if (Object.keys(pvc).length !== (readOnly === undefined ? 1 : 2)) return v;
    const persistentVolumeClaim = readOnly === undefined ? { claimName } : { claimName, readOnly };
    return { name: v.name, persistentVolumeClaim };
  });
}

type Volume = NonNullable<Pod['spec']['volumes']>[number];

/** A container's volume mounts and devices, by name only. */
function volumeUsesOf(c: Container): Container {
  return definedOnly({
    volumeMounts: c.volumeMounts?.map((m) => ({ name: m.name })),
    volumeDevices: c.volumeDevices?.map((d) => ({ name: d.name })),
  });
}

/**
 * The record without its undefined fields: `record` itself when none is (a literal holds its
 * fields in itself, exactly as many), else a copy filled a field at a time.
 */
function definedOnly<T extends object>(record: T): T {
  const keys = Object.keys(record) as (keyof T)[];
  if (keys.every((key) => record[key] !== undefined)) return record;
  const out: Partial<T> = {};
  for (const key of keys) if (record[key] !== undefined) out[key] = record[key];
  return out as T;
}
