/**
 * The Kubernetes object shapes vole reads (Pod, PersistentVolume, PersistentVolumeClaim,
 * Node). Only the fields vole uses are typed; every other field is kept as given, because
 * events store the object as the source reported it.
 */
import { z } from 'zod';

const name = z.string().min(1).max(253);

export const objectMeta = z.looseObject({
  name,
  namespace: z.string().min(1).max(63).optional(),
  uid: z.string().min(1).max(253).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
  labels: z.record(z.string(), z.string()).optional(),
  deletionTimestamp: z.string().optional(),
  finalizers: z.array(z.string().min(1).max(253)).max(64).optional(),
});

const csiSource = z.looseObject({
  driver: z.string().min(1),
  volumeHandle: z.string().min(1).optional(),
  fsType: z.string().optional(),
  readOnly: z.boolean().optional(),
  volumeAttributes: z.record(z.string(), z.string()).optional(),
});

/** `items` of a configMap or secret volume: which keys, to which paths, with which mode. */
const keyItems = z.array(
  z.looseObject({ key: z.string(), path: z.string(), mode: z.number().int().optional() }),
);

/** `items` of a downwardAPI volume: a field of the pod, or a container's resources. */
const downwardItems = z.array(
  z.looseObject({
    path: z.string(),
    fieldRef: z
      .looseObject({ fieldPath: z.string(), apiVersion: z.string().optional() })
      .optional(),
    resourceFieldRef: z
      .looseObject({
        resource: z.string(),
        containerName: z.string().optional(),
        divisor: z.union([z.string(), z.number()]).optional(),
      })
      .optional(),
    mode: z.number().int().optional(),
  }),
);

const projectedSource = z.looseObject({
  configMap: z
    .looseObject({
      name: z.string().optional(),
      items: keyItems.optional(),
      optional: z.boolean().optional(),
    })
    .optional(),
  secret: z
    .looseObject({
      name: z.string().optional(),
      items: keyItems.optional(),
      optional: z.boolean().optional(),
    })
    .optional(),
  downwardAPI: z.looseObject({ items: downwardItems.optional() }).optional(),
  serviceAccountToken: z
    .looseObject({ path: z.string(), audience: z.string().optional() })
    .optional(),
});

export const podVolume = z.looseObject({
  name,
  persistentVolumeClaim: z
    .looseObject({ claimName: name, readOnly: z.boolean().optional() })
    .optional(),
  csi: csiSource.optional(),
  emptyDir: z
    .looseObject({
      medium: z.string().optional(),
      sizeLimit: z.union([z.string(), z.number()]).optional(),
      /** The directory's permission bits (alpha, feature gate EmptyDirVolumeMode). */
      mode: z.number().int().optional(),
    })
    .optional(),
  hostPath: z.looseObject({ path: z.string().min(1), type: z.string().optional() }).optional(),
  configMap: z
    .looseObject({
      name: z.string().optional(),
      items: keyItems.optional(),
      defaultMode: z.number().int().optional(),
      optional: z.boolean().optional(),
    })
    .optional(),
  secret: z
    .looseObject({
      secretName: z.string().optional(),
      items: keyItems.optional(),
      defaultMode: z.number().int().optional(),
      optional: z.boolean().optional(),
    })
    .optional(),
  downwardAPI: z
    .looseObject({ items: downwardItems.optional(), defaultMode: z.number().int().optional() })
    .optional(),
  projected: z
    .looseObject({
      sources: z.array(projectedSource).optional(),
      defaultMode: z.number().int().optional(),
    })
    .optional(),
});
export type PodVolume = z.infer<typeof podVolume>;

/** A resource list (`cpu: 500m`, `memory: 64Mi`): quantities by resource name. */
const resourceList = z.record(z.string(), z.union([z.string(), z.number()]));

const resourceRequirements = z.looseObject({
  limits: resourceList.optional(),
  requests: resourceList.optional(),
});

