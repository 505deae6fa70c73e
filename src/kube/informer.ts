/**
 * One list+watch of an API resource (client-node's ListWatch: watch from the list's
 * resourceVersion, list again on 410 Gone), handing plain objects on: `kind` and
 * `apiVersion` filled in (a list's items lack them), `managedFields` dropped (bookkeeping
 * of the API server's, large, and of no use to a post-mortem). A watch that ends with any
 * other error is started again after a pause, forever, until stopped.
 */
import { KubeConfig, ListWatch, Watch } from '@kubernetes/client-node';
import type { Clock, TimerHandle } from '../clock.js';
import { kubeInformerRetryMs } from '../constants.js';
import type { JsonObject, KubeTransport, WatchCallback } from './http.js';

/** A Kubernetes object as the API gave it (only metadata is relied on here). */
export interface ApiObject {
  kind: string;
  apiVersion: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

/** How an object change was seen: in a (re)list, or as a watch event. */
export type SeenVia = 'list' | 'watch';

export interface InformerHandlers {
  upsert(object: ApiObject, via?: SeenVia): void;
  remove(object: ApiObject, via?: SeenVia): void;
  /** After each successful list: every object the API server listed (a relist after 410 too). */
  listed?(objects: readonly ApiObject[]): void;
  trouble(message: string): void;
}

export interface ResourceRef {
  /** The collection's path, e.g. `/api/v1/pods` or `/apis/storage.k8s.io/v1/csidrivers`. */
  readonly path: string;
  readonly kind: string;
  readonly apiVersion: string;
  readonly fieldSelector?: string;
}

/** The object as handed on: kind and apiVersion set, managedFields gone. */
function plainObject(raw: JsonObject, ref: Pick<ResourceRef, 'kind' | 'apiVersion'>): ApiObject {
  const metadata = { ...(raw.metadata as ApiObject['metadata']) };
  delete metadata.managedFields;
  return { ...raw, kind: ref.kind, apiVersion: ref.apiVersion, metadata };
}

/** ListWatch's Watch, its streams taken from the transport (the real API or the simulator's). */
class TransportWatch extends Watch {
  constructor(private readonly http: KubeTransport) {
    super(new KubeConfig());
  }

  override watch(
    path: string,
    query: Record<string, string | number | boolean | undefined>,
    callback: WatchCallback,
    done: (error: unknown) => void,
  ): Promise<AbortController> {
    const params: Record<string, string> = {};
    for (const [key, value] of Object.entries(query))
      if (value !== undefined) params[key] = String(value);
    const controller = new AbortController();
    return this.http.watch(path, params, callback, done).then((handle) => {
      controller.signal.addEventListener('abort', () => handle.abort(), { once: true });
      return controller;
    });
  }
}

export class KubeInformer {
  private readonly lw: ListWatch<ApiObject>;
  private stopped = false;
  private retryTimer: TimerHandle | null = null;
  private syncedOnce = false;
  /** True while a list's objects are handed on (ListWatch does so as the list returns). */
  private listing = false;
  private resolveSynced: () => void = () => undefined;
  /** Resolves after the first successful list (and its objects were handed on). */
  readonly synced: Promise<void>;

