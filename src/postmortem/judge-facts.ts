/**
 * What a recorded cluster's log says of its nodes, claims, PersistentVolumes,
 * VolumeAttachments and pods, kept up to date event by event: the facts `vole judge`
 * holds the real controllers' decisions against. It reads the objects as the API server
 * served them (never vole's own operations), so it judges any cluster's log.
 */
import type { VoleEvent } from '../events/index.js';
import type {
  ClusterObject,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  VolumeAttachment,
} from '../events/k8s.js';
import { objectKey } from '../events/k8s.js';
import { csiVolumeName } from '../binding/provisioning.js';

/** When a fact was seen: the event's seq and its time (ms, the log's clock). */
export interface Seen {
  readonly seq: number;
  readonly tsMs: number;
}

/** The taint the attach/detach controller lets detach a node's volumes at once. */
export const outOfServiceTaint = 'node.kubernetes.io/out-of-service';

export interface NodeFacts {
  readonly exists: boolean;
  /** The Ready condition: true, false (False or Unknown), or undefined when not reported. */
  readonly ready: boolean | undefined;
  /** The event that last changed `ready` (NotReady since, Ready since). */
  readonly readySince: Seen;
  /** node.status.volumesInUse as the kubelet last published it, and that status's event. */
  readonly volumesInUse: ReadonlySet<string>;
  readonly inUseSeen: Seen;
  /** node.status.volumesAttached as the attach/detach controller last published it. */
  readonly volumesAttached: ReadonlySet<string>;
  readonly outOfService: boolean;
}

/** A VolumeAttachment as last seen: its PV, node, status.attached and deletion. */
export interface AttachmentFacts {
  readonly name: string;
  readonly pv: string;
  readonly node: string;
  readonly attached: boolean;
  /** Since when `attached` holds its value (the VolumeAttachment's creation at first). */
  readonly since: Seen;
  readonly deleting: Seen | null;
  readonly attachError: string | null;
}

/** A Kubernetes Event a recorded log holds (KubeEventObserved). */
export interface KubeEventFact {
  readonly seq: number;
  readonly tsMs: number;
  readonly reason: string;
  readonly message: string;
  readonly component: string;
}

export interface PodFacts {
  readonly uid: string;
  /** status.phase as last seen (null: not reported). */
  readonly phase: string | null;
  readonly namespace: string;
  readonly name: string;
  readonly node: string | null;
  /** Each PersistentVolumeClaim volume: its name in the pod and the claim. */
  readonly claims: readonly { readonly outer: string; readonly claim: string }[];
  readonly firstSeen: Seen;
  readonly lastSeen: Seen;
  /**
   * When the pod first stopped needing its volumes on its node: deletionTimestamp seen, a
   * terminal phase, or its removal. The earliest such moment, so that the time a detach
   * waited is never under-counted.
   */
  readonly goneAt: Seen | null;
  /**
   * Terminating: when its deletionTimestamp was first seen, and the deletionTimestamp itself
   * (ms: the end of its grace period, by which the kubelet should have let it go).
   */
  readonly deleting: { readonly at: Seen; readonly graceEndsMs: number } | null;
  /** When the API server removed it. */
  readonly removedAt: Seen | null;
}

/** A volume that became attached to a node, or whose detach began there. */
export interface AttachChange {
  readonly change: 'attached' | 'detachStarted';
  readonly pv: string;
  readonly node: string;
  /** What says so: a VolumeAttachment (its name), or the node's volumesAttached. */
  readonly via: { readonly kind: 'VolumeAttachment' | 'volumesAttached'; readonly name: string };
  readonly at: Seen;
  /** Since when the volume was attached there (for detachStarted). */
  readonly attachedSince: Seen;
}

const emptySet: ReadonlySet<string> = new Set();
const never: Seen = { seq: 0, tsMs: 0 };

function readyOf(node: Node): boolean | undefined {
  const condition = node.status?.conditions?.find((c) => c.type === 'Ready');
  return condition === undefined ? undefined : condition.status === 'True';
}

