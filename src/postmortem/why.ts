/**
 * "Why is my pod stuck?" — the answer Kubernetes users never get from "timed out waiting
 * for the condition": for each of a pod's volumes, the step it waits on, since which
 * event, its last error, its next retry and the event that caused the wait. A pure
 * function of the folded world (the same answer live, in a replay, in the inspector).
 */
import type { UniquePodName, UniqueVolumeName } from '../ids.js';
import { isAttached, podEntries, podEntry } from '../kubelet/index.js';
import { retryAtMs } from '../operations/pending.js';
import type { PodRecord, World } from '../kubelet/types.js';
import type { OpRecord, VolumeCauses } from '../operations/types.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';
import type { ClusterObject, PersistentVolumeClaim } from '../events/k8s.js';
import { claimName, lookupOf } from '../binding/claims.js';
import type { ClaimView } from '../binding/claims-view.js';
import { claimView } from '../kubelet/provisioning.js';
import { requiredContents } from '../kubelet/content-invariant.js';

export interface VolumeWhy {
  readonly outerVolumeSpecName: string;
  readonly volume: string;
  readonly pod: string;
  /** mounted: nothing to wait for; waiting: a step is due; running: a call is in flight. */
  readonly status: 'mounted' | 'waiting' | 'running' | 'failed' | 'tearingDown' | 'bound';
  /** The step it waits on (a plugin call name, or what it waits for outside vole). */
  readonly step: string;
  readonly detail: string;
  /** The event since which it waits on this step. */
  readonly sinceSeq: number;
  readonly lastError: {
    readonly message: string;
    readonly seq: number;
    readonly tsMs: number;
  } | null;
  /** When the backoff lets the step run again (ms, the log's clock); null: no backoff. */
  readonly nextRetryAtMs: number | null;
  /** The event that caused the wait: the last failure, else the last event on the volume. */
  readonly causeSeq: number;
}

export interface WhyAnswer {
  readonly kind: 'pod' | 'volume' | 'claim';
  /** `namespace/name (uid)` of a pod, or the UniqueVolumeName. */
  readonly subject: string;
  readonly atSeq: number;
  readonly atTsMs: number;
  readonly volumes: readonly VolumeWhy[];
}

/** Finds a pod by UID, namespace/name or a unique name. */
export function findPod(world: World, text: string): UniquePodName | undefined {
  const byUid = world.pods.get(text as UniquePodName);
  if (byUid !== undefined) return byUid.uid;
  const matches = [...world.pods.values()].filter(
    (p) => `${p.namespace}/${p.name}` === text || p.name === text,
  );
  if (matches.length === 1) return matches[0]!.uid;
  for (const byPod of world.mounts.values())
    if (podEntry(byPod, text as UniquePodName) !== undefined) return text as UniquePodName;
  return undefined;
}

/** The failed record (in backoff) that stands against the volume for this pod, if any. */
function backoffOf(world: World, volume: UniqueVolumeName, pod: string): OpRecord | undefined {
  let found: OpRecord | undefined;
  for (const r of world.ops.get(volume) ?? []) {
    if (r.pending || r.lastError === null) continue;
    if (r.key.pod !== '' && r.key.pod !== pod) continue;
    if (found === undefined || retryAtMs(r) > retryAtMs(found)) found = r;
  }
  return found;
}

type Step = Pick<VolumeWhy, 'status' | 'step' | 'detail' | 'sinceSeq'>;

/** Attachment-side step of a desired volume that is not attached yet (behaviour K3.5). */
function attachStep(world: World, spec: ResolvedVolume, entrySeq: number): Step {
  const attachment = world.attachments.get(spec.volume);
  const since = attachment?.seq ?? entrySeq;
  const state = attachment?.value ?? 'detached';
  if (!spec.traits.attachable)
    return {
      status: 'waiting',
      step: 'verifyControllerAttached',
      detail: `attachment ${state}`,
      sinceSeq: since,
    };
  if (!world.config.controllerAttachDetach)
    return { status: 'waiting', step: 'attach', detail: `attachment ${state}`, sinceSeq: since };
  const dsw = world.dsw.get(spec.volume);
  if (dsw?.reportedInUse !== true)
    return {
      status: 'waiting',
      step: 'reportedInUse',
      detail: 'the node has not reported the volume in use yet (node.status.volumesInUse)',
      sinceSeq: since,
    };
  if (!world.volumesAttached.has(spec.volume))
    return {
      status: 'waiting',
      step: 'controllerAttach',
      detail:
        'the attach/detach controller has not reported it attached (node.status.volumesAttached)',
      sinceSeq: since,
    };
  return {
    status: 'waiting',
    step: 'verifyControllerAttached',
    detail: `attachment ${state}`,
    sinceSeq: since,
  };
}