  constructor(
    http: KubeTransport,
    private readonly clock: Clock,
    private readonly ref: ResourceRef,
    private readonly handlers: InformerHandlers,
  ) {
    this.synced = new Promise((resolve) => (this.resolveSynced = resolve));
    const query =
      ref.fieldSelector === undefined
        ? ''
        : `?fieldSelector=${encodeURIComponent(ref.fieldSelector)}`;
    const list = async () => {
      const answer = await http.get(`${ref.path}${query}`);
      const items = ((answer.items ?? []) as JsonObject[]).map((item) => plainObject(item, ref));
      const metadata = (answer.metadata ?? {}) as { resourceVersion?: string };
      // ListWatch hands the items on synchronously once this resolves, before any watch
      // is sent: the next turn of the event loop is past them.
      this.listing = true;
      setImmediate(() => (this.listing = false));
      return { items, metadata: { resourceVersion: metadata.resourceVersion ?? '' } };
    };
    this.lw = new ListWatch<ApiObject>(
      ref.path,
      new TransportWatch(http),
      list,
      false,
      undefined,
      ref.fieldSelector,
    );
    const plain = (o: ApiObject) => plainObject(o as unknown as JsonObject, ref);
    // Nothing is handed on once stop() began: a list or watch answering while ListWatch
    // stops would reach an engine stopped at once (a damaged log, a blocked one abandoned).
    const unlessStopped = (fn: () => void) => {
      if (!this.stopped) fn();
    };
    const via = (): SeenVia => (this.listing ? 'list' : 'watch');
    this.lw.on('add', (o) => unlessStopped(() => handlers.upsert(plain(o), via())));
    this.lw.on('update', (o) => unlessStopped(() => handlers.upsert(plain(o), via())));
    this.lw.on('delete', (o) => unlessStopped(() => handlers.remove(plain(o), via())));
    this.lw.on('error', (error: unknown) => this.failed(error));
  }

  async start(): Promise<void> {
    this.stopped = false;
    await this.attempt();
  }

  private async attempt(): Promise<void> {
    let failed = false;
    const onError = () => (failed = true);
    this.lw.on('error', onError);
    try {
      await this.lw.start();
    } finally {
      this.lw.off('error', onError);
    }
    if (failed || this.stopped) return;
    this.handlers.listed?.(this.lw.list());
    if (!this.syncedOnce) {
      this.syncedOnce = true;
      this.resolveSynced();
    }
  }

  private failed(error: unknown): void {
    if (this.stopped) return;
    const message = error instanceof Error ? error.message : JSON.stringify(error);
    this.handlers.trouble(
      `${this.ref.kind} watch: ${message}; listing again in ${kubeInformerRetryMs} ms`,
    );
    if (this.retryTimer !== null) return;
    this.retryTimer = this.clock.setTimer(this.clock.nowMs() + kubeInformerRetryMs, () => {
      this.retryTimer = null;
      if (!this.stopped) void this.attempt();
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer !== null) this.clock.clearTimer(this.retryTimer);
    await this.lw.stop();
  }
}

/** What an informer's object handlers call: the taker of one kind of object into a log. */
export interface ObjectTaker<K extends string> {
  upsertObject(raw: ApiObject): void;
  removeObject(raw: ApiObject): void;
  dropUnlisted(kind: K, listed: readonly ApiObject[]): void;
}

/** The handlers of an informer whose objects of `kind` go to `taker`. */
export function objectHandlers<K extends string>(
  taker: ObjectTaker<K>,
  kind: K,
): Omit<InformerHandlers, 'trouble'> {
  return {
    upsert: (o) => taker.upsertObject(o),
    remove: (o) => taker.removeObject(o),
    listed: (all) => taker.dropUnlisted(kind, all),
  };
}

/** Starts an informer whose trouble is said as the API server's (a progress line). */
export function startInformer(
  api: { readonly http: KubeTransport; readonly clock: Clock },
  ref: ResourceRef,
  handlers: Omit<InformerHandlers, 'trouble'>,
  say: (line: string) => void,
): KubeInformer {
  const informer = new KubeInformer(api.http, api.clock, ref, {
    ...handlers,
    trouble: (message) => say(`kube-apiserver: ${message}`),
  });
  void informer.start();
  return informer;
}

/** A collection of the core API group (`/api/v1/…`). */
export const coreRef = (path: string, kind: string, fieldSelector?: string): ResourceRef => ({
  path: `/api/v1/${path}`,
  kind,
  apiVersion: 'v1',
  ...(fieldSelector === undefined ? {} : { fieldSelector }),
});

/** A collection of storage.k8s.io/v1. */
export const storageRef = (path: string, kind: string): ResourceRef => ({
  path: `/apis/storage.k8s.io/v1/${path}`,
  kind,
  apiVersion: 'storage.k8s.io/v1',
});