/** The recorded facts of a cluster, folded event by event. */
export class RecordedFacts {
  readonly nodes = new Map<string, NodeFacts>();
  readonly pvs = new Map<string, PersistentVolume>();
  readonly claims = new Map<string, PersistentVolumeClaim>();
  readonly storageClasses = new Map<string, ClusterObject>();
  readonly csiDrivers = new Map<string, ClusterObject>();
  readonly attachments = new Map<string, AttachmentFacts>();
  readonly pods = new Map<string, PodFacts>();
  /** PVs a VolumeAttachment ever named: their attachments are the VolumeAttachments'. */
  readonly pvsWithAttachments = new Set<string>();
  /** Since when each volume has been in a node's volumesAttached (`pv|node`). */
  private readonly listedSince = new Map<string, Seen>();
  private readonly pvOfUnique = new Map<string, string>();
  /** When each object was last changed: `Kind/namespace/name` (objectKey). */
  readonly objectSeen = new Map<string, Seen>();
  /** Kubernetes Events by their involved object (`Kind/namespace/name`), oldest first. */
  readonly kubeEvents = new Map<string, KubeEventFact[]>();
  last: Seen = never;
  first: Seen | null = null;

  /** Folds one event in; returns the attachments it made or the detaches it began. */
  apply(event: VoleEvent): AttachChange[] {
    const at = { seq: event.seq, tsMs: event.tsMs };
    this.first ??= at;
    this.last = at;
    switch (event.type) {
      case 'ObjectUpserted':
        return this.upsert(event.object, at);
      case 'ObjectRemoved':
        return this.remove(event.kind, event.name, event.namespace, at);
      case 'PodUpserted':
        this.upsertPod(event.pod, at);
        return [];
      case 'PodRemoved':
        this.removePod(event.uid, at);
        return [];
      case 'KubeEventObserved': {
        const { kind, namespace = '', name } = event.involvedObject;
        const key = `${kind}/${namespace}/${name}`;
        const list = this.kubeEvents.get(key) ?? [];
        list.push({
          ...at,
          reason: event.reason,
          message: event.message,
          component: event.component,
        });
        this.kubeEvents.set(key, list);
        return [];
      }
      case 'NodeStatusObserved':
        return this.listAttached(event.node, new Set(event.volumesAttached.map((v) => v.name)), at);
      default:
        return [];
    }
  }

  /** The latest Kubernetes Event about the object with one of these reasons, if any. */
  latestKubeEvent(
    involved: { kind: string; namespace?: string; name: string },
    reason: (reason: string, message: string) => boolean,
  ): KubeEventFact | undefined {
    const list = this.kubeEvents.get(
      `${involved.kind}/${involved.namespace ?? ''}/${involved.name}`,
    );
    return [...(list ?? [])].reverse().find((e) => reason(e.reason, e.message));
  }

  /** `kubernetes.io/csi/<driver>^<handle>`: how nodes list the PV; undefined if not CSI. */
  uniqueNameOf(pv: string): string | undefined {
    const csi = this.pvs.get(pv)?.spec.csi;
    return csi?.volumeHandle === undefined
      ? undefined
      : csiVolumeName(csi.driver, csi.volumeHandle);
  }

  /** The nodes the PV is attached to now, each with what says so and since when. */
  attachedNodes(pv: string): Map<string, { via: AttachChange['via']; since: Seen }> {
    const nodes = new Map<string, { via: AttachChange['via']; since: Seen }>();
    if (this.pvsWithAttachments.has(pv)) {
      for (const a of this.attachments.values())
        if (a.pv === pv && a.attached)
          nodes.set(a.node, { via: { kind: 'VolumeAttachment', name: a.name }, since: a.since });
      return nodes;
    }
    const unique = this.uniqueNameOf(pv);
    if (unique === undefined) return nodes;
    for (const [name, node] of this.nodes)
      if (node.volumesAttached.has(unique))
        nodes.set(name, {
          via: { kind: 'volumesAttached', name },
          since: this.listedSince.get(`${pv}|${name}`) ?? never,
        });
    return nodes;
  }

  /** The PV a pod's claim is bound to, if the claim names one. */
  pvOfClaim(namespace: string, claim: string): string | undefined {
    return this.claims.get(`${namespace}/${claim}`)?.spec.volumeName || undefined;
  }

  /** Does the CSI driver need its volumes attached? (no CSIDriver object: yes, as in Kubernetes) */
  attachRequired(pv: string): boolean {
    const spec = this.pvs.get(pv)?.spec;
    if (spec?.csi === undefined) return false;
    const driver = this.csiDrivers.get(spec.csi.driver);
    return driver?.kind !== 'CSIDriver' || driver.spec?.attachRequired !== false;
  }

