/**
 * The API server simulated behind the transport port (src/kube/http.ts KubeTransport), for
 * `vole chaos --kube`: in memory, on the virtual clock, deterministic for a seed. What the
 * kube code relies on, as kube-apiserver does it: one resourceVersion counter for every
 * object; list with the field selectors it uses (spec.nodeName, metadata.name) and the
 * list's resourceVersion; watch from a resourceVersion with the changes since, bookmarks,
 * and 410 Gone for one older than the compaction point; create (409 AlreadyExists),
 * update with 409 Conflict on a stale resourceVersion, merge and strategic merge patch
 * (conditions merged by type, as the Node's patchStrategy says), the status subresource,
 * finalizers (a delete marks deletionTimestamp until they are gone), delete preconditions,
 * a pod's binding and a service account's token.
 *
 * Faults, drawn by the chaos run (kube-sim-faults.ts): slow answers, 5xx answers, requests
 * that time out (applied or not, the client cannot tell), watches that drop, compaction,
 * a restart (every watch ends, nothing is answered for a pause, the watch cache starts
 * again at the current resourceVersion), and per client: cut off (partitioned) or killed.
 */
import type { Clock } from '../clock.js';
import { kubeRequestTimeoutMs } from '../constants.js';
import {
  KubeApiError,
  type JsonObject,
  type KubeTransport,
  type PatchType,
  type WatchCallback,
  type WatchHandle,
} from '../kube/http.js';
import {
  applyPatch,
  type ApiPath,
  cloneJson,
  matchesSelector,
  parsePath,
  stored,
} from './kube-api-paths.js';

/** One change as a watch delivers it: the object before (absent: created) and after. */
export interface KubeChange {
  readonly rv: number;
  readonly resource: string;
  readonly before?: JsonObject;
  readonly after?: JsonObject;
}

/** A write the server applied, for the chaos checks (who wrote what, at which moment). */
export interface KubeWrite {
  readonly atMs: number;
  readonly client: string;
  readonly method: string;
  readonly path: string;
  readonly change: KubeChange;
}

interface Watcher {
  readonly client: SimKubeClient;
  readonly resource: string;
  readonly namespace: string | undefined;
  readonly selector: string | undefined;
  readonly onEvent: WatchCallback;
  readonly done: (error: unknown) => void;
  /** When its last event is delivered: events go out in order. */
  lastAtMs: number;
  /** No more events are offered (what is on its way still arrives, then `done`). */
  ended: boolean;
  /** The client aborted it: nothing more reaches it. */
  aborted: boolean;
}

/** How long the history of changes is kept before it is compacted by itself. */
const historyKept = 2_000;
/** A bookmark to every watch this often (virtual time). */
const bookmarkEveryMs = 10_000;

export class SimKubeApi {
  private rvNow = 1;
  private compactedRv = 1;
  private readonly objects = new Map<string, JsonObject>();
  private readonly history: KubeChange[] = [];
  private readonly watchers = new Set<Watcher>();
  private slowUntilMs = -1;
  private failRate = 0;
  private downUntilMs = -1;
  private uidSerial = 0;
  readonly writes: KubeWrite[] = [];
  /** Told of every change as it is applied (the harness's view, not a client's). */
  onChange: ((write: KubeWrite) => void) | null = null;
  requests = 0;

  constructor(
    readonly clock: Clock,
    private readonly random: () => number,
  ) {
    this.bookmarks();
  }

  get resourceVersion(): number {
    return this.rvNow;
  }

  get compactedResourceVersion(): number {
    return this.compactedRv;
  }

  client(name: string): SimKubeClient {
    return new SimKubeClient(this, name);
  }

  /** The object at `path` as stored now (the harness reads it directly, no faults). */
  peek(path: string): JsonObject | undefined {
    const at = parsePath(path);
    const found = at.name === undefined ? undefined : this.objects.get(keyOf(at));
    return found === undefined ? undefined : cloneJson(found);
  }

