/**
 * For every pod of a recorded cluster that waited on a volume: the condition that held
 * it (a claim not bound, Multi-Attach, an attach not confirmed, a NotReady node, …), the
 * events that prove it, and when it would have cleared by Kubernetes' own rules. Evaluated
 * after every event of the log, so each wait has its start, its end and, of the
 * conditions it went through, the one that held it longest.
 */
import type { VoleEvent } from '../events/index.js';
import { objectKey } from '../events/k8s.js';
import {
  clockOf,
  detachRequestedAt,
  type PodFacts,
  type RecordedFacts,
  type Seen,
  singleNodeOnly,
} from './judge-facts.js';

export interface Holding {
  readonly kind:
    | 'claimMissing'
    | 'claimPending'
    | 'unscheduled'
    | 'multiAttach'
    | 'attachPending'
    | 'notAttached'
    | 'nodeNotReady'
    | 'mountFailed'
    | 'teardownPending'
    | 'teardownNodeNotReady';
  /** The volume's name in the pod, and the PersistentVolume once the claim names one. */
  readonly outerVolumeSpecName: string;
  readonly volume: string | null;
  readonly message: string;
  /** The events that prove it, in seq order. */
  readonly proofSeqs: readonly number[];
  /** When it would have cleared by itself (ms, the log's clock); null: not by itself. */
  readonly clearsAtMs: number | null;
  /** What clears it. */
  readonly clears: string;
  /** The latest Kubernetes Event that tells of it (a recorded log's KubeEventObserved). */
  readonly kubeEvent?: { readonly seq: number; readonly reason: string; readonly message: string };
}

export interface HeldSpan extends Holding {
  /** When this condition first held the pod in this wait. */
  readonly sinceSeq: number;
  readonly sinceTsMs: number;
  /** How long it held the pod in all (ms). */
  readonly heldMs: number;
}

export interface PodVerdict {
  /** `namespace/name`. */
  readonly pod: string;
  /**
   * What the pod waited for: its volumes, to start; or, Terminating past its grace period,
   * its node to tear its volumes down so that it can be deleted.
   */
  readonly waitedFor: 'volumes' | 'teardown';
  readonly uid: string;
  readonly node: string | null;
  readonly waitedFromSeq: number;
  readonly waitedFromTsMs: number;
  /**
   * How the wait ended: every volume attached (and, where the log has the kubelet's
   * Events, no FailedMount since while the pod is Pending), the pod gone, its volumes torn
   * down (a teardown wait), or not before the log ends.
   */
  readonly endedBy: 'ready' | 'podGone' | 'tornDown' | null;
  readonly endedAtSeq: number | null;
  readonly endedAtTsMs: number | null;
  /** The condition that held the pod longest in this wait. */
  readonly held: HeldSpan;
  readonly conditions: readonly HeldSpan[];
}

const proofs = (...seqs: (number | undefined)[]) =>
  [...new Set(seqs.filter((s): s is number => s !== undefined && s > 0))].sort((a, b) => a - b);

function claimHolding(facts: RecordedFacts, pod: PodFacts, outer: string, claim: string) {
  const key = `${pod.namespace}/${claim}`;
  const pvc = facts.claims.get(key);
  const base = { outerVolumeSpecName: outer, volume: null };
  if (pvc === undefined)
    return {
      ...base,
      kind: 'claimMissing',
      message: `claim ${key} does not exist`,
      proofSeqs: proofs(pod.firstSeen.seq),
      clearsAtMs: null,
      clears: `when claim ${key} is created`,
    } satisfies Holding;
  const phase = pvc.status?.phase ?? 'Pending';
  const className = pvc.spec.storageClassName;
  const sc = className === undefined ? undefined : facts.storageClasses.get(className);
  const why =
    className === undefined || className === ''
      ? 'it names no StorageClass and no PersistentVolume matches it'
      : sc?.kind !== 'StorageClass'
        ? `StorageClass ${className} does not exist`
        : `StorageClass ${className} names provisioner ${sc.provisioner}, which has made no PersistentVolume for it`;
  const seenClaim = facts.objectSeen.get(objectKey('PersistentVolumeClaim', claim, pod.namespace));
  const seenClass =
    className === undefined
      ? undefined
      : facts.objectSeen.get(objectKey('StorageClass', className));
  return {
    ...base,
    kind: 'claimPending',
    message: `claim ${key} is ${phase} (last seen ${clockOf(seenClaim?.tsMs ?? 0)}): ${why}`,
    proofSeqs: proofs(seenClaim?.seq, seenClass?.seq),
    clearsAtMs: null,
    clears: 'when a PersistentVolume is bound to the claim',
  } satisfies Holding;
}

