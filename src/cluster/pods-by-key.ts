/**
 * The pods an informer lists under a prefix, by etcd key: which pod UID each key holds now.
 * A node agent and the controller both turn the informer's list, put and delete into their
 * manager's pod calls through it; a key whose pod was replaced (a new UID) removes the old pod.
 */
import type { Pod } from '../events/k8s.js';
import { flat } from '../world/flat.js';
import { eachInTurns, type PrefixHandlers } from './informer.js';
import { type DecodeOptions, decodePod } from './objects.js';
import type { KeyValue } from './store.js';

export interface PodTarget {
  /** The pod (new or changed) under its key; not compacted when the decode options say so. */
  add(pod: Pod): void;
  /** The pod of this UID is gone. */
  remove(uid: string): void;
  say(line: string): void;
}

export class PodsByKey {
  private readonly uids = new Map<string, string>();

  /** `decode`: how pods are decoded (the controller's inputs compact only those they keep). */
  constructor(
    private readonly target: PodTarget,
    private readonly decode: DecodeOptions = {},
  ) {}

  /**
   * A pod the manager already knows (from its log) under `key`. Kept flat (src/world/flat.ts):
   * a key built from the pod's node, namespace and name is a tree of its parts, and a map
   * keeps the first key of an entry (291 → 98 bytes a pod with its entry, measured).
   */
  know(key: string, uid: string): void {
    this.uids.set(flat(key), uid);
  }

  /** The informer's handlers for the pods' prefix. */
  handlers(): Pick<PrefixHandlers, 'reset' | 'put' | 'delete'> {
    return {
      reset: (kvs) => this.reset(kvs),
      put: (kv) => void this.put(kv),
      delete: (key) => this.delete(key),
    };
  }

  private async reset(kvs: readonly KeyValue[]): Promise<void> {
    const listed = new Set<string>();
    await eachInTurns(kvs, (kv) => {
      if (this.put(kv)) listed.add(kv.key.toString());
    });
    for (const key of [...this.uids.keys()]) if (!listed.has(key)) this.delete(key);
  }

  private put(kv: KeyValue): boolean {
    const decoded = decodePod(kv, this.decode);
    if (!decoded.ok) {
      this.target.say(`skipped ${decoded.message}`);
      return false;
    }
    const key = kv.key.toString();
    const uid = decoded.value.metadata.uid!;
    const previous = this.uids.get(key);
    if (previous !== undefined && previous !== uid) this.delete(key);
    this.uids.set(key, uid);
    this.target.add(decoded.value);
    return true;
  }

  private delete(key: string): void {
    const uid = this.uids.get(key);
    if (uid === undefined) return;
    this.uids.delete(key);
    this.target.remove(uid);
  }
}