  /** Every object of a resource (e.g. `v1/pods`), as stored now. */
  all(resource: string): JsonObject[] {
    const out: JsonObject[] = [];
    for (const [key, object] of this.objects)
      if (key.startsWith(`${resource}/`)) out.push(cloneJson(object));
    return out;
  }

  // --- faults ---

  /** Answers are slow (seconds) until `durationMs` from now. */
  slow(durationMs: number): void {
    this.slowUntilMs = Math.max(this.slowUntilMs, this.clock.nowMs() + durationMs);
  }

  /** A share of requests fail (5xx, or time out) from now on; 0 ends it. */
  setFailRate(rate: number): void {
    this.failRate = rate;
  }

  /** Every watch ends now, as a load balancer dropping streams does. */
  dropWatches(): void {
    for (const w of [...this.watchers]) this.endWatch(w, null);
  }

  /** The history before now is compacted: a watch from an older resourceVersion gets 410. */
  compact(): void {
    this.compactedRv = this.rvNow;
    this.history.length = 0;
  }

  /** A restart: every watch is cut, nothing is answered for `pauseMs`, the cache is new. */
  restart(pauseMs: number): void {
    this.downUntilMs = Math.max(this.downUntilMs, this.clock.nowMs() + pauseMs);
    for (const w of [...this.watchers]) this.endWatch(w, new Error('connection reset by peer'));
    this.compact();
  }

  get down(): boolean {
    return this.clock.nowMs() < this.downUntilMs;
  }

  // --- requests ---

  /**
   * One request from `client`: after a drawn latency it is applied (or refused by a fault)
   * and answered; a timed-out one is applied or not and answered with an error only at
   * the client's request timeout.
   */
  request(client: SimKubeClient, method: string, path: string, body?: unknown, type?: PatchType) {
    this.requests++;
    const draw = this.random();
    const latencyMs = this.latencyMs();
    return new Promise<JsonObject>((resolve, reject) => {
      const fault = this.down || client.cut ? 'down' : this.faultOf(draw, method);
      const answer = (atMs: number, fn: () => void) =>
        this.clock.setTimer(atMs, () => {
          if (!client.killed) fn();
        });
      const nowMs = this.clock.nowMs();
      if (fault === 'down' || fault === 'lost') {
        // No connection, or a request lost before it arrived: the client's timeout ends it.
        const error = new Error(`${method} ${path}: no answer from the API server in time`);
        return void answer(nowMs + kubeRequestTimeoutMs, () => reject(error));
      }
      if (fault === '5xx') {
        const error = new KubeApiError(503, 'ServiceUnavailable', `${method} ${path}: 503`);
        return void answer(nowMs + latencyMs, () => reject(error));
      }
      this.clock.setTimer(nowMs + Math.min(latencyMs, 20), () => {
        if (client.killed && this.random() < 0.5) return; // died before it was sent
        let result: { ok: true; value: JsonObject } | { ok: false; error: unknown };
        try {
          result = { ok: true, value: this.apply(client.name, method, path, body, type) };
        } catch (error) {
          result = { ok: false, error };
        }
        const atMs = fault === 'timeout' ? nowMs + kubeRequestTimeoutMs : nowMs + latencyMs;
        answer(atMs, () => {
          if (fault === 'timeout')
            reject(new Error(`${method} ${path}: no answer from the API server in time`));
          else if (result.ok) resolve(result.value);
          else reject(result.error);
        });
      });
    });
  }

  private latencyMs(): number {
    const slow = this.clock.nowMs() < this.slowUntilMs;
    return slow ? 1_000 + Math.floor(this.random() * 4_000) : 1 + Math.floor(this.random() * 30);
  }

  private faultOf(draw: number, method: string): 'none' | '5xx' | 'timeout' | 'lost' {
    if (draw >= this.failRate) return 'none';
    const kind = draw / this.failRate;
    if (kind < 0.6) return '5xx';
    if (kind < 0.8 || method === 'GET') return 'lost';
    return 'timeout';
  }