/** What clears a Multi-Attach: the detach from `other`, by the attach/detach controller's rules. */
function multiAttachClears(facts: RecordedFacts, pv: string, other: string, maxWaitMs: number) {
  const node = facts.nodes.get(other);
  const unique = facts.uniqueNameOf(pv);
  const inUse = unique !== undefined && node?.volumesInUse.has(unique) === true;
  const requested = detachRequestedAt(facts, pv, other);
  if (requested === 'wanted') {
    const user = [...facts.pods.values()].find(
      (p) =>
        p.node === other &&
        p.goneAt === null &&
        p.claims.some((c) => facts.pvOfClaim(p.namespace, c.claim) === pv),
    );
    const name = user === undefined ? 'a pod' : `pod ${user.namespace}/${user.name}`;
    return {
      at: null,
      text: `${name} on ${other} still uses it: when that pod is gone`,
      seq: user?.lastSeen.seq,
    };
  }
  if (!inUse)
    return {
      at: null,
      text: `the detach from ${other}: nothing is mounted there`,
      seq: requested?.seq,
    };
  if (node?.outOfService === true)
    return {
      at: null,
      text: `${other} has the out-of-service taint: detach due now`,
      seq: requested?.seq,
    };
  if (node !== undefined && node.ready !== true) {
    const due = Math.max((requested?.tsMs ?? -Infinity) + maxWaitMs, node.readySince.tsMs);
    return { at: due, text: `force detach due at ${clockOf(due)}`, seq: requested?.seq };
  }
  return {
    at: null,
    text: `when the kubelet on ${other} unmounts it, or ${maxWaitMs / 1000} s after the detach was wanted once ${other} is not Ready`,
    seq: requested?.seq,
  };
}

function multiAttach(
  facts: RecordedFacts,
  at: { outer: string; pv: string; node: string },
  maxWaitMs: number,
): Holding | undefined {
  if (!singleNodeOnly(facts, at.pv)) return undefined;
  const other = [...facts.attachedNodes(at.pv)].find(([n]) => n !== at.node);
  if (other === undefined) return undefined;
  const [name, held] = other;
  const node = facts.nodes.get(name);
  const unique = facts.uniqueNameOf(at.pv);
  const inUse = unique !== undefined && node?.volumesInUse.has(unique) === true;
  const status = `(${inUse ? 'last status' : 'status of'} ${clockOf(node?.inUseSeen.tsMs ?? 0)})`;
  const ready =
    node === undefined
      ? 'is not known'
      : `is ${node.ready === true ? 'Ready' : 'NotReady'} since ${clockOf(node.readySince.tsMs)}`;
  const clears = multiAttachClears(facts, at.pv, name, maxWaitMs);
  return {
    kind: 'multiAttach',
    outerVolumeSpecName: at.outer,
    volume: at.pv,
    message:
      `Multi-Attach: ${at.pv} is attached to ${name} (${held.via.kind} ${held.via.name}, ` +
      `attached since ${clockOf(held.since.tsMs)}); ${name} ` +
      `${inUse ? 'still lists' : 'no longer lists'} it in volumesInUse ${status} and ${ready}`,
    proofSeqs: proofs(held.since.seq, node?.inUseSeen.seq, node?.readySince.seq, clears.seq),
    clearsAtMs: clears.at,
    clears: clears.text,
  };
}

