/**
 * The atomic-writer sources of a pod volume — configMap, secret, downwardAPI, projected —
 * resolved from the pod (pure). ConfigMaps and Secrets are read by their plugins at setUp
 * time; resolution only records which ones the pod uses, so their changes reach it (the
 * remount rule). Downward API files are computed here from the pod object (and, for
 * resourceFieldRef, the node's allocatable that EngineStarted recorded).
 */
import type { Pod, PodVolume } from '../events/k8s.js';
import type { NodeAllocatable } from '../events/types.js';
import { resourceFieldValue } from './downward-resources.js';
import { addReference } from './references.js';
import type {
  ContentOptions,
  DownwardFile,
  ProjectedPart,
  VolumeSource,
} from '../operations/volume-spec.js';

export const contentPluginNames = {
  configMap: 'kubernetes.io/configmap',
  secret: 'kubernetes.io/secret',
  downwardAPI: 'kubernetes.io/downward-api',
  projected: 'kubernetes.io/projected',
} as const;

export type ContentStep =
  { ok: true; source: VolumeSource; pluginName: string } | { ok: false; error: string };

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

type DownwardItem = DownwardItems[number];

/** One file's content: a field of the pod, or a container's resources; else why not. */
function itemContent(
  pod: Pod,
  item: DownwardItem,
  allocatable: NodeAllocatable | undefined,
): { ok: true; content: string } | { ok: false; error: string } {
  if (item.resourceFieldRef !== undefined)
    return resourceFieldValue(pod, item.resourceFieldRef, allocatable);
  const fieldPath = item.fieldRef?.fieldPath;
  const content = fieldPath === undefined ? undefined : fieldValue(pod, fieldPath);
  if (content !== undefined) return { ok: true, content };
  const error =
    fieldPath === undefined
      ? 'neither fieldRef nor resourceFieldRef is set'
      : `fieldPath "${fieldPath}" is not supported in volumes`;
  return { ok: false, error };
}

function downwardFiles(
  pod: Pod,
  volume: string,
  items: DownwardItems | undefined,
  allocatable: NodeAllocatable | undefined,
) {
  const files: DownwardFile[] = [];
  for (const item of items ?? []) {
    const got = itemContent(pod, item, allocatable);
    if (!got.ok) return `volume "${volume}": downward API file "${item.path}": ${got.error}`;
    const mode = item.mode === undefined ? {} : { mode: item.mode };
    files.push({ path: item.path, content: got.content, ...mode });
  }
  return files;
}

interface ContentRequest {
  readonly kind: 'ConfigMap' | 'Secret';
  readonly namespace: string;
  readonly name: string;
  readonly given: { items?: ContentOptions['items']; optional?: boolean; defaultMode?: number };
  /** The field path of the source in the pod (for messages). */
  readonly field: string;
}

/** `spec.volumes[i]`: the volume's place in the pod, as the API server's field paths say. */
function volumeField(pod: Pod, v: PodVolume): string {
  return `spec.volumes[${(pod.spec.volumes ?? []).lastIndexOf(v)}]`;
}

/** What the plugin will read, and the reference that makes its changes reach the pod. */
function contentOptions(request: ContentRequest, references: string[]): ContentOptions {
  const { kind, namespace, name, given } = request;
  addReference(references, kind, name); // in the pod's namespace: `namespace`
  return {
    name,
    namespace,
    field: request.field,
    ...(given.items === undefined ? {} : { items: given.items }),
    ...(given.defaultMode === undefined ? {} : { defaultMode: given.defaultMode }),
    optional: given.optional ?? false,
  };
}

const noTokenIssuer =
  'serviceAccountToken projection needs a token issuer, and vole has no token issuer ' +
  '(no API server signs tokens here); mount a Secret holding a token instead';

/** What a content volume may use beyond the pod: token projections, the node's allocatable. */
export interface ContentContext {
  /** true: serviceAccountToken projections resolve (tokens from the TokenRequest API). */
  readonly tokenRequests: boolean;
  /** The node's allocatable (EngineStarted): resourceFieldRef of unset limits. */
  readonly allocatable: NodeAllocatable | undefined;
}

/** Kubernetes' default expirationSeconds of a serviceAccountToken projection (1 h). */
const tokenExpirationSecondsDefault = 3600;