const container = z.looseObject({
  name: z.string().optional(),
  resources: resourceRequirements.optional(),
  /** An init container with `Always` is a sidecar: it runs beside the app containers. */
  restartPolicy: z.string().optional(),
  securityContext: z.looseObject({ runAsUser: z.number().int().optional() }).optional(),
  volumeMounts: z.array(z.looseObject({ name, mountPath: z.string().optional() })).optional(),
  volumeDevices: z.array(z.looseObject({ name, devicePath: z.string().optional() })).optional(),
});

export const pod = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.literal('Pod').optional(),
  metadata: objectMeta,
  spec: z.looseObject({
    nodeName: z.string().optional(),
    serviceAccountName: z.string().optional(),
    volumes: z.array(podVolume).optional(),
    containers: z.array(container).optional(),
    initContainers: z.array(container).optional(),
    ephemeralContainers: z.array(container).optional(),
    /** Pod-level resources (PodLevelResources): a pod limit that wins over the containers'. */
    resources: resourceRequirements.optional(),
    /** The RuntimeClass's overhead, added to the pod's non-zero limits. */
    overhead: resourceList.optional(),
    securityContext: z
      .looseObject({
        supplementalGroups: z.array(z.number().int()).optional(),
        fsGroup: z.number().int().optional(),
        runAsUser: z.number().int().optional(),
      })
      .optional(),
  }),
  status: z.looseObject({ phase: z.string().optional() }).optional(),
});
export type Pod = z.infer<typeof pod>;

const quantity = z.union([z.string(), z.number()]);

/** core/v1 NodeSelector: terms ORed, each term's expressions ANDed. */
const nodeSelectorRequirement = z.looseObject({
  key: z.string(),
  operator: z.string(),
  values: z.array(z.string()).optional(),
});
export const nodeSelector = z.looseObject({
  nodeSelectorTerms: z.array(
    z.looseObject({ matchExpressions: z.array(nodeSelectorRequirement).optional() }),
  ),
});
export type NodeSelector = z.infer<typeof nodeSelector>;

/**
 * storage.k8s.io/v1 StorageClass. `provisioner` is required (the API server refuses a class
 * without one); the defaults the API server fills in (reclaimPolicy Delete,
 * volumeBindingMode Immediate) are applied where the class is read (storage-class.ts).
 */
export const storageClass = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.literal('StorageClass'),
  metadata: objectMeta,
  provisioner: z.string().min(1),
  parameters: z.record(z.string(), z.string()).optional(),
  reclaimPolicy: z.enum(['Retain', 'Delete']).optional(),
  volumeBindingMode: z.enum(['Immediate', 'WaitForFirstConsumer']).optional(),
  allowVolumeExpansion: z.boolean().optional(),
  mountOptions: z.array(z.string()).optional(),
  allowedTopologies: z
    .array(
      z.looseObject({
        matchLabelExpressions: z
          .array(z.looseObject({ key: z.string(), values: z.array(z.string()) }))
          .optional(),
      }),
    )
    .optional(),
});
export type StorageClass = z.infer<typeof storageClass>;

export const persistentVolume = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.literal('PersistentVolume'),
  metadata: objectMeta,
  spec: z.looseObject({
    accessModes: z.array(z.string()).optional(),
    capacity: z.looseObject({ storage: quantity.optional() }).optional(),
    volumeMode: z.enum(['Filesystem', 'Block']).optional(),
    csi: csiSource.optional(),
    local: z.looseObject({ path: z.string().min(1), fsType: z.string().optional() }).optional(),
    hostPath: z.looseObject({ path: z.string().min(1), type: z.string().optional() }).optional(),
    claimRef: z
      .looseObject({ name: z.string().optional(), namespace: z.string().optional() })
      .optional(),
    mountOptions: z.array(z.string()).optional(),
    storageClassName: z.string().optional(),
    persistentVolumeReclaimPolicy: z.enum(['Retain', 'Delete', 'Recycle']).optional(),
    nodeAffinity: z.looseObject({ required: nodeSelector.optional() }).optional(),
  }),
  status: z.looseObject({ phase: z.string().optional() }).optional(),
});
export type PersistentVolume = z.infer<typeof persistentVolume>;

