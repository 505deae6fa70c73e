/**
 * What the controller keeps of a Pod in its record, to resolve it again when an object it
 * read changes, and for its readers (`vole why`, the node status, the informer's keys):
 * its name, namespace and uid; its node, service account, volumes, and the names each
 * container mounts or uses as a device (which volumes it expects, spec §2.6); its phase.
 * A pod from the API server carries much more (labels, annotations, managed fields,
 * container images, commands, environment, probes, status conditions) that none of them
 * reads, kept 150,000 times over.
 *
 * What it drops changes no attachable volume and no reference of the pod's resolution:
 * labels and annotations feed only downward API files, which the controller does not
 * handle (resolveControllerPod in test/controller/pod-record.unit.test.ts checks it).
 */
import type { Pod } from '../events/k8s.js';

type Container = NonNullable<Pod['spec']['containers']>[number];

/** The pod cut to what the controller reads, as compact objects (see above). */
export function controllerPodOf(pod: Pod): Pod {
  const { name, namespace, uid } = pod.metadata;
  const { nodeName, serviceAccountName, volumes, containers, initContainers } = pod.spec;
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