/** The step a desired (volume, pod) waits on, from the pairs' states. */
function desiredStep(
  world: World,
  pod: UniquePodName,
  spec: ResolvedVolume,
  entrySeq: number,
): Step {
  const block = spec.traits.volumeMode === 'Block';
  const running = [...world.running.values()].find(
    (op) => op.volume === spec.volume && (op.pod === null || op.pod === pod),
  );
  if (running !== undefined)
    return {
      status: 'running',
      step: running.call ?? running.op,
      detail: `${running.op} running as ${running.opId}`,
      sinceSeq: running.startedSeq,
    };
  const attachment = world.attachments.get(spec.volume);
  if (!isAttached(attachment)) return attachStep(world, spec, entrySeq);
  const mount = podEntry(world.mounts.get(spec.volume), pod);
  if (mount?.value === 'mounted' && !mount.context.remountRequired)
    return { status: 'mounted', step: 'none', detail: 'mounted', sinceSeq: mount.seq };
  if (mount?.value !== 'mounted') {
    const missing = missingObjectStep(world, spec, Math.max(mount?.seq ?? 0, entrySeq));
    if (missing !== undefined) return missing;
  }
  const device = attachment.value;
  if (spec.traits.deviceMountable && device !== 'attached.deviceMounted')
    return {
      status: 'waiting',
      step: block ? 'setUpDevice' : 'mountDevice',
      detail: `device ${device.replace('attached.', '')}`,
      sinceSeq: attachment.seq,
    };
  const state = mount?.value ?? 'unmounted';
  return {
    status: 'waiting',
    step: block ? 'mapPodDevice' : 'setUp',
    detail: mount?.context.remountRequired === true ? 'remount required' : `mount ${state}`,
    sinceSeq: Math.max(mount?.seq ?? 0, attachment.seq, entrySeq),
  };
}

/**
 * A ConfigMap or Secret the volume must read that the world does not have: setUp waits
 * for it (the kubelet's FailedMount says `secret "s" not found`), whatever its retries say.
 */
function missingObjectStep(world: World, spec: ResolvedVolume, sinceSeq: number): Step | undefined {
  const missing = requiredContents(spec).find(
    (o) => world.objects.lookup(o.kind, o.name, o.namespace) === undefined,
  );
  if (missing === undefined) return undefined;
  const resource = missing.kind === 'ConfigMap' ? 'configmap' : 'secret';
  return {
    status: 'waiting',
    step: `${missing.kind} ${missing.namespace}/${missing.name}`,
    detail: `${resource} "${missing.name}" not found; setUp waits for it to be created`,
    sinceSeq,
  };
}

function entryFor(world: World, pod: UniquePodName, spec: ResolvedVolume, step: Step): VolumeWhy {
  const lastError = step.status === 'mounted' ? null : (world.lastErrors.get(spec.volume) ?? null);
  const backoff = step.status === 'mounted' ? undefined : backoffOf(world, spec.volume, pod);
  return {
    outerVolumeSpecName: spec.outerVolumeSpecName,
    volume: spec.volume,
    pod,
    ...step,
    lastError,
    nextRetryAtMs: backoff === undefined ? null : retryAtMs(backoff),
    causeSeq: lastError?.seq ?? world.causes.get(spec.volume) ?? step.sinceSeq,
  };
}

/** Mount records of a pod that is no longer desired: what its teardown waits on. */
function teardownEntries(world: World, pod: UniquePodName): VolumeWhy[] {
  const found: VolumeWhy[] = [];
  for (const [volume, byPod] of world.mounts) {
    const mount = podEntry(byPod, pod);
    if (mount === undefined || podEntry(world.dsw.get(volume)?.pods, pod) !== undefined) continue;
    const running = [...world.running.values()].find(
      (op) => op.volume === volume && op.pod === pod,
    );
    const step: Step = {
      status: running === undefined ? 'tearingDown' : 'running',
      step:
        running?.call ?? (mount.spec.traits.volumeMode === 'Block' ? 'unmapPodDevice' : 'tearDown'),
      detail: world.sourcesReady
        ? `mount ${mount.value}, pod no longer wants it`
        : `mount ${mount.value}; nothing is torn down until the pod sources are ready`,
      sinceSeq: running?.startedSeq ?? mount.seq,
    };
    found.push(entryFor(world, pod, mount.spec, step));
  }
  return found;
}

