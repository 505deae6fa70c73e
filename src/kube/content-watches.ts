/**
 * The ConfigMaps and Secrets of the node's pods, watched one by one while some pod reads
 * them, as the kubelet's watch-based managers do (pkg/kubelet/util/manager/
 * watch_based_manager.go: objectCache.AddReference starts a reflector for one object by a
 * metadata.name field selector; DeleteReference stops it with the last reference and
 * deletes the cache entry with it).
 *
 * The cache entry here is the object in the log's world and its data in the agent's
 * contents store: what a pod's setUp reads. So when the last pod reading an object goes,
 * its watch stops and the object is forgotten with it (an ObjectRemoved). An object kept
 * past its watch would go stale: deleted on the API server unseen, and mounted into the
 * next pod that names it. For the same reason every list of a watch (its first, and each
 * relist after 410 Gone or a broken watch) forgets the object when the API server no
 * longer has it: it may have gone while nothing watched.
 */
import type { ApiObject, InformerHandlers } from './informer.js';
import { type ContentRef, contentRefKey } from './references.js';

/** One object's list+watch, as the agent starts it. */
export interface ContentWatch {
  /** Resolves after its first list was handed on. */
  readonly synced: Promise<void>;
  stop(): Promise<void>;
}

export interface ContentWatchesOptions {
  /** Starts the list+watch of one object (a `metadata.name=` field selector). */
  readonly start: (ref: ContentRef, handlers: Omit<InformerHandlers, 'trouble'>) => ContentWatch;
  /** The API server's version of a watched object: into the log, its data into contents. */
  readonly upsert: (raw: ApiObject) => void;
  /** The object is gone, or no longer watched: out of the world and the contents store. */
  readonly forget: (ref: ContentRef) => void;
}

interface Followed {
  readonly ref: ContentRef;
  /** Set as soon as it is started (a watch may hand on objects before it returns). */
  watch: ContentWatch;
  readonly pods: Set<string>;
}

const notStarted: ContentWatch = { synced: Promise.resolve(), stop: async () => undefined };

export class ContentWatches {
  private readonly byKey = new Map<string, Followed>();
  private readonly podRefs = new Map<string, string[]>();

  constructor(private readonly opts: ContentWatchesOptions) {}

  /**
   * The pod `uid` reads `refs` now (none: it is gone). Starts the watches it is the first
   * to need, stops (and forgets the objects of) those it was the last to read; returns
   * the watches of its objects, for the caller to wait until they are listed.
   */
  follow(uid: string, refs: readonly ContentRef[]): ContentWatch[] {
    const before = this.podRefs.get(uid) ?? [];
    const now = refs.map(contentRefKey);
    const watches = refs.map((ref) => this.reference(ref, uid).watch);
    for (const key of before) if (!now.includes(key)) this.release(key, uid);
    if (now.length === 0) this.podRefs.delete(uid);
    else this.podRefs.set(uid, now);
    return watches;
  }

  /** Is some pod's watch on this object? */
  follows(ref: ContentRef): boolean {
    return this.byKey.has(contentRefKey(ref));
  }

  /** Every watch started so far, listed once. */
  synced(): Promise<void> {
    return Promise.all([...this.byKey.values()].map((f) => f.watch.synced)).then(() => undefined);
  }

  async stop(): Promise<void> {
    const all = [...this.byKey.values()];
    this.byKey.clear();
    this.podRefs.clear();
    await Promise.all(all.map((f) => f.watch.stop()));
  }

  private reference(ref: ContentRef, uid: string): Followed {
    const key = contentRefKey(ref);
    const known = this.byKey.get(key);
    if (known !== undefined) {
      known.pods.add(uid);
      return known;
    }
    // The handlers act only while this watch is the object's: a stopped watch's late
    // event must not bring back an object that was forgotten.
    const current = () => this.byKey.get(key) === followed;
    const handlers: Omit<InformerHandlers, 'trouble'> = {
      upsert: (o) => {
        if (current()) this.opts.upsert(o);
      },
      remove: () => {
        if (current()) this.opts.forget(ref);
      },
      listed: (all) => {
        if (current() && !all.some((o) => o.metadata.name === ref.name)) this.opts.forget(ref);
      },
    };
    const followed: Followed = { ref, watch: notStarted, pods: new Set([uid]) };
    this.byKey.set(key, followed);
    followed.watch = this.opts.start(ref, handlers);
    return followed;
  }

  private release(key: string, uid: string): void {
    const known = this.byKey.get(key);
    if (known === undefined) return;
    known.pods.delete(uid);
    if (known.pods.size > 0) return;
    this.byKey.delete(key);
    void known.watch.stop();
    this.opts.forget(known.ref);
  }
}