/** metav1.LabelSelector: matchLabels and matchExpressions, ANDed. */
export const labelSelector = z.looseObject({
  matchLabels: z.record(z.string(), z.string()).optional(),
  matchExpressions: z
    .array(
      z.looseObject({
        key: z.string(),
        operator: z.string(),
        values: z.array(z.string()).optional(),
      }),
    )
    .optional(),
});
export type LabelSelector = z.infer<typeof labelSelector>;

export const persistentVolumeClaim = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.literal('PersistentVolumeClaim'),
  metadata: objectMeta,
  spec: z.looseObject({
    volumeName: z.string().optional(),
    accessModes: z.array(z.string()).optional(),
    volumeMode: z.enum(['Filesystem', 'Block']).optional(),
    storageClassName: z.string().optional(),
    resources: z
      .looseObject({
        requests: z.looseObject({ storage: quantity.optional() }).optional(),
      })
      .optional(),
    selector: labelSelector.optional(),
  }),
  status: z
    .looseObject({
      phase: z.string().optional(),
      capacity: z.looseObject({ storage: quantity.optional() }).optional(),
    })
    .optional(),
});
export type PersistentVolumeClaim = z.infer<typeof persistentVolumeClaim>;

export const node = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.literal('Node'),
  metadata: objectMeta,
  spec: z
    .looseObject({
      taints: z
        .array(
          z.looseObject({
            key: z.string(),
            effect: z.string().optional(),
            value: z.string().optional(),
          }),
        )
        .optional(),
    })
    .optional(),
  status: z
    .looseObject({
      conditions: z.array(z.looseObject({ type: z.string(), status: z.string() })).optional(),
      volumesInUse: z.array(z.string()).optional(),
      volumesAttached: z
        .array(z.looseObject({ name: z.string(), devicePath: z.string().optional() }))
        .optional(),
    })
    .optional(),
});
export type Node = z.infer<typeof node>;

/**
 * storage.k8s.io/v1 CSIDriver: how the kubelet and the attach/detach controller treat the
 * driver's volumes (attachRequired defaults to true, as when no object exists).
 */
export const csiDriver = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.literal('CSIDriver'),
  metadata: objectMeta,
  spec: z
    .looseObject({
      attachRequired: z.boolean().optional(),
      podInfoOnMount: z.boolean().optional(),
      fsGroupPolicy: z.string().optional(),
      requiresRepublish: z.boolean().optional(),
      volumeLifecycleModes: z.array(z.string()).optional(),
    })
    .optional(),
});
export type CSIDriver = z.infer<typeof csiDriver>;

/** storage.k8s.io/v1 VolumeAttachment: the attach/detach controller's ask, the attacher's reply. */
export const volumeAttachment = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.literal('VolumeAttachment'),
  metadata: objectMeta,
  spec: z.looseObject({
    attacher: z.string().min(1),
    nodeName: z.string().min(1),
    source: z.looseObject({ persistentVolumeName: z.string().optional() }),
  }),
  status: z
    .looseObject({
      attached: z.boolean().optional(),
      attachmentMetadata: z.record(z.string(), z.string()).optional(),
    })
    .optional(),
});
export type VolumeAttachment = z.infer<typeof volumeAttachment>;

/**
 * storage.k8s.io/v1 CSINode: the CSI drivers registered on a node, each with its node ID and
 * allocatable volume count (what the scheduler and the attach limits read). A recorded log
 * keeps it in CSINodeObserved; no core folds it, so it is no cluster object here.
 */
