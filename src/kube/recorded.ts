/**
 * The facts of a recorded log (`vole record`, `vole import --audit-log`): which API objects
 * are recorded, the event each change of one becomes, and what a log already holds, so a
 * relist, a watch resumed after an API server restart, or a recorder started again on its
 * log adds no change twice (an object's uid and resourceVersion already logged) and loses
 * none (an object logged but no longer listed is logged removed).
 *
 * Pure: no I/O and no clock; the time an object was seen is given.
 */
import { csiNode, manifestObject, pod as podSchema } from '../events/k8s.js';
import { csiPluginCaps } from '../csi/plugin.js';
import { recordedMode } from '../engine/cores.js';
import { engineVersion } from '../engine/engine.js';
import type { NewEvent, ObservedAt, RecordedFrom, VoleEvent } from '../events/types.js';
import { describeInvalid, validate } from '../sources/validate.js';
import type { ApiObject } from './informer.js';

/** A recorded resource: its collection, its kind, and whether it lives in a namespace. */
export interface RecordedResource {
  readonly kind: RecordedKind;
  readonly path: string;
  readonly apiVersion: string;
  readonly resource: string;
  readonly group: string;
}

export const recordedKinds = [
  'Pod',
  'PersistentVolumeClaim',
  'PersistentVolume',
  'StorageClass',
  'VolumeAttachment',
  'CSIDriver',
  'CSINode',
  'Node',
  'Event',
] as const;
export type RecordedKind = (typeof recordedKinds)[number];

const core = (resource: string, kind: RecordedKind): RecordedResource => ({
  kind,
  path: `/api/v1/${resource}`,
  apiVersion: 'v1',
  resource,
  group: '',
});
const storage = (resource: string, kind: RecordedKind): RecordedResource => ({
  kind,
  path: `/apis/storage.k8s.io/v1/${resource}`,
  apiVersion: 'storage.k8s.io/v1',
  resource,
  group: 'storage.k8s.io',
});

/** What `vole record` watches (and its RBAC grants get, list and watch on). */
export const recordedResources: readonly RecordedResource[] = [
  core('pods', 'Pod'),
  core('persistentvolumeclaims', 'PersistentVolumeClaim'),
  core('persistentvolumes', 'PersistentVolume'),
  storage('storageclasses', 'StorageClass'),
  storage('volumeattachments', 'VolumeAttachment'),
  storage('csidrivers', 'CSIDriver'),
  storage('csinodes', 'CSINode'),
  core('nodes', 'Node'),
  core('events', 'Event'),
];

/** The recorded resource of an API group and resource name (an audit entry's objectRef). */
export function recordedResourceOf(group: string, resource: string): RecordedResource | undefined {
  return recordedResources.find((r) => r.group === group && r.resource === resource);
}

/** `Pod/ns/name`, `PersistentVolume//pv-1`: one object's key in a recorded log. */
export function recordedKey(kind: string, name: string, namespace?: string): string {
  return `${kind}/${namespace ?? ''}/${name}`;
}

/**
 * What of a Node volume decisions read: volumesInUse, volumesAttached, the Ready
 * condition's status and reason, and the spec (taints, unschedulable). A Node update that
 * leaves it unchanged (a kubelet heartbeat) is not recorded.
 */
export function nodeVolumeProjection(raw: ApiObject): string {
  const status = (raw['status'] ?? {}) as {
    volumesInUse?: unknown;
    volumesAttached?: unknown;
    conditions?: { type?: string; status?: string; reason?: string }[];
  };
  const ready = (status.conditions ?? []).find((c) => c.type === 'Ready');
  return JSON.stringify([
    status.volumesInUse ?? [],
    status.volumesAttached ?? [],
    [ready?.status ?? '', ready?.reason ?? ''],
    raw['spec'] ?? {},
  ]);
}