function attachHolding(
  facts: RecordedFacts,
  at: { outer: string; pv: string; node: string },
): Holding {
  const base = { outerVolumeSpecName: at.outer, volume: at.pv, clearsAtMs: null };
  const va = [...facts.attachments.values()].find((a) => a.pv === at.pv && a.node === at.node);
  const node = facts.nodes.get(at.node);
  if (va !== undefined)
    return {
      ...base,
      kind: 'attachPending',
      message:
        `attach not yet confirmed: VolumeAttachment ${va.name} has status.attached false since ` +
        `${clockOf(va.since.tsMs)}${va.attachError === null ? '' : ` (attachError: ${va.attachError})`}`,
      proofSeqs: proofs(va.since.seq),
      clears: 'when the external attacher confirms the attach (status.attached true)',
    };
  if (node !== undefined && node.ready !== true)
    return {
      ...base,
      kind: 'nodeNotReady',
      message: `${at.node} is NotReady since ${clockOf(node.readySince.tsMs)}, and ${at.pv} is not attached there`,
      proofSeqs: proofs(node.readySince.seq),
      clears: `when ${at.node} is Ready again`,
    };
  return {
    ...base,
    kind: 'notAttached',
    message: `${at.pv} is not attached to ${at.node}: no VolumeAttachment asks for it yet`,
    proofSeqs: proofs(facts.objectSeen.get(objectKey('PersistentVolume', at.pv))?.seq),
    clears: 'when the attach/detach controller attaches it',
  };
}

/** The Kubernetes Event that tells of the condition: about the claim, else about the pod. */
function tellingEvent(facts: RecordedFacts, pod: PodFacts, holding: Holding, claim: string) {
  if (holding.kind === 'claimMissing' || holding.kind === 'claimPending')
    return facts.latestKubeEvent(
      { kind: 'PersistentVolumeClaim', namespace: pod.namespace, name: claim },
      () => true,
    );
  const onPod = { kind: 'Pod', namespace: pod.namespace, name: pod.name };
  if (holding.kind === 'unscheduled')
    return facts.latestKubeEvent(onPod, (r) => r === 'FailedScheduling');
  if (holding.kind === 'multiAttach')
    return facts.latestKubeEvent(
      onPod,
      // Older Kubernetes said "Multi-Attach error for volume …"; v1.37 says "Waiting for
      // detach for volume …" (reconciler.go: reportMultiAttachError).
      (r, m) => r === 'FailedAttachVolume' && /Multi-Attach|Waiting for detach/.test(m),
    );
  return facts.latestKubeEvent(onPod, (r) => r === 'FailedAttachVolume');
}

function withEvent(facts: RecordedFacts, pod: PodFacts, holding: Holding, claim: string): Holding {
  const event = tellingEvent(facts, pod, holding, claim);
  if (event === undefined || event.tsMs < pod.firstSeen.tsMs) return holding;
  return {
    ...holding,
    proofSeqs: proofs(...holding.proofSeqs, event.seq),
    kubeEvent: { seq: event.seq, reason: event.reason, message: event.message },
  };
}

/**
 * Every volume attached, the pod still Pending, and the kubelet's last word a FailedMount
 * (or FailedMapVolume) since the last attach: the mount holds it (a recorded log's Events).
 */
function mountHolding(facts: RecordedFacts, pod: PodFacts): Holding | undefined {
  if (pod.phase !== 'Pending' || pod.node === null) return undefined;
  const attachedAt = Math.max(
    ...pod.claims.map((c) => {
      const pv = facts.pvOfClaim(pod.namespace, c.claim);
      const since = pv === undefined ? undefined : facts.attachedNodes(pv).get(pod.node!)?.since;
      return since?.tsMs ?? 0;
    }),
  );
  const failed = facts.latestKubeEvent(
    { kind: 'Pod', namespace: pod.namespace, name: pod.name },
    (r) => r === 'FailedMount' || r === 'FailedMapVolume',
  );
  if (failed === undefined || failed.tsMs < Math.max(attachedAt, pod.firstSeen.tsMs))
    return undefined;
  return {
    kind: 'mountFailed',
    outerVolumeSpecName: pod.claims[0]?.outer ?? '',
    volume: null,
    message: `${failed.component} on ${pod.node}: ${failed.reason}: ${failed.message}`,
    proofSeqs: proofs(failed.seq),
    clearsAtMs: null,
    clears: 'when the kubelet mounts it and the pod runs',
    kubeEvent: { seq: failed.seq, reason: failed.reason, message: failed.message },
  };
}

