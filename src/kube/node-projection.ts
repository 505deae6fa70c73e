/**
 * What of a Node the controller's fold and planner read: its labels and annotations, its
 * spec (taints), its conditions' type and status, and status.volumesInUse. A Node update
 * that leaves this unchanged — the controller's own status.volumesAttached coming back
 * through the informer, a kubelet's heartbeat (lastHeartbeatTime) — is not logged: the
 * log still holds every input the planner used, so replay stays exact, and the controller
 * does not validate, log and plan the Node's volumes again for nothing.
 */
/** A Node as the informer hands it or as the log holds it. */
interface NodeLike {
  readonly metadata: { readonly name: string };
}

interface NodeParts {
  metadata: { labels?: unknown; annotations?: unknown };
  spec?: unknown;
  status?: { conditions?: { type?: unknown; status?: unknown }[]; volumesInUse?: unknown };
}

/** The Node's fields the controller reads, as one comparable string. */
export function nodeProjection(object: NodeLike): string {
  const node = object as NodeParts;
  const conditions = (node.status?.conditions ?? []).map((c) => [c.type, c.status]);
  return canonical([
    node.metadata.labels ?? {},
    node.metadata.annotations ?? {},
    node.spec ?? {},
    conditions,
    node.status?.volumesInUse ?? [],
  ]);
}

/** JSON with each object's keys sorted: the log's parsed form may order them otherwise. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  const entries = Object.entries(value).filter(([, v]) => v !== undefined);
  entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
}

/** True when `next` changes nothing the controller reads of the logged Node `logged`. */
export function sameNodeProjection(logged: NodeLike | undefined, next: NodeLike): boolean {
  return logged !== undefined && nodeProjection(logged) === nodeProjection(next);
}

/** The controller's record of a Node: what it takes as mounted there (volumesInUse). */
export interface NodeInUse {
  readonly exists: boolean;
  readonly volumesInUse: ReadonlySet<string>;
}

/**
 * True when folding `next` would leave the world as it is: the same projection as the
 * logged Node, and the world's record holds exactly its volumesInUse. An attach since
 * assumed its volume mounted (Kubernetes' "assume mounted until proven otherwise"): then
 * the update, even unchanged on the API, says otherwise and must be logged.
 */
export function nodeUpdateChangesNothing(
  logged: NodeLike | undefined,
  record: NodeInUse | undefined,
  next: NodeLike,
): boolean {
  if (record === undefined || !record.exists) return false;
  const inUse = (next as NodeParts).status?.volumesInUse;
  const names = new Set(Array.isArray(inUse) ? (inUse as string[]) : []);
  if (names.size !== record.volumesInUse.size) return false;
  for (const name of names) if (!record.volumesInUse.has(name)) return false;
  return sameNodeProjection(logged, next);
}