  /** The request applied: the answer, or a KubeApiError as the API server gives it. */
  private apply(
    client: string,
    method: string,
    path: string,
    body: unknown,
    type: PatchType | undefined,
  ): JsonObject {
    const at = parsePath(path);
    if (method === 'GET') return at.name === undefined ? this.list(at) : this.get(at);
    if (method === 'POST') return this.create(client, path, at, body as JsonObject);
    if (method === 'PUT') return this.update(client, path, at, body as JsonObject);
    if (method === 'PATCH') {
      const current = this.get(at);
      const next = applyPatch(current, body as JsonObject, type ?? 'merge', at.subresource);
      return this.store(client, 'PATCH', path, at, current, next);
    }
    if (method === 'DELETE') return this.remove(client, path, at, body as JsonObject | undefined);
    throw new KubeApiError(405, 'MethodNotAllowed', `${method} ${path}: not allowed`);
  }

  private get(at: ApiPath): JsonObject {
    const found = this.objects.get(keyOf(at));
    if (found === undefined)
      throw new KubeApiError(404, 'NotFound', `${at.resource} "${at.name ?? ''}" not found`);
    return cloneJson(found);
  }

  private list(at: ApiPath): JsonObject {
    const items = this.all(at.resource).filter(
      (o) => inNamespace(o, at.namespace) && matchesSelector(o, at.fieldSelector),
    );
    return { kind: 'List', metadata: { resourceVersion: String(this.rvNow) }, items };
  }

  private create(client: string, path: string, at: ApiPath, body: JsonObject): JsonObject {
    if (at.name !== undefined && at.subresource === 'token')
      return this.token(at, body as { spec?: { expirationSeconds?: number } });
    if (at.name !== undefined && at.subresource === 'binding') {
      const pod = this.get(at);
      const target = (body.target ?? {}) as { name?: string };
      const spec = { ...(pod.spec as JsonObject), nodeName: target.name };
      this.store(client, 'POST', path, at, pod, { ...pod, spec });
      return { kind: 'Status', status: 'Success' };
    }
    const metadata = { ...((body.metadata ?? {}) as JsonObject) };
    const name = String(metadata.name ?? '');
    const named = { ...at, name };
    if (this.objects.has(keyOf(named)))
      throw new KubeApiError(409, 'AlreadyExists', `${at.resource} "${name}" already exists`);
    const created = {
      ...body,
      metadata: {
        ...metadata,
        ...(at.namespace === undefined ? {} : { namespace: at.namespace }),
        uid: metadata.uid ?? `uid-${++this.uidSerial}`,
        creationTimestamp: new Date(this.clock.nowMs()).toISOString(),
      },
    };
    return this.store(client, 'POST', path, named, undefined, created);
  }

  private token(at: ApiPath, body: { spec?: { expirationSeconds?: number } }): JsonObject {
    const seconds = body.spec?.expirationSeconds ?? 3600;
    const expires = new Date(this.clock.nowMs() + seconds * 1000).toISOString();
    const token = `token-${at.namespace ?? ''}-${at.name ?? ''}-${this.clock.nowMs()}`;
    return { kind: 'TokenRequest', status: { token, expirationTimestamp: expires } };
  }