export const csiNode = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.literal('CSINode'),
  metadata: objectMeta,
  spec: z
    .looseObject({
      drivers: z
        .array(
          z.looseObject({
            name: z.string().min(1),
            nodeID: z.string().optional(),
            allocatable: z.looseObject({ count: z.number().int().optional() }).optional(),
            topologyKeys: z.array(z.string()).nullish(),
          }),
        )
        .nullish(),
    })
    .optional(),
});
export type CSINode = z.infer<typeof csiNode>;

/**
 * A ConfigMap or Secret as the log holds it: its identity and a hash of its content, never
 * the content (docs/design.md "Secrets stay out of the log"). A data field here is refused.
 */
const contentObject = <K extends 'ConfigMap' | 'Secret'>(kind: K) =>
  z.looseObject({
    apiVersion: z.string().optional(),
    kind: z.literal(kind),
    metadata: objectMeta,
    /** `sha256:<hex>` of the keys and values (see sources/contents.ts). */
    contentHash: z.string().min(1),
    data: z.never().optional(),
    binaryData: z.never().optional(),
    stringData: z.never().optional(),
  });
export const configMapRecord = contentObject('ConfigMap');
export const secretRecord = contentObject('Secret');
export type ContentObjectRecord = z.infer<typeof configMapRecord> | z.infer<typeof secretRecord>;

/** A ConfigMap or Secret as a manifest or a library call gives it (data included). */
export const configMapManifest = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.literal('ConfigMap'),
  metadata: objectMeta,
  data: z.record(z.string(), z.string()).optional(),
  binaryData: z.record(z.string(), z.string()).optional(),
});
export const secretManifest = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.literal('Secret'),
  metadata: objectMeta,
  type: z.string().optional(),
  data: z.record(z.string(), z.string()).optional(),
  stringData: z.record(z.string(), z.string()).optional(),
});
export type ConfigMapManifest = z.infer<typeof configMapManifest>;
export type SecretManifest = z.infer<typeof secretManifest>;

export const clusterObject = z.discriminatedUnion('kind', [
  persistentVolume,
  persistentVolumeClaim,
  storageClass,
  node,
  configMapRecord,
  secretRecord,
  csiDriver,
  volumeAttachment,
]);
export type ClusterObject = z.infer<typeof clusterObject>;
export type ObjectKind = ClusterObject['kind'];

/** What sources read: cluster objects, with ConfigMaps and Secrets holding their data. */
export const manifestObject = z.discriminatedUnion('kind', [
  persistentVolume,
  persistentVolumeClaim,
  storageClass,
  node,
  configMapManifest,
  secretManifest,
  csiDriver,
  volumeAttachment,
]);
export type ManifestObject = z.infer<typeof manifestObject>;

/** Kinds whose objects live in a namespace (their keys name it). */
const namespacedKinds: ReadonlySet<string> = new Set([
  'PersistentVolumeClaim',
  'ConfigMap',
  'Secret',
]);

/** `PersistentVolume//pv-1`, `PersistentVolumeClaim/default/claim-1`: the object index key. */
/** Does an object of this kind live in a namespace? */
export function isNamespacedKind(kind: string): boolean {
  return namespacedKinds.has(kind);
}

export function objectKey(kind: string, name: string, namespace?: string): string {
  return `${kind}/${namespacedKinds.has(kind) ? (namespace ?? 'default') : ''}/${name}`;
}

const quantitySuffixes: Record<string, number> = {
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
};

/** A Kubernetes quantity (`64Mi`, `1G`, `1024`) in bytes; undefined when malformed. */
export function parseQuantityBytes(value: string | number | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value : undefined;
  const match = /^([0-9]+(?:\.[0-9]+)?)([kMGTP]i?|Ki)?$/.exec(value.trim());
  if (match === null) return undefined;
  const factor = quantitySuffixes[match[2] ?? ''];
  if (factor === undefined) return undefined;
  return Math.round(Number(match[1]) * factor);
}