/**
 * A Terminating pod whose node still lists one of its volumes in volumesInUse: the kubelet
 * has not torn it down (UnmountVolume.TearDown, for CSI the driver's NodeUnpublishVolume),
 * so the pod stays and the attach/detach controller keeps the volume attached
 * (reconciler.go: MountedByNode). The kubelet records no Event for a failed teardown; the
 * node's Ready condition tells the causes apart: on a Ready node the teardown fails
 * (teardownPending, once the grace period, its deletionTimestamp, is over), on a NotReady
 * one the kubelet is not heard from (teardownNodeNotReady, from the deletion on: it cannot
 * tear anything down until it is back).
 */
export function teardownHolding(
  facts: RecordedFacts,
  pod: PodFacts,
  nowMs: number,
): Holding | undefined {
  const { deleting, node: name } = pod;
  if (deleting === null || pod.removedAt !== null || name === null) return undefined;
  const node = facts.nodes.get(name);
  const ready = node?.ready === true;
  if (ready && nowMs <= deleting.graceEndsMs) return undefined;
  const inUse = pod.claims.find((c) => {
    const pv = facts.pvOfClaim(pod.namespace, c.claim);
    const unique = pv === undefined ? undefined : facts.uniqueNameOf(pv);
    return unique !== undefined && node?.volumesInUse.has(unique) === true;
  });
  if (node === undefined || inUse === undefined) return undefined;
  const pv = facts.pvOfClaim(pod.namespace, inUse.claim)!;
  return {
    kind: ready ? 'teardownPending' : 'teardownNodeNotReady',
    outerVolumeSpecName: inUse.outer,
    volume: pv,
    message:
      `pod ${pod.namespace}/${pod.name} is Terminating since ${clockOf(deleting.at.tsMs)} ` +
      `(grace period ended ${clockOf(deleting.graceEndsMs)}); ${name} still lists ${pv} in ` +
      `volumesInUse (last status ${clockOf(node.inUseSeen.tsMs)}) and ${name} is ` +
      `${ready ? 'Ready' : 'NotReady'} since ${clockOf(node.readySince.tsMs)}`,
    proofSeqs: proofs(deleting.at.seq, node.inUseSeen.seq, node.readySince.seq),
    clearsAtMs: null,
    clears: ready
      ? `when the kubelet on ${name} tears ${pv} down (its CSI driver's NodeUnpublishVolume ` +
        `failing keeps it mounted: the kubelet's log says why) and the pod is deleted`
      : `when the kubelet on ${name} is heard from again and tears ${pv} down; or the pod ` +
        `force-deleted and ${name} given the node.kubernetes.io/out-of-service taint`,
  };
}

/** The condition holding the pod now; undefined when its volumes are attached (and mounted). */
export function holdingOf(facts: RecordedFacts, pod: PodFacts, maxWaitMs: number) {
  for (const { outer, claim } of pod.claims) {
    const holding = volumeHolding(facts, pod, { outer, claim }, maxWaitMs);
    if (holding !== undefined) return withEvent(facts, pod, holding, claim);
  }
  return mountHolding(facts, pod);
}

function volumeHolding(
  facts: RecordedFacts,
  pod: PodFacts,
  { outer, claim }: { outer: string; claim: string },
  maxWaitMs: number,
): Holding | undefined {
  const pv = facts.pvOfClaim(pod.namespace, claim);
  const pvc = facts.claims.get(`${pod.namespace}/${claim}`);
  if (pv === undefined || pvc?.status?.phase !== 'Bound')
    return claimHolding(facts, pod, outer, claim);
  if (pod.node === null)
    return {
      kind: 'unscheduled',
      outerVolumeSpecName: outer,
      volume: pv,
      message: `pod ${pod.namespace}/${pod.name} is not scheduled to a node`,
      proofSeqs: proofs(pod.lastSeen.seq),
      clearsAtMs: null,
      clears: 'when the scheduler binds it to a node',
    };
  if (!facts.attachRequired(pv) || facts.attachedNodes(pv).has(pod.node)) return undefined;
  const at = { outer, pv, node: pod.node };
  return multiAttach(facts, at, maxWaitMs) ?? attachHolding(facts, at);
}

