/**
 * `vole import --audit-log FILE`: the API server's audit log (JSON lines, as
 * deploy/audit-policy.yaml writes it) as a recorded log: each successful create, update,
 * patch or delete of what `vole record` watches becomes the same event `vole record`
 * would have logged, with the audit entry's requestReceivedTimestamp as the time, its user
 * and verb. Entries of other stages, verbs, resources or failed requests are skipped; a
 * line that is no JSON or no audit Event is counted, never fatal.
 *
 * Pure: lines in, events and counts out.
 */
import type { NewEvent } from '../events/index.js';
import { csiDrivers } from './controller.js';
import type { ApiObject } from './informer.js';
import {
  type RecordedResource,
  RecordedState,
  recordedEngineStarted,
  recordedResourceOf,
} from './recorded.js';

export interface AuditImportCounts {
  /** Lines read (blank ones not counted). */
  lines: number;
  /** Audit entries that became one or more events. */
  used: number;
  /** Audit entries of another stage, a read, another resource, or a failed request. */
  skipped: number;
  /** Lines that are no JSON. */
  unreadable: number;
  /** JSON lines that are no audit.k8s.io Event. */
  foreign: number;
  /** Changes whose object vole cannot record (invalid), with why (the first few). */
  refused: number;
  readonly problems: string[];
}

interface AuditEntry {
  kind?: unknown;
  apiVersion?: unknown;
  stage?: unknown;
  verb?: unknown;
  requestReceivedTimestamp?: unknown;
  user?: { username?: unknown };
  objectRef?: {
    apiGroup?: unknown;
    resource?: unknown;
    subresource?: unknown;
    namespace?: unknown;
    name?: unknown;
    uid?: unknown;
  };
  responseStatus?: { code?: unknown };
  responseObject?: unknown;
}

const writes = new Set(['create', 'update', 'patch', 'delete']);
const problemsKept = 10;

/** One line as an audit entry, or why not. */
function entryOf(line: string): AuditEntry | 'unreadable' | 'foreign' {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return 'unreadable';
  }
  if (typeof value !== 'object' || value === null) return 'foreign';
  const entry = value as AuditEntry;
  if (entry.kind !== 'Event' || typeof entry.apiVersion !== 'string') return 'foreign';
  if (!entry.apiVersion.startsWith('audit.k8s.io/')) return 'foreign';
  return entry;
}

/** The change an entry is: its resource and its object, or undefined to skip it. */
function changeOf(
  entry: AuditEntry,
): { resource: RecordedResource; object: ApiObject | undefined } | undefined {
  if (entry.stage !== 'ResponseComplete' || !writes.has(String(entry.verb))) return undefined;
  const code = typeof entry.responseStatus?.code === 'number' ? entry.responseStatus.code : 0;
  if (code < 200 || code >= 300) return undefined;
  const ref = entry.objectRef ?? {};
  const sub = typeof ref.subresource === 'string' ? ref.subresource : '';
  if (sub !== '' && sub !== 'status') return undefined;
  const group = typeof ref.apiGroup === 'string' ? ref.apiGroup : '';
  const resource = recordedResourceOf(group, String(ref.resource ?? ''));
  if (resource === undefined) return undefined;
  const o = entry.responseObject as ApiObject | undefined;
  const object = o?.metadata?.name !== undefined && o.kind === resource.kind ? o : undefined;
  return { resource, object };
}

/**
 * Deleted for good by this answer: no finalizer holds it (and a pod's grace period is
 * over), or a delete answered with the object and no deletionTimestamp: the registry
 * deleted it at once and answered with its last state (the generic registry's
 * Store.Delete when nothing makes the deletion graceful or waits on a finalizer).
 */
function goneBy(object: ApiObject, verb: unknown): boolean {
  const m = object.metadata as { deletionTimestamp?: string; finalizers?: string[] };
  if ((m.finalizers ?? []).length > 0) return false;
  if (m.deletionTimestamp === undefined) return verb === 'delete';
  const grace = (object.metadata as { deletionGracePeriodSeconds?: number })
    .deletionGracePeriodSeconds;
  return object.kind !== 'Pod' || grace === 0;
}

/**
 * The recorded log of an audit log's lines: EngineStarted (mode recorded, the CSI drivers
 * the file's CSIDrivers and PVs name), then each change. `counts` is filled in.
 */
export function auditLogEvents(
  lines: readonly string[],
  origin: string,
  counts: AuditImportCounts,
): NewEvent[] {
  const entries: AuditEntry[] = [];
  for (const line of lines) {
    if (line.trim() === '') continue;
    counts.lines++;
    const entry = entryOf(line);
    if (entry === 'unreadable') counts.unreadable++;
    else if (entry === 'foreign') counts.foreign++;
    else entries.push(entry);
  }
  const changes = entries.map((entry) => ({ entry, change: changeOf(entry) }));
  const objects = changes.flatMap(({ change }) => (change?.object ? [change.object] : []));
  const firstAt = changes.find((c) => c.change !== undefined)?.entry.requestReceivedTimestamp;
  const startMs = typeof firstAt === 'string' ? Date.parse(firstAt) : 0;
  const events: NewEvent[] = [
    recordedEngineStarted(csiDrivers(objects), { source: 'audit-log', origin }, startMs || 0),
  ];
  const state = new RecordedState();
  for (const { entry, change } of changes) {
    if (change === undefined) {
      counts.skipped++;
      continue;
    }
    const made = changeEvents(state, entry, change, counts);
    if (made.length > 0) counts.used++;
    events.push(...made);
  }
  return events;
}

function changeEvents(
  state: RecordedState,
  entry: AuditEntry,
  change: { resource: RecordedResource; object: ApiObject | undefined },
  counts: AuditImportCounts,
): NewEvent[] {
  const at =
    typeof entry.requestReceivedTimestamp === 'string' ? entry.requestReceivedTimestamp : '';
  const user = typeof entry.user?.username === 'string' ? entry.user.username : undefined;
  const seen = {
    at,
    via: 'audit' as const,
    verb: String(entry.verb),
    ...(user === undefined ? {} : { user }),
  };
  const kind = change.resource.kind;
  const ref = entry.objectRef ?? {};
  const out: NewEvent[] = [];
  const take = (r: ReturnType<RecordedState['upsert']>) => {
    if ('refused' in r) {
      counts.refused++;
      if (counts.problems.length < problemsKept) counts.problems.push(r.refused);
    }
    out.push(...r.events);
  };
  const object = change.object;
  if (object === undefined) {
    // A delete answered with a Status: the object named by objectRef is gone.
    if (entry.verb !== 'delete') return out;
    const name = typeof ref.name === 'string' ? ref.name : '';
    const namespace = typeof ref.namespace === 'string' ? ref.namespace : undefined;
    const metadata = { name, ...(namespace === undefined ? {} : { namespace }) };
    const uid = typeof ref.uid === 'string' ? { uid: ref.uid } : {};
    take(state.remove(kind, { kind, apiVersion: '', metadata }, { ...seen, ...uid }));
    return out;
  }
  // Its last state (a deletionTimestamp, the finalizers left), then its removal if gone.
  take(state.upsert(kind, object, seen));
  if (goneBy(object, entry.verb)) take(state.remove(kind, object, seen));
  return out;
}