  private update(client: string, path: string, at: ApiPath, body: JsonObject): JsonObject {
    const current = this.get(at);
    const want = (body.metadata as { resourceVersion?: string } | undefined)?.resourceVersion;
    const has = (current.metadata as { resourceVersion?: string }).resourceVersion;
    if (want !== undefined && want !== '' && want !== has)
      throw new KubeApiError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${at.resource} "${at.name ?? ''}": the object has ` +
          'been modified; please apply your changes to the latest version and try again',
      );
    const next =
      at.subresource === 'status'
        ? { ...current, status: body.status }
        : {
            ...body,
            metadata: { ...(body.metadata as JsonObject), uid: metaOf(current).uid },
            ...(current.status === undefined ? {} : { status: current.status }),
          };
    return this.store(client, 'PUT', path, at, current, next);
  }

  private remove(
    client: string,
    path: string,
    at: ApiPath,
    options: JsonObject | undefined,
  ): JsonObject {
    const current = this.get(at);
    const meta = metaOf(current);
    const preconditions = (options?.preconditions ?? {}) as { uid?: string };
    if (preconditions.uid !== undefined && preconditions.uid !== meta.uid)
      throw new KubeApiError(409, 'Conflict', `Precondition failed: UID in precondition differs`);
    const graceful = at.resource === 'v1/pods' && options?.gracePeriodSeconds !== 0;
    const bound = ((current.spec ?? {}) as { nodeName?: string }).nodeName !== undefined;
    const finalizers = (meta.finalizers ?? []) as string[];
    if (finalizers.length > 0 || (graceful && bound)) {
      if (meta.deletionTimestamp !== undefined) return current;
      const deletionTimestamp = new Date(this.clock.nowMs()).toISOString();
      const marked = { ...current, metadata: { ...meta, deletionTimestamp } };
      return this.store(client, 'DELETE', path, at, current, marked);
    }
    this.store(client, 'DELETE', path, at, current, undefined);
    return current;
  }

  /**
   * Stores `next` (absent: deleted) with a new resourceVersion, records the change and
   * hands it to the watches. An object marked deleted whose last finalizer went is deleted.
   */
  private store(
    client: string,
    method: string,
    path: string,
    at: ApiPath,
    before: JsonObject | undefined,
    next: JsonObject | undefined,
  ): JsonObject {
    const rv = ++this.rvNow;
    let after = next === undefined ? undefined : stored(next, rv);
    const finalizers = (o: JsonObject | undefined) => (metaOf(o ?? {}).finalizers ?? []) as [];
    const marked = after !== undefined && metaOf(after).deletionTimestamp !== undefined;
    if (marked && finalizers(before).length > 0 && finalizers(after).length === 0)
      after = undefined;
    const key = keyOf(at);
    if (after === undefined) this.objects.delete(key);
    else this.objects.set(key, after);
    const gone = before === undefined ? undefined : stored(before, rv);
    const change: KubeChange = {
      rv,
      resource: at.resource,
      ...(gone === undefined ? {} : { before: gone }),
      ...(after === undefined ? {} : { after }),
    };
    this.history.push(change);
    if (this.history.length > historyKept) {
      this.history.splice(0, this.history.length - historyKept);
      this.compactedRv = this.history[0]!.rv - 1;
    }
    const write = { atMs: this.clock.nowMs(), client, method, path, change };
    this.writes.push(write);
    this.onChange?.(write);
    for (const w of this.watchers) this.offer(w, change);
    return cloneJson(after ?? gone ?? {});
  }

  // --- watches ---

  /** A watch from `query.resourceVersion`: the changes since, then each new one. */
  watch(
    client: SimKubeClient,
    path: string,
    query: Record<string, string>,
    onEvent: WatchCallback,
    done: (error: unknown) => void,
  ): Promise<WatchHandle> {
    const at = parsePath(path);
    const watcher: Watcher = {
      client,
      resource: at.resource,
      namespace: at.namespace,
      selector: query.fieldSelector,
      onEvent,
      done,
      lastAtMs: this.clock.nowMs(),
      ended: false,
      aborted: false,
    };
    const handle = {
      abort: () => {
        watcher.aborted = true;
        this.watchers.delete(watcher);
      },
    };
    if (this.down || client.cut) {
      this.endWatch(watcher, new Error(`watch ${path}: no answer from the API server`));
      return Promise.resolve(handle);
    }
    const from = Number(query.resourceVersion ?? '0');
    this.watchers.add(watcher);
    if (from !== 0 && from < this.compactedRv) {
      const status = { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' };
      this.deliver(watcher, 'ERROR', status);
      this.endWatch(watcher, null);
      return Promise.resolve(handle);
    }
    for (const change of this.history) if (change.rv > from) this.offer(watcher, change);
    return Promise.resolve(handle);
  }

  private offer(w: Watcher, change: KubeChange): void {
    if (w.ended || change.resource !== w.resource) return;
    const fits = (o: JsonObject | undefined) =>
      o !== undefined && inNamespace(o, w.namespace) && matchesSelector(o, w.selector);
    const was = fits(change.before);
    const is = fits(change.after);
    if (is) this.deliver(w, was ? 'MODIFIED' : 'ADDED', change.after!);
    else if (was) this.deliver(w, 'DELETED', change.after ?? change.before!);
  }

  /** Delivered after a small drawn delay, in order; nothing after the watch ended. */
  private deliver(w: Watcher, type: string, object: JsonObject): void {
    const atMs = Math.max(w.lastAtMs, this.clock.nowMs() + Math.floor(this.random() * 10));
    w.lastAtMs = atMs;
    const copy = cloneJson(object);
    this.clock.setTimer(atMs, () => {
      if (!w.aborted && !w.client.killed) w.onEvent(type, copy);
    });
  }

  private endWatch(w: Watcher, error: Error | null): void {
    if (w.ended) return;
    w.ended = true;
    this.watchers.delete(w);
    const atMs = Math.max(w.lastAtMs, this.clock.nowMs()) + 1;
    this.clock.setTimer(atMs, () => {
      if (!w.aborted && !w.client.killed) w.done(error);
    });
  }

  /** Cuts the watches of one client (it was cut off or killed). */
  endWatchesOf(client: SimKubeClient): void {
    for (const w of [...this.watchers])
      if (w.client === client) this.endWatch(w, new Error('connection lost'));
  }

  private bookmarks(): void {
    this.clock.setTimer(this.clock.nowMs() + bookmarkEveryMs, () => {
      for (const w of this.watchers) {
        if (w.ended) continue;
        const metadata = { resourceVersion: String(this.rvNow) };
        this.deliver(w, 'BOOKMARK', { kind: 'Bookmark', metadata });
      }
      this.bookmarks();
    });
  }
}

/** One process's connection to the simulated server: the transport port. */
export class SimKubeClient implements KubeTransport {
  cut = false;
  killed = false;

  constructor(
    private readonly api: SimKubeApi,
    readonly name: string,
  ) {}

  /** Partitioned (`cut`), or back: its watches end when it is cut off. */
  setCut(cut: boolean): void {
    this.cut = cut;
    if (cut) this.api.endWatchesOf(this);
  }

  /** The process is gone: nothing is answered any more, its watches end. */
  kill(): void {
    this.killed = true;
    this.api.endWatchesOf(this);
  }

  get(path: string): Promise<JsonObject> {
    return this.api.request(this, 'GET', path);
  }

  post(path: string, body: unknown): Promise<JsonObject> {
    return this.api.request(this, 'POST', path, body);
  }

  put(path: string, body: unknown): Promise<JsonObject> {
    return this.api.request(this, 'PUT', path, body);
  }

  patch(path: string, body: unknown, type: PatchType): Promise<JsonObject> {
    return this.api.request(this, 'PATCH', path, body, type);
  }

  delete(path: string, body?: unknown): Promise<JsonObject> {
    return this.api.request(this, 'DELETE', path, body);
  }

  watch(
    path: string,
    query: Record<string, string>,
    onEvent: WatchCallback,
    done: (error: unknown) => void,
  ): Promise<WatchHandle> {
    if (this.killed) return new Promise<WatchHandle>(() => undefined);
    return this.api.watch(this, path, query, onEvent, done);
  }
}

const metaOf = (o: JsonObject) => (o.metadata ?? {}) as JsonObject & { uid?: string };

function keyOf(at: ApiPath): string {
  return `${at.resource}/${at.namespace ?? ''}/${at.name ?? ''}`;
}

function inNamespace(o: JsonObject, namespace: string | undefined): boolean {
  return namespace === undefined || metaOf(o).namespace === namespace;
}
