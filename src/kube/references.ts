/**
 * The ConfigMaps and Secrets a pod's volumes read (configMap, secret, projected sources),
 * which the node agent watches one by one, as the kubelet's watch-based managers do.
 */
import type { Pod } from '../events/k8s.js';
import type { NamedRef } from './named-gets.js';

export interface ContentRef {
  readonly kind: 'ConfigMap' | 'Secret';
  readonly namespace: string;
  readonly name: string;
}

export const contentRefKey = (ref: ContentRef) => `${ref.kind}/${ref.namespace}/${ref.name}`;

/** Every ConfigMap and Secret the pod's volumes name (unique, in order of appearance). */
export function contentRefsOf(pod: Pod): ContentRef[] {
  const namespace = pod.metadata.namespace ?? 'default';
  const refs = new Map<string, ContentRef>();
  const add = (kind: ContentRef['kind'], name: string | undefined) => {
    if (name === undefined || name === '') return;
    const ref = { kind, namespace, name };
    refs.set(contentRefKey(ref), ref);
  };
  for (const volume of pod.spec.volumes ?? []) {
    add('ConfigMap', volume.configMap?.name);
    add('Secret', volume.secret?.secretName);
    for (const source of volume.projected?.sources ?? []) {
      add('ConfigMap', source.configMap?.name);
      add('Secret', source.secret?.name);
    }
  }
  return [...refs.values()];
}

/**
 * The claims the pod's volumes read, in its namespace: each persistentVolumeClaim, and
 * the claim of each generic ephemeral volume (named `<pod>-<volume>`, as Kubernetes names it).
 */
export function claimRefsOf(pod: Pod): NamedRef[] {
  const namespace = pod.metadata.namespace ?? 'default';
  const names = new Set<string>();
  for (const volume of pod.spec.volumes ?? []) {
    const claimName = volume.persistentVolumeClaim?.claimName;
    if (claimName !== undefined && claimName !== '') names.add(claimName);
    if (volume.ephemeral !== undefined) names.add(`${pod.metadata.name}-${volume.name}`);
  }
  return [...names].map((name) => ({ kind: 'PersistentVolumeClaim', name, namespace }));
}