type TokenProjection = NonNullable<
  NonNullable<NonNullable<PodVolume['projected']>['sources']>[number]['serviceAccountToken']
>;

function tokenPart(pod: Pod, s: TokenProjection): ProjectedPart {
  const { expirationSeconds, audience } = s as TokenProjection & { expirationSeconds?: number };
  return {
    kind: 'serviceAccountToken',
    path: s.path,
    serviceAccountName: pod.spec.serviceAccountName ?? 'default',
    ...(audience === undefined || audience === '' ? {} : { audience }),
    expirationSeconds: expirationSeconds ?? tokenExpirationSecondsDefault,
    podName: pod.metadata.name,
    podUid: pod.metadata.uid ?? '',
  };
}

function projectedParts(
  pod: Pod,
  v: PodVolume,
  references: string[],
  opts: ContentContext,
): ProjectedPart[] | string {
  const namespace = pod.metadata.namespace ?? 'default';
  const parts: ProjectedPart[] = [];
  const sources = v.projected?.sources ?? [];
  for (const [i, s] of sources.entries()) {
    const at = `${volumeField(pod, v)}.projected.sources[${i}]`;
    if (s.serviceAccountToken !== undefined) {
      if (!opts.tokenRequests) return `volume "${v.name}": ${noTokenIssuer}`;
      parts.push(tokenPart(pod, s.serviceAccountToken));
    } else if (s.configMap !== undefined) {
      const name = s.configMap.name ?? '';
      const field = `${at}.configMap`;
      const request = { kind: 'ConfigMap', namespace, name, given: s.configMap, field } as const;
      parts.push({ kind: 'configMap', ...contentOptions(request, references) });
    } else if (s.secret !== undefined) {
      const name = s.secret.name ?? '';
      const field = `${at}.secret`;
      const request = { kind: 'Secret', namespace, name, given: s.secret, field } as const;
      parts.push({ kind: 'secret', ...contentOptions(request, references) });
    } else if (s.downwardAPI !== undefined) {
      const files = downwardFiles(pod, v.name, s.downwardAPI.items, opts.allocatable);
      if (typeof files === 'string') return files;
      parts.push({ kind: 'downwardAPI', files });
    }
  }
  return parts;
}

const withMode = (defaultMode: number | undefined) =>
  defaultMode === undefined ? {} : { defaultMode };

/** The source of a configMap, secret, downwardAPI or projected volume; undefined for others. */
export function contentSource(
  pod: Pod,
  v: PodVolume,
  references: string[],
  opts: ContentContext = { tokenRequests: false, allocatable: undefined },
): ContentStep | undefined {
  const namespace = pod.metadata.namespace ?? 'default';
  if (v.configMap !== undefined) {
    const name = v.configMap.name ?? v.name;
    const field = `${volumeField(pod, v)}.configMap`;
    const request = { kind: 'ConfigMap', namespace, name, given: v.configMap, field } as const;
    const options = contentOptions(request, references);
    const source: VolumeSource = { kind: 'configMap', ...options };
    return { ok: true, source, pluginName: contentPluginNames.configMap };
  }
  if (v.secret !== undefined) {
    const name = v.secret.secretName ?? v.name;
    const field = `${volumeField(pod, v)}.secret`;
    const request = { kind: 'Secret', namespace, name, given: v.secret, field } as const;
    const source: VolumeSource = { kind: 'secret', ...contentOptions(request, references) };
    return { ok: true, source, pluginName: contentPluginNames.secret };
  }
  if (v.downwardAPI !== undefined) {
    const files = downwardFiles(pod, v.name, v.downwardAPI.items, opts.allocatable);
    if (typeof files === 'string') return { ok: false, error: files };
    const mode = withMode(v.downwardAPI.defaultMode);
    const source: VolumeSource = { kind: 'downwardAPI', files, ...mode };
    return { ok: true, source, pluginName: contentPluginNames.downwardAPI };
  }
  if (v.projected !== undefined) {
    const sources = projectedParts(pod, v, references, opts);
    if (typeof sources === 'string') return { ok: false, error: sources };
    const mode = withMode(v.projected.defaultMode);
    const source: VolumeSource = { kind: 'projected', namespace, sources, ...mode };
    return { ok: true, source, pluginName: contentPluginNames.projected };
  }
  return undefined;
}