  private upsert(object: ClusterObject, at: Seen): AttachChange[] {
    const name = object.metadata.name;
    this.objectSeen.set(objectKey(object.kind, name, object.metadata.namespace), at);
    switch (object.kind) {
      case 'PersistentVolume': {
        this.pvs.set(name, object);
        const unique = this.uniqueNameOf(name);
        if (unique !== undefined) this.pvOfUnique.set(unique, name);
        return [];
      }
      case 'PersistentVolumeClaim':
        this.claims.set(`${object.metadata.namespace ?? 'default'}/${name}`, object);
        return [];
      case 'StorageClass':
        this.storageClasses.set(name, object);
        return [];
      case 'CSIDriver':
        this.csiDrivers.set(name, object);
        return [];
      case 'Node':
        return this.upsertNode(object, at);
      case 'VolumeAttachment':
        return this.upsertAttachment(object, at);
      default:
        return [];
    }
  }

  private remove(kind: string, name: string, namespace: string | undefined, at: Seen) {
    if (kind === 'VolumeAttachment') return this.removeAttachment(name, at);
    if (kind === 'PersistentVolume') this.pvs.delete(name);
    if (kind === 'PersistentVolumeClaim') this.claims.delete(`${namespace ?? 'default'}/${name}`);
    if (kind === 'StorageClass') this.storageClasses.delete(name);
    if (kind === 'CSIDriver') this.csiDrivers.delete(name);
    if (kind !== 'Node') return [];
    const node = this.nodes.get(name);
    if (node !== undefined)
      this.nodes.set(name, {
        ...node,
        exists: false,
        ready: false,
        readySince: node.ready === false ? node.readySince : at,
      });
    return [];
  }

  private upsertNode(object: Node, at: Seen): AttachChange[] {
    const name = object.metadata.name;
    const before = this.nodes.get(name);
    const ready = readyOf(object);
    const inUse = new Set(object.status?.volumesInUse ?? []);
    this.nodes.set(name, {
      exists: true,
      ready,
      readySince: before !== undefined && before.ready === ready ? before.readySince : at,
      volumesInUse: inUse,
      inUseSeen: at,
      volumesAttached: before?.volumesAttached ?? emptySet,
      outOfService: (object.spec?.taints ?? []).some((t) => t.key === outOfServiceTaint),
    });
    const listed = object.status?.volumesAttached;
    return listed === undefined
      ? []
      : this.listAttached(name, new Set(listed.map((v) => v.name)), at);
  }

  /** A node's volumesAttached changed: attachments and detaches of PVs with no VolumeAttachment. */
  private listAttached(name: string, listed: ReadonlySet<string>, at: Seen): AttachChange[] {
    const before = this.nodes.get(name) ?? {
      exists: true,
      ready: undefined,
      readySince: at,
      volumesInUse: emptySet,
      inUseSeen: never,
      volumesAttached: emptySet,
      outOfService: false,
    };
    this.nodes.set(name, { ...before, volumesAttached: listed });
    const changes: AttachChange[] = [];
    const via = { kind: 'volumesAttached' as const, name };
    for (const unique of new Set([...before.volumesAttached, ...listed])) {
      const pv = this.pvOfUnique.get(unique);
      const was = before.volumesAttached.has(unique);
      if (pv === undefined || was === listed.has(unique)) continue;
      const key = `${pv}|${name}`;
      const since = this.listedSince.get(key) ?? at;
      if (was) this.listedSince.delete(key);
      else this.listedSince.set(key, at);
      if (this.pvsWithAttachments.has(pv)) continue;
      changes.push({
        change: was ? 'detachStarted' : 'attached',
        pv,
        node: name,
        via,
        at,
        attachedSince: since,
      });
    }
    return changes;
  }

