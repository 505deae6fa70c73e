/**
 * Objects the node may only get by name: the PersistentVolumeClaims and PersistentVolumes
 * of its pods and the VolumeAttachments of its attached CSI volumes. The Node authorizer
 * lets a kubelet `get` these one at a time and neither list nor watch them
 * (node_authorizer.go: authorizeGet, "can only get individual resources of this type"),
 * so the kubelet reads a pod's claim and volume when it processes the pod
 * (desired_state_of_world_populator.go: getPVCExtractPV) and polls a VolumeAttachment
 * (csi_attacher.go: waitForVolumeAttachment). Here each object is fetched when the first
 * owner (a pod, a claim, the Node) names it, again every `periodMs` while one does, and
 * forgotten with its last owner, or at once when the API server answers 404.
 */
import type { Clock, TimerHandle } from '../clock.js';
import { KubeApiError, type JsonObject } from './http.js';
import type { ApiObject } from './informer.js';

/** One object a node reads by name. */
export interface NamedRef {
  readonly kind: 'PersistentVolumeClaim' | 'PersistentVolume' | 'VolumeAttachment';
  readonly name: string;
  /** For claims: their namespace. */
  readonly namespace?: string;
}

export const namedRefKey = (ref: NamedRef): string =>
  `${ref.kind}/${ref.namespace ?? ''}/${ref.name}`;

/** The object's path on the API server. */
export function namedRefPath(ref: NamedRef): string {
  const name = encodeURIComponent(ref.name);
  if (ref.kind === 'VolumeAttachment') return `/apis/storage.k8s.io/v1/volumeattachments/${name}`;
  if (ref.kind === 'PersistentVolume') return `/api/v1/persistentvolumes/${name}`;
  const namespace = encodeURIComponent(ref.namespace ?? 'default');
  return `/api/v1/namespaces/${namespace}/persistentvolumeclaims/${name}`;
}

const apiVersions: Record<NamedRef['kind'], string> = {
  PersistentVolumeClaim: 'v1',
  PersistentVolume: 'v1',
  VolumeAttachment: 'storage.k8s.io/v1',
};

export interface NamedGetsOptions {
  readonly get: (path: string) => Promise<JsonObject>;
  readonly clock: Clock;
  /** When an object still named is fetched again, after this answer (undefined: none). */
  readonly periodMs: (ref: NamedRef, raw: JsonObject | undefined) => number;
  /** The object as the API server has it (kind and apiVersion set, managedFields gone). */
  readonly upsert: (raw: ApiObject) => void;
  /** It is gone (404), or no owner names it any more. */
  readonly forget: (ref: NamedRef) => void;
  /** A failed get, said once per failure; the object is fetched again next period. */
  readonly trouble: (message: string) => void;
}

interface Followed {
  readonly ref: NamedRef;
  readonly owners: Set<string>;
  /** Resolves after its first answer (the object, or 404). */
  readonly synced: Promise<void>;
  answered: () => void;
  timer: TimerHandle | null;
  /** The resourceVersion last handed on: the same object again is not handed on. */
  version: string | undefined;
}

export class NamedGets {
  private readonly byKey = new Map<string, Followed>();
  private readonly ownerRefs = new Map<string, string[]>();
  private stopped = false;

  constructor(private readonly opts: NamedGetsOptions) {}

  /** `owner` names `refs` now (none: it is gone); returns when each was first answered. */
  follow(owner: string, refs: readonly NamedRef[]): Promise<void> {
    const before = this.ownerRefs.get(owner) ?? [];
    const now = refs.map(namedRefKey);
    const synced = refs.map((ref) => this.reference(ref, owner).synced);
    for (const key of before) if (!now.includes(key)) this.release(key, owner);
    if (now.length === 0) this.ownerRefs.delete(owner);
    else this.ownerRefs.set(owner, now);
    return Promise.all(synced).then(() => undefined);
  }

  /** Does some owner name this object? */
  follows(ref: NamedRef): boolean {
    return this.byKey.has(namedRefKey(ref));
  }

  stop(): void {
    this.stopped = true;
    for (const followed of this.byKey.values())
      if (followed.timer) this.opts.clock.clearTimer(followed.timer);
    this.byKey.clear();
    this.ownerRefs.clear();
  }

  private reference(ref: NamedRef, owner: string): Followed {
    const key = namedRefKey(ref);
    const known = this.byKey.get(key);
    if (known !== undefined) {
      known.owners.add(owner);
      return known;
    }
    let answered = () => undefined as void;
    const synced = new Promise<void>((resolve) => (answered = resolve));
    const followed: Followed = {
      ref,
      owners: new Set([owner]),
      synced,
      answered,
      timer: null,
      version: undefined,
    };
    this.byKey.set(key, followed);
    void this.fetch(followed);
    return followed;
  }

  /** One get; its answer counts only while the object is still followed by this record. */
  private async fetch(followed: Followed): Promise<void> {
    const { ref } = followed;
    const current = () => !this.stopped && this.byKey.get(namedRefKey(ref)) === followed;
    let answer: JsonObject | undefined;
    try {
      answer = await this.opts.get(namedRefPath(ref));
      if (!current()) return;
      this.handOn(followed, answer);
    } catch (error) {
      if (!current()) return;
      if (error instanceof KubeApiError && error.statusCode === 404) {
        followed.version = undefined;
        this.opts.forget(ref);
        followed.answered();
      } else this.opts.trouble(`${ref.kind} ${ref.name}: ${(error as Error).message}`);
    }
    if (!current()) return;
    const { clock } = this.opts;
    followed.timer = clock.setTimer(clock.nowMs() + this.opts.periodMs(ref, answer), () => {
      followed.timer = null;
      void this.fetch(followed);
    });
  }

  private handOn(followed: Followed, raw: JsonObject): void {
    const { ref } = followed;
    const metadata = { ...(raw.metadata as ApiObject['metadata']) };
    delete metadata.managedFields;
    const version = metadata.resourceVersion;
    if (version === undefined || version !== followed.version) {
      followed.version = version;
      this.opts.upsert({ ...raw, kind: ref.kind, apiVersion: apiVersions[ref.kind], metadata });
    }
    followed.answered();
  }

  private release(key: string, owner: string): void {
    const known = this.byKey.get(key);
    if (known === undefined) return;
    known.owners.delete(owner);
    if (known.owners.size > 0) return;
    this.byKey.delete(key);
    if (known.timer !== null) this.opts.clock.clearTimer(known.timer);
    this.opts.forget(known.ref);
  }
}