interface Episode {
  readonly from: Seen;
  readonly spans: Map<string, HeldSpan>;
  current: string;
  lastTsMs: number;
  readonly waitedFor: PodVerdict['waitedFor'];
}

/** How a wait that no longer holds ended: the pod gone, else ready (or torn down). */
function endOf(pod: PodFacts, episode: Episode): PodVerdict['endedBy'] {
  if (pod.removedAt !== null || pod.claims.length === 0) return 'podGone';
  if (episode.waitedFor === 'teardown') return 'tornDown';
  return pod.goneAt !== null ? 'podGone' : 'ready';
}

/** Each pod's waits, followed event by event. */
export class PodWaits {
  private readonly open = new Map<string, Episode>();
  private readonly closed: PodVerdict[] = [];

  constructor(
    private readonly facts: RecordedFacts,
    private readonly maxWaitMs: number,
  ) {}

  observe(event: VoleEvent): void {
    const at = { seq: event.seq, tsMs: event.tsMs };
    for (const pod of this.facts.pods.values()) {
      let episode = this.open.get(pod.uid);
      if (episode !== undefined) this.accrue(episode, at.tsMs);
      const teardown = teardownHolding(this.facts, pod, at.tsMs);
      const holding =
        pod.goneAt !== null || pod.claims.length === 0
          ? teardown
          : holdingOf(this.facts, pod, this.maxWaitMs);
      const waitedFor = teardown === undefined ? 'volumes' : 'teardown';
      if (episode !== undefined && (holding === undefined || episode.waitedFor !== waitedFor)) {
        this.close(pod, episode, endOf(pod, episode), at);
        episode = undefined;
      }
      if (holding !== undefined) this.hold(pod, episode, holding, { at, waitedFor });
    }
  }

  private hold(
    pod: PodFacts,
    episode: Episode | undefined,
    holding: Holding,
    { at, waitedFor }: { at: Seen; waitedFor: Episode['waitedFor'] },
  ): void {
    const open = episode ?? {
      from: at,
      spans: new Map(),
      current: '',
      lastTsMs: at.tsMs,
      waitedFor,
    };
    this.open.set(pod.uid, open);
    const key = `${holding.kind}|${holding.outerVolumeSpecName}`;
    const before = open.spans.get(key);
    open.spans.set(key, {
      ...holding,
      sinceSeq: before?.sinceSeq ?? at.seq,
      sinceTsMs: before?.sinceTsMs ?? at.tsMs,
      heldMs: before?.heldMs ?? 0,
    });
    open.current = key;
  }

  /** Every wait: the ended ones, then those still open at the end of the log. */
  verdicts(): PodVerdict[] {
    const stillOpen = [...this.open].map(([uid, episode]) =>
      this.verdict(this.facts.pods.get(uid)!, episode, null, null),
    );
    return [...this.closed, ...stillOpen];
  }

  private accrue(episode: Episode, tsMs: number): void {
    const span = episode.spans.get(episode.current);
    if (span !== undefined)
      episode.spans.set(episode.current, {
        ...span,
        heldMs: span.heldMs + tsMs - episode.lastTsMs,
      });
    episode.lastTsMs = tsMs;
  }

  private close(pod: PodFacts, episode: Episode, by: PodVerdict['endedBy'], at: Seen): void {
    this.open.delete(pod.uid);
    this.closed.push(this.verdict(pod, episode, by, at));
  }

  private verdict(
    pod: PodFacts,
    episode: Episode,
    by: PodVerdict['endedBy'],
    at: Seen | null,
  ): PodVerdict {
    const conditions = [...episode.spans.values()];
    const held = conditions.reduce((a, b) => (b.heldMs > a.heldMs ? b : a));
    return {
      pod: `${pod.namespace}/${pod.name}`,
      waitedFor: episode.waitedFor,
      uid: pod.uid,
      node: pod.node,
      waitedFromSeq: episode.from.seq,
      waitedFromTsMs: episode.from.tsMs,
      endedBy: by,
      endedAtSeq: at?.seq ?? null,
      endedAtTsMs: at?.tsMs ?? null,
      held,
      conditions,
    };
  }
}