function podAnswer(world: World, pod: UniquePodName): WhyAnswer {
  const record = world.pods.get(pod);
  const volumes: VolumeWhy[] = [];
  for (const spec of record?.volumes ?? []) {
    const entrySeq = podEntry(world.dsw.get(spec.volume)?.pods, pod)?.seq ?? record!.seq;
    volumes.push(entryFor(world, pod, spec, desiredStep(world, pod, spec, entrySeq)));
  }
  for (const [outer, message] of record?.errors ?? []) {
    const claim = claimWaiting(world, record!, outer);
    if (claim !== undefined) {
      volumes.push(claimEntry(world, claim, { outer, pod, sinceSeq: record!.seq }));
      continue;
    }
    volumes.push({
      outerVolumeSpecName: outer,
      volume: '',
      pod,
      status: 'failed',
      step: 'resolve',
      detail: message,
      sinceSeq: record!.seq,
      lastError: { message, seq: record!.seq, tsMs: 0 },
      nextRetryAtMs: null,
      causeSeq: record!.seq,
    });
  }
  volumes.push(...teardownEntries(world, pod));
  const subject =
    record === undefined ? `${pod} (removed)` : `${record.namespace}/${record.name} (${pod})`;
  return { kind: 'pod', subject, atSeq: world.seq, atTsMs: world.tsMs, volumes };
}

/**
 * The answer for a pod (UID, namespace/name or name) or a volume (its UniqueVolumeName:
 * every pod that wants or holds it); undefined when the world knows neither.
 */
export function why(world: World, subject: string): WhyAnswer | undefined {
  const pod = findPod(world, subject);
  if (pod !== undefined) return podAnswer(world, pod);
  const claim = findClaim(world.objects, subject);
  if (claim !== undefined) {
    const entry = claimEntry(world, claimView(world, claim), {
      outer: `claim ${claimName(claim)}`,
      pod: '' as UniquePodName,
      sinceSeq: world.seq,
    });
    const subject = claimName(claim);
    return { kind: 'claim', subject, atSeq: world.seq, atTsMs: world.tsMs, volumes: [entry] };
  }
  const volume = subject as UniqueVolumeName;
  const pods = new Set<UniquePodName>([
    ...[...podEntries(world.dsw.get(volume)?.pods)].map((e) => e.pod),
    ...[...podEntries(world.mounts.get(volume))].map((m) => m.pod),
  ]);
  if (pods.size === 0 && !world.attachments.has(volume)) return undefined;
  const volumes = [...pods]
    .sort()
    .flatMap((p) => podAnswer(world, p).volumes.filter((v) => v.volume === volume));
  if (volumes.length === 0) volumes.push(unusedAttachment(world, volume));
  return { kind: 'volume', subject: volume, atSeq: world.seq, atTsMs: world.tsMs, volumes };
}

/** An attachment no pod uses: its unmountDevice/detach (behaviour K3.6). */
function unusedAttachment(world: World, volume: UniqueVolumeName): VolumeWhy {
  const attachment = world.attachments.get(volume)!;
  const running = [...world.running.values()].find((op) => op.volume === volume);
  const deviceMounted =
    attachment.value.startsWith('attached.device') &&
    attachment.value !== 'attached.deviceUnmounted';
  const step: Step = {
    status: running === undefined ? 'tearingDown' : 'running',
    step: running?.call ?? (deviceMounted ? 'unmountDevice' : 'detach'),
    detail: world.sourcesReady
      ? `attachment ${attachment.value}, no pod uses it`
      : `attachment ${attachment.value}; nothing is detached until the pod sources are ready`,
    sinceSeq: running?.startedSeq ?? attachment.seq,
  };
  return entryFor(world, '' as UniquePodName, attachment.spec, step);
}

export interface WhyTextOptions {
  /** The timestamp of an event, to show times beside seqs (a log lookup). */
  readonly tsOf?: (seq: number) => number | undefined;
  /** A one-line description of an event, for the cause. */
  readonly describe?: (seq: number) => string | undefined;
  /** The origin of the offsets shown (the log's first event); absolute times otherwise. */
  readonly originMs?: number;
}

/** A moment as an offset from the log's start (or an absolute time); '' when unknown. */
function when(tsMs: number | undefined, opts: WhyTextOptions): string {
  if (tsMs === undefined) return '';
  if (opts.originMs !== undefined) return `+${((tsMs - opts.originMs) / 1000).toFixed(3)}s`;
  return tsMs > 1e12 ? new Date(tsMs).toISOString() : `+${(tsMs / 1000).toFixed(3)}s`;
}

const paren = (text: string) => (text === '' ? '' : ` (${text})`);

