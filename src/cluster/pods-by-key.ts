/**
 * The pods an informer lists under a prefix, by etcd key: which pod UID each key holds now.
 * A node agent and the controller both turn the informer's list, put and delete into their
 * manager's pod calls through it; a key whose pod was replaced (a new UID) removes the old pod.
 */
import type { Pod } from '../events/k8s.js';
import { flat } from '../desired/flat.js';
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

/**
 * A pod key split at its last `/`: the folder (`…pods/node/namespace`, one string for all
 * the pods of a node and namespace) and the name.
 */
function splitKey(key: string): { folder: string; name: string } {
  const at = key.lastIndexOf('/');
  return { folder: key.slice(0, at), name: key.slice(at + 1) };
}

export class PodsByKey {
  /**
   * The UIDs by key, as folder → name → UID: a map of whole keys held a copy of each key
   * (56 bytes for a 10-character name) in an entry of one large map, where each folder's
   * string is held once and each name is the pod's own (`name` of `know`, the decoded
   * pod's): 125 → 72 bytes a pod (test/cluster/pods-by-key.unit.test.ts).
   */
  private readonly uids = new Map<string, Map<string, string>>();

  /** `decode`: how pods are decoded (the controller's inputs compact only those they keep). */
  constructor(
    private readonly target: PodTarget,
    private readonly decode: DecodeOptions = {},
  ) {}

  /** A pod the manager already knows (from its log) under `key`; `name` is its pod's name. */
  know(key: string, uid: string, name: string): void {
    this.set(key, name, uid);
  }

  /** The informer's handlers for the pods' prefix. */
  handlers(): Pick<PrefixHandlers, 'reset' | 'put' | 'delete'> {
    return {
      reset: (kvs) => this.reset(kvs),
      put: (kv) => void this.put(kv),
      delete: (key) => this.delete(key),
    };
  }

  /** How many keys it holds a UID for (for tests). */
  get size(): number {
    let count = 0;
    for (const names of this.uids.values()) count += names.size;
    return count;
  }

  private async reset(kvs: readonly KeyValue[]): Promise<void> {
    const listed = new Set<string>();
    await eachInTurns(kvs, (kv) => {
      if (this.put(kv)) listed.add(kv.key.toString());
    });
    const gone: string[] = [];
    for (const [folder, names] of this.uids)
      for (const name of names.keys()) {
        const key = `${folder}/${name}`;
        if (!listed.has(key)) gone.push(key);
      }
    for (const key of gone) this.delete(key);
  }

  private put(kv: KeyValue): boolean {
    const decoded = decodePod(kv, this.decode);
    if (!decoded.ok) {
      this.target.say(`skipped ${decoded.message}`);
      return false;
    }
    const key = kv.key.toString();
    const uid = decoded.value.metadata.uid!;
    const previous = this.get(key);
    if (previous !== undefined && previous !== uid) this.delete(key);
    this.set(key, decoded.value.metadata.name, uid);
    this.target.add(decoded.value);
    return true;
  }

  private delete(key: string): void {
    const { folder, name } = splitKey(key);
    const names = this.uids.get(folder);
    const uid = names?.get(name);
    if (names === undefined || uid === undefined) return;
    names.delete(name);
    if (names.size === 0) this.uids.delete(folder);
    this.target.remove(uid);
  }

  private get(key: string): string | undefined {
    const { folder, name } = splitKey(key);
    return this.uids.get(folder)?.get(name);
  }

  /**
   * Holds `uid` under `key`, by the pod's own name string when the key ends with it (a
   * slice of the key would hold the whole key), and its folder flat (src/desired/flat.ts).
   */
  private set(key: string, podName: string, uid: string): void {
    const split = splitKey(key);
    const name = split.name === podName ? podName : split.name;
    let names = this.uids.get(split.folder);
    if (names === undefined) this.uids.set(flat(split.folder), (names = new Map()));
    names.set(name, uid);
  }
}