/** Reasons of Kubernetes Events about volumes (kubelet, attach/detach, PV, expand controllers). */
const volumeReason = /volume|mount|attach|detach|provision|resiz|claim|binding|recycl|mapdevice/i;
const volumeKinds = new Set([
  'PersistentVolumeClaim',
  'PersistentVolume',
  'VolumeAttachment',
  'StorageClass',
  'CSIDriver',
  'CSINode',
]);
/** The scheduler's words when a pod waits on its volumes (volumebinding, volume limits). */
const schedulingOnVolumes = /volume|claim|persistentvolume/i;

/** Is this Kubernetes Event about volumes (what a recorded log keeps of Events)? */
export function isVolumeEvent(raw: ApiObject): boolean {
  const reason = typeof raw['reason'] === 'string' ? raw['reason'] : '';
  const message = typeof raw['message'] === 'string' ? raw['message'] : '';
  const involved = (raw['involvedObject'] ?? raw['regarding'] ?? {}) as { kind?: string };
  if (volumeKinds.has(involved.kind ?? '')) return true;
  if (reason === 'FailedScheduling') return schedulingOnVolumes.test(message);
  return volumeReason.test(reason);
}

/** Each recorded object's last logged identity. */
interface Logged {
  readonly uid: string;
  readonly resourceVersion: string;
  /** Nodes: their nodeVolumeProjection when logged. */
  readonly projection?: string;
}

/** The outcome of one observed change: the events to log (none: known already), or why not. */
export type Recording =
  | { readonly events: readonly NewEvent[] }
  | { readonly refused: string; readonly events: readonly NewEvent[] };

/**
 * What a recorded log already holds, folded from its events: per object, the uid and
 * resourceVersion last logged. It turns each observed change into the events to log.
 */
export class RecordedState {
  private readonly logged = new Map<string, Logged>();
  private readonly podKeys = new Map<string, string>();
  /** The CSI driver names the last EngineStarted recorded. */
  drivers: readonly string[] = [];

  /** Folds an event of the log (read back at a start, or just built). */
  fold(event: VoleEvent | NewEvent): void {
    const observed = 'observed' in event ? event.observed : undefined;
    switch (event.type) {
      case 'EngineStarted':
        this.drivers = event.plugins.map((p) => p.name);
        return;
      case 'PodUpserted': {
        const { name, namespace, uid = '' } = event.pod.metadata;
        const key = recordedKey('Pod', name, namespace);
        this.podKeys.set(uid, key);
        return this.set(key, uid, observed);
      }
      case 'PodRemoved': {
        const key = this.podKeys.get(event.uid);
        this.podKeys.delete(event.uid);
        if (key !== undefined) this.logged.delete(key);
        return;
      }
      case 'ObjectUpserted': {
        const { kind, metadata } = event.object;
        const key = recordedKey(kind, metadata.name, metadata.namespace);
        const projection =
          kind === 'Node' ? nodeVolumeProjection(event.object as ApiObject) : undefined;
        return this.set(key, metadata.uid ?? '', observed, projection);
      }
      case 'ObjectRemoved':
        this.logged.delete(recordedKey(event.kind, event.name, event.namespace));
        return;
      case 'CSINodeObserved': {
        const key = recordedKey('CSINode', event.name);
        if (event.object === undefined) this.logged.delete(key);
        else this.set(key, event.object.metadata.uid ?? '', event.observed);
        return;
      }
      case 'KubeEventObserved':
        return this.set(recordedKey('Event', event.name, event.namespace), '', event.observed);
      default:
        return;
    }
  }

  private set(key: string, uid: string, observed: ObservedAt | undefined, projection?: string) {
    const resourceVersion = observed?.resourceVersion ?? '';
    this.logged.set(key, { uid: observed?.uid ?? uid, resourceVersion, projection });
  }

  /** The keys of every logged object of `kind` (a relist drops those it no longer shows). */
  keysOf(kind: RecordedKind): string[] {
    return [...this.logged.keys()].filter((k) => k.startsWith(`${kind}/`));
  }