/** One volume's lines, without the pod header (the waitForAttachAndMount error uses it). */
export function volumeWhyText(v: VolumeWhy, opts: WhyTextOptions = {}): string[] {
  const name = v.volume === '' ? v.outerVolumeSpecName : `${v.outerVolumeSpecName} (${v.volume})`;
  if (v.status === 'mounted') return [`${name}: mounted`];
  if (v.status === 'failed') return [`${name}: cannot be processed: ${v.detail}`];
  if (v.status === 'bound') return [`${name}: ${v.detail}`];
  const verb =
    v.status === 'running' ? 'runs' : v.status === 'tearingDown' ? 'tears down with' : 'waits on';
  const since = paren(when(opts.tsOf?.(v.sinceSeq), opts));
  const lines = [`${name}: ${verb} ${v.step} since seq ${v.sinceSeq}${since} — ${v.detail}`];
  if (v.lastError !== null)
    lines.push(
      `  last error at seq ${v.lastError.seq}${paren(when(v.lastError.tsMs, opts))}: ${v.lastError.message}`,
    );
  if (v.nextRetryAtMs !== null) lines.push(`  next retry at ${when(v.nextRetryAtMs, opts)}`);
  const described = opts.describe?.(v.causeSeq);
  lines.push(`  caused by seq ${v.causeSeq}${described === undefined ? '' : `: ${described}`}`);
  return lines;
}

export function whyText(answer: WhyAnswer, opts: WhyTextOptions = {}): string {
  // bound: what the controller's log ends with for a pod's volume (attached to its node).
  const done = answer.volumes.filter((v) => v.status === 'mounted' || v.status === 'bound');
  const waiting = answer.volumes.length - done.length;
  const all = done.every((v) => v.status === 'mounted') ? 'mounted' : 'attached';
  const head =
    answer.kind === 'pod'
      ? `pod ${answer.subject} at seq ${answer.atSeq}: ${waiting === 0 ? `every volume ${all}` : `${waiting} of ${answer.volumes.length} volume(s) not ready`}`
      : `${answer.kind} ${answer.subject} at seq ${answer.atSeq}`;
  const lines = [head];
  for (const v of answer.volumes) {
    const prefix = answer.kind === 'volume' && v.pod !== '' ? `pod ${v.pod}: ` : '';
    const [first, ...rest] = volumeWhyText(v, opts);
    lines.push(`  ${prefix}${first}`, ...rest.map((l) => `  ${l}`));
  }
  return lines.join('\n');
}

/** A claim by `namespace/name`, `PersistentVolumeClaim/namespace/name` or a name in default. */
export function findClaim(
  objects: ReadonlyMap<string, ClusterObject>,
  text: string,
): PersistentVolumeClaim | undefined {
  const parts = text.replace(/^(PersistentVolumeClaim|pvc|claim)\//, '').split('/');
  const [namespace, name] = parts.length === 1 ? ['default', parts[0]!] : [parts[0]!, parts[1]!];
  const object = lookupOf(objects).lookup('PersistentVolumeClaim', name, namespace);
  return object?.kind === 'PersistentVolumeClaim' ? object : undefined;
}

/** The claim of a pod volume that cannot be processed, when it waits for its claim. */
function claimWaiting(world: World, record: PodRecord, outer: string): ClaimView | undefined {
  const volume = (record.pod.spec.volumes ?? []).find((v) => v.name === outer);
  const claimName = volume?.persistentVolumeClaim?.claimName;
  if (claimName === undefined) return undefined;
  const pvc = world.objects.lookup('PersistentVolumeClaim', claimName, record.namespace);
  if (pvc?.kind !== 'PersistentVolumeClaim') return undefined;
  const view = claimView(world, pvc);
  return view.state === 'Bound' || view.state === 'Pending' ? undefined : view;
}

/** A claim's standing as a why entry: provisioning's step, last error and next retry. */
export function claimEntry(
  world: { readonly causes: VolumeCauses; readonly bindingCause: number },
  view: ClaimView,
  at: { outer: string; pod: UniquePodName; sinceSeq: number },
): VolumeWhy {
  const status: VolumeWhy['status'] =
    view.state === 'Bound' ? 'bound' : view.running ? 'running' : 'waiting';
  const step =
    view.state === 'Provisioning'
      ? 'CreateVolume'
      : view.state === 'WaitingForFirstConsumer'
        ? 'firstConsumer'
        : view.state === 'WaitingForProvisioner'
          ? 'provisioner'
          : view.state === 'Deleting'
            ? 'pvcProtection'
            : 'bind';
  const volume = (view.volume ?? '') as UniqueVolumeName;
  return {
    outerVolumeSpecName: at.outer,
    volume,
    pod: at.pod,
    status,
    step,
    detail: `claim ${view.claim} ${view.state}: ${view.detail}`,
    sinceSeq: at.sinceSeq,
    lastError: view.lastError,
    nextRetryAtMs: view.nextRetryAtMs,
    causeSeq: view.lastError?.seq ?? world.causes.get(volume) ?? world.bindingCause,
  };
}