  private upsertAttachment(object: VolumeAttachment, at: Seen): AttachChange[] {
    const name = object.metadata.name;
    const pv = object.spec.source.persistentVolumeName;
    if (pv === undefined) return [];
    this.pvsWithAttachments.add(pv);
    const before = this.attachments.get(name);
    const attached = object.status?.attached === true;
    const deleting =
      before?.deleting ?? (object.metadata.deletionTimestamp === undefined ? null : at);
    const error = (object.status as { attachError?: { message?: unknown } } | undefined)
      ?.attachError?.message;
    const next: AttachmentFacts = {
      name,
      pv,
      node: object.spec.nodeName,
      attached,
      since: before === undefined || before.attached !== attached ? at : before.since,
      deleting,
      attachError: typeof error === 'string' ? error : null,
    };
    this.attachments.set(name, next);
    const via = { kind: 'VolumeAttachment' as const, name };
    const base = { pv, node: next.node, via, at };
    const wasAttached = before?.attached === true;
    if (attached && !wasAttached && deleting === null)
      return [{ change: 'attached', ...base, attachedSince: at }];
    // The controller's detach of a CSI volume is the VolumeAttachment's deletion; a status
    // turned false without one is a detach too. Either counts once per attachment.
    const detachBegins =
      wasAttached && ((before.deleting === null && deleting !== null) || !attached);
    if (detachBegins && before.deleting === null)
      return [{ change: 'detachStarted', ...base, attachedSince: before.since }];
    return [];
  }

  private removeAttachment(name: string, at: Seen): AttachChange[] {
    const before = this.attachments.get(name);
    this.attachments.delete(name);
    if (before === undefined || !before.attached || before.deleting !== null) return [];
    const via = { kind: 'VolumeAttachment' as const, name };
    return [
      {
        change: 'detachStarted',
        pv: before.pv,
        node: before.node,
        via,
        at,
        attachedSince: before.since,
      },
    ];
  }

  private upsertPod(pod: Pod, at: Seen): void {
    const { name, namespace = 'default' } = pod.metadata;
    const uid = pod.metadata.uid ?? `${namespace}/${name}`;
    const before = this.pods.get(uid);
    const phase = pod.status?.phase;
    const going =
      pod.metadata.deletionTimestamp !== undefined || phase === 'Succeeded' || phase === 'Failed';
    const claims = (pod.spec.volumes ?? []).flatMap((v) =>
      v.persistentVolumeClaim === undefined
        ? []
        : [{ outer: v.name, claim: v.persistentVolumeClaim.claimName }],
    );
    this.pods.set(uid, {
      uid,
      phase: phase ?? null,
      namespace,
      name,
      node: pod.spec.nodeName ?? null,
      claims,
      firstSeen: before?.firstSeen ?? at,
      lastSeen: at,
      goneAt: before?.goneAt ?? (going ? at : null),
      deleting: before?.deleting ?? deletingOf(pod, at),
      removedAt: null,
    });
  }

  private removePod(uid: string, at: Seen): void {
    const before = this.pods.get(uid);
    if (before !== undefined)
      this.pods.set(uid, {
        ...before,
        lastSeen: at,
        goneAt: before.goneAt ?? at,
        removedAt: at,
      });
  }
}

/** The pod's deletion as first seen: when, and the end of its grace period. */
function deletingOf(pod: Pod, at: Seen): PodFacts['deleting'] {
  const stamp = pod.metadata.deletionTimestamp;
  if (stamp === undefined) return null;
  const graceEndsMs = Date.parse(stamp);
  return { at, graceEndsMs: Number.isNaN(graceEndsMs) ? at.tsMs : graceEndsMs };
}

/** HH:MM:SS (UTC) of a time of the log. */
export function clockOf(tsMs: number): string {
  return new Date(tsMs).toISOString().slice(11, 19);
}

/** May the PV be attached to one node only? (Kubernetes' isMultiAttachAllowed, negated) */
export function singleNodeOnly(facts: RecordedFacts, pv: string): boolean {
  const modes = facts.pvs.get(pv)?.spec.accessModes ?? [];
  if (modes.length === 0) return false;
  return !modes.some((m) => m === 'ReadWriteMany' || m === 'ReadOnlyMany');
}

/**
 * When the detach of the PV from the node was first wanted: the moment the last pod there
 * that used it went. `wanted`: a pod there still uses it; null: no such pod in the log.
 */
export function detachRequestedAt(
  facts: RecordedFacts,
  pv: string,
  node: string,
): Seen | 'wanted' | null {
  let latest: Seen | null = null;
  for (const pod of facts.pods.values()) {
    if (pod.node !== node) continue;
    if (!pod.claims.some((c) => facts.pvOfClaim(pod.namespace, c.claim) === pv)) continue;
    if (pod.goneAt === null) return 'wanted';
    if (latest === null || pod.goneAt.tsMs > latest.tsMs) latest = pod.goneAt;
  }
  return latest;
}
