/**
 * The atomic-writer sources of a pod volume — configMap, secret, downwardAPI, projected —
 * resolved from the pod (pure). ConfigMaps and Secrets are read by their plugins at setUp
 * time; resolution only records which ones the pod uses, so their changes reach it (the
 * remount rule). Downward API files are computed here from the pod object.
 */
import { objectKey, type Pod, type PodVolume } from '../events/k8s.js';
import type { ContentOptions, DownwardFile, ProjectedPart, VolumeSource } from './types.js';

export const contentPluginNames = {
  configMap: 'kubernetes.io/configmap',
  secret: 'kubernetes.io/secret',
  downwardAPI: 'kubernetes.io/downward-api',
  projected: 'kubernetes.io/projected',
} as const;

export type ContentStep =
  | { ok: true; source: VolumeSource; pluginName: string }
  | { ok: false; error: string };

type DownwardItems = NonNullable<NonNullable<PodVolume['downwardAPI']>['items']>;

/** Kubernetes' format of a labels or annotations file: `key="value"` lines, sorted. */
function formatMap(map: Record<string, string> | undefined): string {
  return Object.keys(map ?? {})
    .sort()
    .map((k) => `${k}=${JSON.stringify(map![k])}`)
    .join('\n');
}

const keyed = /^metadata\.(labels|annotations)\['([^']+)'\]$/;

function fieldValue(pod: Pod, fieldPath: string): string | undefined {
  const m = pod.metadata;
  switch (fieldPath) {
    case 'metadata.name':
      return m.name;
    case 'metadata.namespace':
      return m.namespace ?? 'default';
    case 'metadata.uid':
      return m.uid ?? '';
    case 'metadata.labels':
      return formatMap(m.labels);
    case 'metadata.annotations':
      return formatMap(m.annotations);
  }
  const match = keyed.exec(fieldPath);
  if (match === null) return undefined;
  const map = match[1] === 'labels' ? m.labels : m.annotations;
  return map?.[match[2]!] ?? '';
}

function downwardFiles(pod: Pod, volume: string, items: DownwardItems | undefined) {
  const files: DownwardFile[] = [];
  for (const item of items ?? []) {
    const fieldPath = item.fieldRef?.fieldPath;
    const content = fieldPath === undefined ? undefined : fieldValue(pod, fieldPath);
    if (content === undefined)
      return `volume "${volume}": downward API file "${item.path}": ${fieldPath === undefined ? 'resourceFieldRef needs container resources, which vole does not run' : `fieldPath "${fieldPath}" is not supported in volumes`}`;
    files.push({ path: item.path, content, ...(item.mode === undefined ? {} : { mode: item.mode }) });
  }
  return files;
}

function contentOptions(
  namespace: string,
  name: string,
  given: { items?: ContentOptions['items']; optional?: boolean; defaultMode?: number },
  references: string[],
  kind: 'ConfigMap' | 'Secret',
): ContentOptions {
  references.push(objectKey(kind, name, namespace));
  return {
    name,
    namespace,
    ...(given.items === undefined ? {} : { items: given.items }),
    ...(given.defaultMode === undefined ? {} : { defaultMode: given.defaultMode }),
    optional: given.optional ?? false,
  };
}

function projectedParts(
  pod: Pod,
  v: PodVolume,
  namespace: string,
  references: string[],
): ProjectedPart[] | string {
  const parts: ProjectedPart[] = [];
  for (const s of v.projected?.sources ?? []) {
    if (s.serviceAccountToken !== undefined)
      return `volume "${v.name}": serviceAccountToken projection needs a token issuer, and vole has no token issuer (no API server signs tokens here); mount a Secret holding a token instead`;
    if (s.configMap !== undefined)
      parts.push({ kind: 'configMap', ...contentOptions(namespace, s.configMap.name ?? '', s.configMap, references, 'ConfigMap') });
    else if (s.secret !== undefined)
      parts.push({ kind: 'secret', ...contentOptions(namespace, s.secret.name ?? '', s.secret, references, 'Secret') });
    else if (s.downwardAPI !== undefined) {
      const files = downwardFiles(pod, v.name, s.downwardAPI.items);
      if (typeof files === 'string') return files;
      parts.push({ kind: 'downwardAPI', files });
    }
  }
  return parts;
}

/** The source of a configMap, secret, downwardAPI or projected volume; undefined for others. */
export function contentSource(pod: Pod, v: PodVolume, references: string[]): ContentStep | undefined {
  const namespace = pod.metadata.namespace ?? 'default';
  if (v.configMap !== undefined) {
    const options = contentOptions(namespace, v.configMap.name ?? v.name, v.configMap, references, 'ConfigMap');
    return { ok: true, source: { kind: 'configMap', ...options }, pluginName: contentPluginNames.configMap };
  }
  if (v.secret !== undefined) {
    const options = contentOptions(namespace, v.secret.secretName ?? v.name, v.secret, references, 'Secret');
    return { ok: true, source: { kind: 'secret', ...options }, pluginName: contentPluginNames.secret };
  }
  if (v.downwardAPI !== undefined) {
    const files = downwardFiles(pod, v.name, v.downwardAPI.items);
    if (typeof files === 'string') return { ok: false, error: files };
    const defaultMode = v.downwardAPI.defaultMode;
    const source: VolumeSource = { kind: 'downwardAPI', files, ...(defaultMode === undefined ? {} : { defaultMode }) };
    return { ok: true, source, pluginName: contentPluginNames.downwardAPI };
  }
  if (v.projected !== undefined) {
    const sources = projectedParts(pod, v, namespace, references);
    if (typeof sources === 'string') return { ok: false, error: sources };
    const defaultMode = v.projected.defaultMode;
    const source: VolumeSource = { kind: 'projected', namespace, sources, ...(defaultMode === undefined ? {} : { defaultMode }) };
    return { ok: true, source, pluginName: contentPluginNames.projected };
  }
  return undefined;
}