  /** The uid of a logged pod, by key. */
  podUid(key: string): string | undefined {
    for (const [uid, k] of this.podKeys) if (k === key) return uid;
    return undefined;
  }

  /** The events an observed object (added, updated, listed) becomes; folded in already. */
  upsert(kind: RecordedKind, raw: ApiObject, seen: Omit<ObservedAt, 'resourceVersion'>): Recording {
    const { name, namespace, uid = '', resourceVersion = '' } = raw.metadata;
    const key = recordedKey(kind, name, namespace);
    const before = this.logged.get(key);
    if (before !== undefined && before.uid === uid && before.resourceVersion === resourceVersion)
      return { events: [] };
    if (kind === 'Event' && !isVolumeEvent(raw)) return { events: [] };
    const observed: ObservedAt = { ...seen, resourceVersion, ...(uid === '' ? {} : { uid }) };
    const events: NewEvent[] = [];
    // The same name with another uid: the one logged was deleted while nobody watched.
    if (before !== undefined && before.uid !== uid && uid !== '' && kind !== 'Event')
      events.push(...this.remove(kind, raw, { ...seen, uid: before.uid }).events);
    const projection = kind === 'Node' ? nodeVolumeProjection(raw) : undefined;
    if (projection !== undefined && before?.projection === projection && before.uid === uid) {
      this.logged.set(key, { ...before, resourceVersion });
      return { events };
    }
    const built = buildUpsert(kind, raw, observed);
    if ('refused' in built) return { refused: built.refused, events };
    this.fold(built.event);
    return { events: [...events, built.event] };
  }

  /** The events an object seen deleted (or no longer listed) becomes. */
  remove(kind: RecordedKind, raw: ApiObject, seen: Omit<ObservedAt, 'resourceVersion'>): Recording {
    const { name, namespace, resourceVersion = '' } = raw.metadata;
    const key = recordedKey(kind, name, namespace);
    const before = this.logged.get(key);
    if (before === undefined || kind === 'Event') return { events: [] };
    const uid = seen.uid ?? before.uid;
    const observed: ObservedAt = { ...seen, resourceVersion, ...(uid === '' ? {} : { uid }) };
    const event = buildRemoval(kind, name, namespace, uid, observed);
    this.fold(event);
    return { events: [event] };
  }
}

/** An observed object as its recorded event, or why it cannot be one. */
function buildUpsert(
  kind: RecordedKind,
  raw: ApiObject,
  observed: ObservedAt,
): { event: NewEvent } | { refused: string } {
  const what = `${kind} ${raw.metadata.namespace === undefined ? '' : `${raw.metadata.namespace}/`}${raw.metadata.name}`;
  if (kind === 'Event') return { event: kubeEventOf(raw, observed) };
  if (kind === 'CSINode') {
    const parsed = csiNode.safeParse(raw);
    if (!parsed.success) return { refused: `${what}: ${parsed.error.message}` };
    return {
      event: {
        tsMs: tsOf(observed),
        type: 'CSINodeObserved',
        name: raw.metadata.name,
        object: parsed.data,
        observed,
      },
    };
  }
  if (kind === 'Pod') {
    const parsed = podSchema.safeParse(raw);
    if (!parsed.success) return { refused: `${what}: ${parsed.error.message}` };
    return { event: { tsMs: tsOf(observed), type: 'PodUpserted', pod: parsed.data, observed } };
  }
  const errors = validate(raw);
  const parsed = manifestObject.safeParse(raw);
  if (errors.length > 0 || !parsed.success) {
    const ref = { kind, name: raw.metadata.name, namespace: raw.metadata.namespace };
    return {
      refused:
        errors.length > 0 ? describeInvalid(errors, ref) : `${what}: ${parsed.error?.message}`,
    };
  }
  const object = parsed.data;
  if (object.kind === 'ConfigMap' || object.kind === 'Secret')
    return { refused: `${what}: ConfigMaps and Secrets are not recorded` };
  return { event: { tsMs: tsOf(observed), type: 'ObjectUpserted', object, observed } };
}

