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
  deletionTimestamp: z.string().optional(),
});

const csiSource = z.looseObject({
  driver: z.string().min(1),
  volumeHandle: z.string().min(1).optional(),
  fsType: z.string().optional(),
  readOnly: z.boolean().optional(),
  volumeAttributes: z.record(z.string(), z.string()).optional(),
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
    })
    .optional(),
  hostPath: z.looseObject({ path: z.string().min(1), type: z.string().optional() }).optional(),
  configMap: z.looseObject({ name: z.string().optional() }).optional(),
  secret: z.looseObject({ secretName: z.string().optional() }).optional(),
});
export type PodVolume = z.infer<typeof podVolume>;

const container = z.looseObject({
  name: z.string().optional(),
  volumeMounts: z.array(z.looseObject({ name, mountPath: z.string().optional() })).optional(),
  volumeDevices: z.array(z.looseObject({ name, devicePath: z.string().optional() })).optional(),
});

export const pod = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.literal('Pod').optional(),
  metadata: objectMeta,
  spec: z.looseObject({
    nodeName: z.string().optional(),
    volumes: z.array(podVolume).optional(),
    containers: z.array(container).optional(),
    initContainers: z.array(container).optional(),
    securityContext: z
      .looseObject({
        supplementalGroups: z.array(z.number().int()).optional(),
        fsGroup: z.number().int().optional(),
      })
      .optional(),
  }),
  status: z.looseObject({ phase: z.string().optional() }).optional(),
});
export type Pod = z.infer<typeof pod>;

const quantity = z.union([z.string(), z.number()]);

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
  }),
});
export type PersistentVolume = z.infer<typeof persistentVolume>;

export const persistentVolumeClaim = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z.literal('PersistentVolumeClaim'),
  metadata: objectMeta,
  spec: z.looseObject({
    volumeName: z.string().optional(),
    accessModes: z.array(z.string()).optional(),
    volumeMode: z.enum(['Filesystem', 'Block']).optional(),
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

export const clusterObject = z.discriminatedUnion('kind', [
  persistentVolume,
  persistentVolumeClaim,
  node,
]);
export type ClusterObject = z.infer<typeof clusterObject>;
export type ObjectKind = ClusterObject['kind'];

/** `PersistentVolume//pv-1`, `PersistentVolumeClaim/default/claim-1`: the object index key. */
export function objectKey(kind: string, name: string, namespace?: string): string {
  return `${kind}/${kind === 'PersistentVolumeClaim' ? (namespace ?? 'default') : ''}/${name}`;
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
