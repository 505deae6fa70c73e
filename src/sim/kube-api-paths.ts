/**
 * The simulated API server's reading of a request (kube-api-sim.ts): its path (group,
 * version, resource, namespace, name, subresource, field selector), the field selectors
 * kube-apiserver supports for what src/kube lists, and the patches it applies.
 */
import type { JsonObject, PatchType } from '../kube/http.js';

export interface ApiPath {
  /** `<group>/<version>/<resource>` (`v1/pods`, `storage.k8s.io/v1/volumeattachments`). */
  readonly resource: string;
  readonly namespace?: string;
  readonly name?: string;
  readonly subresource?: string;
  readonly fieldSelector?: string;
}

/**
 * A copy of a JSON value (what the API server stores and answers): a client owns what it is
 * given, as it would own a body it parsed. A walk of plain objects and arrays costs a few
 * times less than structuredClone on these small objects, and a run makes some ten
 * thousand copies.
 */
export function cloneJson<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(cloneJson) as T;
  const out: Record<string, unknown> = {};
  for (const key in value) out[key] = cloneJson((value as Record<string, unknown>)[key]);
  return out as T;
}

/** Parsed paths by text: a run asks for the same few (the Lease's, each Node's) thousands of times. */
const parsed = new Map<string, Readonly<ApiPath>>();

/** `/api/v1/…` or `/apis/<group>/<version>/…`, then `[namespaces/<ns>/]<resource>[/<name>[/<sub>]]`. */
export function parsePath(path: string): Readonly<ApiPath> {
  let at = parsed.get(path);
  if (at === undefined) {
    if (parsed.size > 10_000) parsed.clear(); // names drawn per run: bounded, but keep it so
    at = Object.freeze(parseNew(path));
    parsed.set(path, at);
  }
  return at;
}

function parseNew(path: string): ApiPath {
  const [pathname = '', search = ''] = path.split('?');
  const all = pathname
    .split('/')
    .filter((p) => p !== '')
    .map(decodeURIComponent);
  const core = all[0] === 'api';
  if (!core && all[0] !== 'apis') throw new Error(`not an API path: ${path}`);
  const prefix = core ? (all[1] ?? '') : all.slice(1, 3).join('/');
  let parts = all.slice(core ? 2 : 3);
  let namespace: string | undefined;
  // `namespaces/<ns>/<resource>…`; a bare `namespaces/<ns>` is the Namespace object itself.
  if (parts[0] === 'namespaces' && parts.length > 2) {
    namespace = parts[1];
    parts = parts.slice(2);
  }
  const [resource = '', name, subresource] = parts;
  const selector = new URLSearchParams(search).get('fieldSelector');
  return {
    resource: `${prefix}/${resource}`,
    ...(namespace === undefined ? {} : { namespace }),
    ...(name === undefined ? {} : { name }),
    ...(subresource === undefined ? {} : { subresource }),
    ...(selector === null ? {} : { fieldSelector: selector }),
  };
}

/** The field at a dotted path (`spec.nodeName`), as a string ('' when absent). */
function fieldOf(o: JsonObject, field: string): string {
  let at: unknown = o;
  for (const part of field.split('.')) at = (at as Record<string, unknown> | undefined)?.[part];
  return typeof at === 'string' ? at : '';
}

/** `a=b,c!=d` as kube-apiserver reads it (terms all hold; `==` is `=`). */
export function matchesSelector(o: JsonObject, selector: string | undefined): boolean {
  if (selector === undefined || selector === '') return true;
  return selector.split(',').every((term) => {
    const not = term.indexOf('!=');
    if (not >= 0) return fieldOf(o, term.slice(0, not)) !== term.slice(not + 2);
    const [field = '', value = ''] = term.replace('==', '=').split('=');
    return fieldOf(o, field) === value;
  });
}

/** The object as stored: its resourceVersion set; a copy the caller may not change. */
export function stored(o: JsonObject, rv: number): JsonObject {
  const copy = cloneJson(o);
  copy.metadata = { ...((copy.metadata ?? {}) as JsonObject), resourceVersion: String(rv) };
  return copy;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** RFC 7386 JSON merge patch: objects merged, null deletes, anything else replaces. */
function mergePatch(target: unknown, patch: unknown, strategic: boolean): unknown {
  if (!isObject(patch)) return patch;
  const out: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else if (strategic && key === 'conditions' && Array.isArray(value))
      out[key] = mergeByType(out[key], value);
    else out[key] = mergePatch(out[key], value, strategic);
  }
  return out;
}

/** A strategic merge of a list whose patchMergeKey is `type` (Node and pod conditions). */
function mergeByType(current: unknown, patch: readonly unknown[]): unknown[] {
  const out = Array.isArray(current) ? [...(current as unknown[])] : [];
  for (const item of patch) {
    const type = isObject(item) ? item.type : undefined;
    const at = out.findIndex((c) => isObject(c) && c.type === type);
    if (at >= 0) out[at] = mergePatch(out[at], item, true);
    else out.push(item);
  }
  return out;
}

/**
 * A patch applied to `current`: on the status subresource only status changes (and on
 * the object itself status stays), as for every kind with a status subresource here.
 */
export function applyPatch(
  current: JsonObject,
  patch: JsonObject,
  type: PatchType,
  subresource: string | undefined,
): JsonObject {
  if (type === 'json') throw new Error('JSON patch is not simulated: nothing in src/kube sends it');
  const merged = mergePatch(current, patch, type === 'strategic') as JsonObject;
  if (subresource === 'status') return { ...current, status: merged.status };
  return { ...merged, ...(current.status === undefined ? {} : { status: current.status }) };
}