function buildRemoval(
  kind: RecordedKind,
  name: string,
  namespace: string | undefined,
  uid: string,
  observed: ObservedAt,
): NewEvent {
  const tsMs = tsOf(observed);
  if (kind === 'Pod') return { tsMs, type: 'PodRemoved', uid, observed };
  if (kind === 'CSINode') return { tsMs, type: 'CSINodeObserved', name, observed };
  if (kind === 'Event') throw new Error('Events are not recorded removed');
  return {
    tsMs,
    type: 'ObjectRemoved',
    kind,
    name,
    ...(namespace === undefined ? {} : { namespace }),
    observed,
  };
}

/** The log's time of a recorded fact: when it was seen, in whole ms. */
export function tsOf(observed: ObservedAt): number {
  const ms = Date.parse(observed.at);
  return Number.isFinite(ms) && ms >= 0 ? Math.floor(ms) : 0;
}

const text = (v: unknown): string | undefined =>
  typeof v === 'string' && v !== '' ? v : undefined;

/** A core/v1 (or events.k8s.io/v1) Event as KubeEventObserved. */
export function kubeEventOf(raw: ApiObject, observed: ObservedAt): NewEvent {
  const source = (raw['source'] ?? {}) as { component?: string; host?: string };
  const series = (raw['series'] ?? {}) as { count?: number; lastObservedTime?: string };
  const involved = (raw['involvedObject'] ?? raw['regarding'] ?? {}) as Record<string, unknown>;
  const first = text(raw['firstTimestamp']) ?? text(raw['eventTime']);
  const last = text(raw['lastTimestamp']) ?? text(series.lastObservedTime) ?? first;
  const count = typeof raw['count'] === 'number' ? raw['count'] : series.count;
  const host = text(source.host) ?? text(raw['reportingInstance']);
  return {
    tsMs: tsOf(observed),
    type: 'KubeEventObserved',
    namespace: raw.metadata.namespace ?? '',
    name: raw.metadata.name,
    reason: text(raw['reason']) ?? '',
    message: (text(raw['message']) ?? text(raw['note']) ?? '').slice(0, 16_384),
    eventType: text(raw['type']) ?? '',
    involvedObject: {
      kind: text(involved['kind']) ?? '',
      name: text(involved['name']) ?? '',
      ...(text(involved['namespace']) === undefined
        ? {}
        : { namespace: text(involved['namespace']) }),
      ...(text(involved['uid']) === undefined ? {} : { uid: text(involved['uid']) }),
    },
    component:
      text(source.component) ??
      text(raw['reportingComponent']) ??
      text(raw['reportingController']) ??
      '',
    ...(host === undefined ? {} : { host }),
    ...(first === undefined ? {} : { firstTimestamp: first }),
    ...(last === undefined ? {} : { lastTimestamp: last }),
    ...(typeof count === 'number' && Number.isInteger(count) && count >= 0 ? { count } : {}),
    observed,
  };
}

/**
 * A recorded log's EngineStarted: mode `recorded`, where its facts come from, and one
 * plugin per CSI driver (attachRequired from its CSIDriver, else true) as `vole controller`
 * records them, so the controller's fold names each CSI volume as Kubernetes does.
 */
export function recordedEngineStarted(
  drivers: ReadonlyMap<string, boolean>,
  from: RecordedFrom,
  tsMs: number,
): NewEvent {
  const plugins = [...drivers]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([driver, attachRequired]) =>
      csiPluginCaps(driver, {
        publishUnpublish: attachRequired,
        stageUnstage: false,
        expand: false,
        singleNodeMultiWriter: false,
        maxVolumesPerNode: 0,
      }),
    );
  return {
    tsMs,
    type: 'EngineStarted',
    mode: recordedMode,
    recorded: from,
    plugins,
    version: engineVersion,
  };
}
