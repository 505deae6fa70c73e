/**
 * The node agent on a real API server (`vole run --kubeconfig`): the kubelet's volume
 * manager for one Node. Inputs come through informers (its pods by spec.nodeName, claims,
 * PVs, StorageClasses, CSIDrivers, its VolumeAttachments, its Node, and the ConfigMaps and
 * Secrets its pods read), each one an event in the log with the object's resourceVersion,
 * validated as manifests are. Outputs are written as the kubelet writes them
 * (node-status.ts, node-heartbeat.ts, pod Events); a deleted pod is finally removed from
 * the API once its volumes are unmounted.
 */
import type { Logger } from 'pino';
import type { VolumeManager } from '../agent/volume-manager.js';
import { InvalidPodError } from '../agent/volume-manager-seams.js';
import type { VoleEvent } from '../events/index.js';
import { type ManifestObject, manifestObject, type Pod, pod as podSchema } from '../events/k8s.js';
import { UniquePodName } from '../ids.js';
import { describeInvalid, validate } from '../sources/validate.js';
import type { World } from '../kubelet/types.js';
import {
  confirmedAttachments,
  csiVolumeOf,
  type VolumeAttachmentView,
  volumeAttachmentName,
} from './attachments.js';
import type { Clock } from '../clock.js';
import type { JsonObject, KubeTransport } from './http.js';
import { kubeNamedGetPendingMs, kubeNamedGetSettledMs } from '../constants.js';
import {
  type ApiObject,
  type InformerHandlers,
  type KubeInformer,
  objectHandlers,
  type ResourceRef,
  startInformer,
  coreRef as core,
  storageRef as storage,
} from './informer.js';
import { NodeHeartbeat } from './node-heartbeat.js';
import type { NodeAllocatable } from '../events/types.js';
import { NodeStatusWriter } from './node-status.js';
import { podErrorEvents, podEventOf, EventRecorder, type StartedOperation } from './pod-events.js';
import { claimRefsOf, type ContentRef, contentRefsOf } from './references.js';
import { ContentWatches } from './content-watches.js';
import { type NamedRef, NamedGets } from './named-gets.js';
import { PodFinalizer } from './pod-finalizer.js';
import { configSeenAnnotation, withConfigAnnotations } from './pod-config.js';
import { InUsePublisher } from './in-use.js';

export interface KubeAgentOptions {
  readonly http: KubeTransport;
  /** The kube side's timers and timestamps (virtual in the simulator). */
  readonly clock: Clock;
  readonly node: string;
  /** Started (vm.start) before the agent starts. */
  readonly vm: VolumeManager;
  readonly controllerAttachDetach: boolean;
  readonly logger: Logger;
  readonly say: (line: string) => void;
  /** A pod is gone: its cached service-account tokens may go too (tokens.ts). */
  readonly forgetPod?: (uid: string) => void;
  /** The node's allocatable, published on the Node for the scheduler (node-heartbeat.ts). */
  readonly allocatable?: NodeAllocatable;
}

export class KubeAgent {
  readonly status: NodeStatusWriter;
  private readonly informers: KubeInformer[] = [];
  /** The ConfigMaps and Secrets the pods read, each watched while some pod reads it. */
  private readonly contents: ContentWatches;
  /** The claims and volumes of its pods and its VolumeAttachments, got by name. */
  private readonly named: NamedGets;
  /** Pods whose objects are being fetched: added to the volume manager when they are. */
  private readonly podsFetching = new Map<string, Promise<void>>();
  /** The newest version of each live pod, added once its ConfigMaps and Secrets are listed. */
  private readonly latestPods = new Map<string, Pod>();
  private readonly attachments = new Map<string, VolumeAttachmentView>();
  private volumesAttached: { name: string; devicePath?: string }[] = [];
  private observedAttached = '';
  private readonly operations = new Map<string, StartedOperation>();
  private readonly podErrorsSeen = new Map<string, Set<string>>();
  private readonly events: EventRecorder;
  private readonly finalizer: PodFinalizer;
  private readonly inUse: InUsePublisher;
  private unsubscribe: () => void = () => undefined;
  private heartbeat: NodeHeartbeat | null = null;
  private errorScan: NodeJS.Immediate | null = null;
  private attachmentsCheck: NodeJS.Immediate | null = null;

  constructor(private readonly opts: KubeAgentOptions) {
    const { http, clock, node, logger, say, vm } = opts;
    this.status = new NodeStatusWriter({ ...opts });
    this.events = new EventRecorder({ http, clock, node, logger, component: 'kubelet' });
    this.finalizer = new PodFinalizer({ http, clock, vm, say });
    this.inUse = new InUsePublisher({ vm, clock, status: this.status, say });
    this.contents = new ContentWatches({
      start: (ref, handlers) => startInformer(opts, contentRef(ref), handlers, say),
      upsert: (o) => this.upsertObject(o),
      forget: (ref) => this.forgetContent(ref),
    });
    this.named = new NamedGets({
      get: (path) => http.get(path),
      clock,
      periodMs: namedGetPeriodMs,
      upsert: (o) => this.onNamed(o),
      forget: (ref) => this.forgetNamed(ref),
      trouble: (message) => say(`kube-apiserver: ${message}`),
    });
  }

  private get vm(): VolumeManager {
    return this.opts.vm;
  }

  /** Registers the Node and its CSINode, lists and watches everything, then marks sources ready. */
  async start(): Promise<void> {
    const nodeUid = await this.status.registerNode();
    await this.status.initializeCsiNode(nodeUid);
    this.heartbeat = new NodeHeartbeat({ ...this.opts, nodeUid });
    await this.heartbeat.start();
    this.unsubscribe = this.vm.subscribe((event, world) => this.onEvent(event, world));
    const { node } = this.opts;
    const nodeSelector = `metadata.name=${node}`;
    this.watch(core('nodes', 'Node', nodeSelector), {
      upsert: (o) => this.onNode(o),
      remove: (o) => this.removeObject(o),
    });
    this.watch(storage('csidrivers', 'CSIDriver'), this.objectHandlers('CSIDriver'));
    // Its Node and the CSIDrivers first; each pod is added once its own claims, their
    // volumes and the objects it reads are fetched (onPod), so no pod is resolved against
    // a cache still filling (no passing "not bound" errors at start).
    await Promise.all(this.informers.map((i) => i.synced));
    this.watch(core('pods', 'Pod', `spec.nodeName=${node}`), {
      upsert: (o) => this.onPod(o),
      remove: (o) => this.podGone(o.metadata.uid ?? ''),
      listed: (all) => this.dropUnlistedPods(all),
    });
    await Promise.all(this.informers.map((i) => i.synced));
    // The pods' objects are read before anything may be torn down.
    await Promise.all(this.podsFetching.values());
    this.forgetUnfollowed();
    this.vm.inputs.markSourcesReady();
    this.inUse.schedule();
  }

  private watch(ref: ResourceRef, handlers: Omit<InformerHandlers, 'trouble'>): KubeInformer {
    const informer = startInformer(this.opts, ref, handlers, this.opts.say);
    this.informers.push(informer);
    return informer;
  }

  private objectHandlers(kind: ManifestObject['kind']) {
    return objectHandlers<ManifestObject['kind']>(this, kind);
  }

  /** Checked as a manifest is (schema and validation); refused with every field named. */
  /** @internal */
  upsertObject(raw: ApiObject): void {
    const errors = validate(raw);
    const parsed = manifestObject.safeParse(raw);
    if (errors.length > 0 || !parsed.success) {
      const what = { kind: raw.kind, name: raw.metadata.name, namespace: raw.metadata.namespace };
      const why = errors.length > 0 ? describeInvalid(errors, what) : parsed.error?.message;
      this.opts.say(`refused ${raw.kind} ${raw.metadata.name} from the API: ${why}`);
      return;
    }
    this.vm.inputs.upsertObject(parsed.data);
  }

  /** @internal */
  removeObject(raw: ApiObject): void {
    const kind = raw.kind as ManifestObject['kind'];
    const { name, namespace } = raw.metadata;
    this.vm.inputs.removeObject({ kind, name, ...(namespace === undefined ? {} : { namespace }) });
  }

  /** After a (re)list: what the log holds of this kind that the API no longer has goes. */
  /** @internal */
  dropUnlisted(kind: ManifestObject['kind'], listed: readonly ApiObject[]): void {
    const names = new Set(listed.map((o) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`));
    for (const [, object] of this.vm.world.objects) {
      if (object.kind !== kind) continue;
      const { name, namespace } = object.metadata;
      if (names.has(`${namespace ?? ''}/${name}`)) continue;
      this.vm.inputs.removeObject({
        kind,
        name,
        ...(namespace === undefined ? {} : { namespace }),
      });
    }
  }

  private onNode(raw: ApiObject): void {
    this.upsertObject(raw);
    this.heartbeat?.nodeSeen(raw.status);
    const status = (raw.status ?? {}) as {
      volumesAttached?: { name: string; devicePath?: string }[];
    };
    this.volumesAttached = status.volumesAttached ?? [];
    this.followAttachments();
    this.observeAttachments();
  }

  /**
   * Controller-attach mode: the VolumeAttachment of each CSI volume the Node lists as
   * attached, got by name (its name is the CSI attacher's hash of handle, driver and node).
   */
  private followAttachments(): void {
    if (!this.opts.controllerAttachDetach) return;
    const refs: NamedRef[] = [];
    for (const entry of this.volumesAttached) {
      const csi = csiVolumeOf(entry.name);
      if (csi === undefined) continue;
      const name = volumeAttachmentName(csi.handle, csi.driver, this.opts.node);
      refs.push({ kind: 'VolumeAttachment', name });
    }
    void this.named.follow(nodeOwner, refs);
  }

  /** A claim, volume or VolumeAttachment as the API server has it now. */
  private onNamed(raw: ApiObject): void {
    if (raw.kind === 'VolumeAttachment') return this.onVolumeAttachment(raw, false);
    this.upsertObject(raw);
    if (raw.kind === 'PersistentVolumeClaim') void this.followClaimVolume(raw);
  }

  /** A claim's volume is read while the claim is: the PV its spec.volumeName names. */
  private followClaimVolume(claim: ApiObject): Promise<void> {
    const volumeName = (claim.spec as { volumeName?: string } | undefined)?.volumeName;
    const refs: NamedRef[] =
      volumeName === undefined || volumeName === ''
        ? []
        : [{ kind: 'PersistentVolume', name: volumeName }];
    return this.named.follow(claimOwner(claim.metadata.namespace, claim.metadata.name), refs);
  }

  /** Gone from the API server (404), or no pod, claim or Node names it any more. */
  private forgetNamed(ref: NamedRef): void {
    if (ref.kind === 'PersistentVolumeClaim')
      void this.named.follow(claimOwner(ref.namespace, ref.name), []);
    if (ref.kind === 'VolumeAttachment') {
      this.attachments.delete(ref.name);
      this.observeAttachments();
    }
    if (this.vm.world.objects.lookup(ref.kind, ref.name, ref.namespace) === undefined) return;
    this.vm.inputs.removeObject(ref);
  }

  private isOurs(raw: ApiObject): boolean {
    return (raw.spec as { nodeName?: string } | undefined)?.nodeName === this.opts.node;
  }

  /** This node's VolumeAttachments only: into the log, and into the attachments it confirms. */
  private onVolumeAttachment(raw: ApiObject, removed: boolean): void {
    if (!this.isOurs(raw)) return;
    const status = (raw.status ?? {}) as {
      attached?: boolean;
      attachmentMetadata?: Record<string, string>;
    };
    if (removed) {
      this.attachments.delete(raw.metadata.name);
      this.removeObject(raw);
    } else {
      const { name } = raw.metadata;
      const view = {
        name,
        attached: status.attached === true,
        attachmentMetadata: status.attachmentMetadata ?? {},
      };
      this.attachments.set(name, view);
      this.upsertObject(raw);
    }
    this.observeAttachments();
  }

  /** Controller-attach mode: what the controller and the attacher confirmed, when it changed. */
  private observeAttachments(): void {
    if (!this.opts.controllerAttachDetach) return;
    const confirmed = confirmedAttachments({
      node: this.opts.node,
      volumesAttached: this.volumesAttached,
      volumeAttachments: this.attachments,
    });
    const text = JSON.stringify(confirmed);
    if (text === this.observedAttached) return;
    this.observedAttached = text;
    this.vm.inputs.observeVolumesAttached(confirmed);
  }

  private onPod(raw: ApiObject): void {
    const parsed = podSchema.safeParse(raw);
    const uid = raw.metadata.uid ?? '';
    if (!parsed.success) {
      this.opts.say(
        `refused pod ${raw.metadata.namespace}/${raw.metadata.name}: ${parsed.error.message}`,
      );
      return;
    }
    const pod = parsed.data;
    const phase = pod.status?.phase;
    // A pod being deleted or finished runs no containers here: its volumes go (the kubelet's
    // podWorkers: terminated), and a deleted one is removed from the API once they are gone.
    if (
      pod.metadata.deletionTimestamp !== undefined ||
      phase === 'Succeeded' ||
      phase === 'Failed'
    ) {
      // The log keeps the API's word (deletionTimestamp, phase) before the removal it causes.
      if (this.vm.world.pods.has(UniquePodName(uid))) this.addPod(pod);
      this.podGone(uid);
      if (pod.metadata.deletionTimestamp !== undefined) this.finalizer.add(pod);
      return;
    }
    const watches = this.contents.follow(uid, contentRefsOf(pod));
    const claims = claimRefsOf(pod);
    this.latestPods.set(uid, pod);
    // As the kubelet's watch-based ConfigMap and Secret managers: a pod's volumes are set
    // up once the objects they read have been listed, never from an empty cache; and, as
    // its populator, once its claims and their volumes have been got.
    const fetched = Promise.all([
      ...watches.map((w) => w.synced),
      this.named.follow(uid, claims).then(() => this.claimVolumesFetched(claims)),
    ]).then(() => {
      if (this.podsFetching.get(uid) === fetched) this.podsFetching.delete(uid);
      if (this.latestPods.get(uid) !== pod) return; // a newer version, or gone
      this.addPod(pod);
    });
    this.podsFetching.set(uid, fetched);
  }

  /** The volumes of these claims (as got), once each was got too. */
  private async claimVolumesFetched(claims: readonly NamedRef[]): Promise<void> {
    await Promise.all(
      claims.map((ref) => {
        const claim = this.vm.world.objects.lookup(ref.kind, ref.name, ref.namespace);
        return claim === undefined ? undefined : this.followClaimVolume(claim as ApiObject);
      }),
    );
  }

  private addPod(apiPod: Pod): void {
    const known = this.vm.world.pods.get(UniquePodName(apiPod.metadata.uid ?? ''));
    const seen = known?.pod.metadata.annotations?.[configSeenAnnotation];
    const pod = withConfigAnnotations(apiPod, seen, this.opts.clock.nowMs());
    try {
      this.vm.inputs.addPod(pod);
    } catch (error) {
      if (!(error instanceof InvalidPodError)) throw error;
      this.opts.say(error.message);
    }
  }

  private podGone(uid: string): void {
    if (uid === '') return;
    this.latestPods.delete(uid);
    this.podErrorsSeen.delete(uid);
    this.opts.forgetPod?.(uid);
    // The pod first: the objects only it read are then forgotten with no reader to remount.
    if (this.vm.world.pods.has(UniquePodName(uid))) this.vm.inputs.removePod(uid);
    this.contents.follow(uid, []);
    void this.named.follow(uid, []);
  }

  private dropUnlistedPods(listed: readonly ApiObject[]): void {
    const uids = new Set(listed.map((o) => o.metadata.uid));
    for (const uid of [...this.vm.world.pods.keys()]) if (!uids.has(uid)) this.podGone(uid);
  }

  /** A ConfigMap or Secret no longer watched, or gone: the world and contents drop it. */
  private forgetContent(ref: ContentRef): void {
    if (this.vm.world.objects.lookup(ref.kind, ref.name, ref.namespace) === undefined) return;
    this.vm.inputs.removeObject(ref);
  }

  /**
   * At start, once the pods and their objects are read: what the log holds from an earlier
   * run that no pod, claim or Node names now goes, as if its watch or gets had ended.
   */
  private forgetUnfollowed(): void {
    const objects = this.vm.world.objects;
    const held = (kind: string) =>
      [...objects.ofKind(kind)].map((o) => ({
        name: o.metadata.name,
        namespace: o.metadata.namespace ?? 'default',
      }));
    for (const kind of ['ConfigMap', 'Secret'] as const)
      for (const ref of held(kind))
        if (!this.contents.follows({ kind, ...ref })) this.forgetContent({ kind, ...ref });
    for (const kind of ['PersistentVolumeClaim', 'PersistentVolume', 'VolumeAttachment'] as const)
      for (const { name, namespace } of held(kind)) {
        const ref = kind === 'PersistentVolumeClaim' ? { kind, name, namespace } : { kind, name };
        if (!this.named.follows(ref)) this.forgetNamed(ref);
      }
  }

  /** Every appended event: status outputs, CSI registration, pod Events, finished deletions. */
  private onEvent(event: VoleEvent, world: World): void {
    if (event.type === 'OperationStarted')
      this.operations.set(event.opId, { pod: event.pod, volume: event.volume });
    if (event.type === 'CsiDriverRegistered') {
      const count = event.caps.csi?.maxVolumesPerNode ?? 0;
      // NodeGetInfo's accessible_topology: its keys in CSINode, its segments as Node labels.
      const topology = event.caps.csi?.accessibleTopology ?? {};
      const keys = Object.keys(topology).sort();
      this.status.driverRegistered(
        {
          name: event.driver,
          nodeID: event.nodeId,
          topologyKeys: keys.length === 0 ? null : keys,
          ...(count > 0 ? { allocatable: { count } } : {}),
        },
        topology,
      );
    }
    if (event.type === 'CsiDriverDeregistered') this.status.driverDeregistered(event.driver);
    // A pod or a CSIDriver changed what needs no attach: looked at again (a no-op if same).
    if (
      event.type === 'PodUpserted' ||
      event.type === 'PodRemoved' ||
      event.type === 'ObjectUpserted'
    )
      this.scheduleAttachmentsCheck();
    const podEvent = podEventOf(event, world, this.operations);
    if (podEvent !== undefined) void this.events.record(podEvent);
    if (event.type === 'OperationFinished') this.operations.delete(event.opId);
    this.scheduleErrorScan();
    this.finalizer.check();
    this.inUse.schedule();
  }

  private scheduleAttachmentsCheck(): void {
    if (this.attachmentsCheck !== null) return;
    this.attachmentsCheck = setImmediate(() => {
      this.attachmentsCheck = null;
      this.observeAttachments();
    });
  }

  /** New resolution errors of the pods (a missing claim, object or driver) as FailedMount. */
  private scheduleErrorScan(): void {
    if (this.errorScan !== null) return;
    this.errorScan = setImmediate(() => {
      this.errorScan = null;
      for (const uid of this.vm.world.pods.keys()) {
        const seen = this.podErrorsSeen.get(uid) ?? new Set<string>();
        const current = podErrorEvents(this.vm.world, uid);
        for (const podEvent of current)
          if (!seen.has(podEvent.message)) void this.events.record(podEvent);
        this.podErrorsSeen.set(uid, new Set(current.map((e) => e.message)));
      }
    });
  }

  async stop(): Promise<void> {
    this.unsubscribe();
    if (this.errorScan !== null) clearImmediate(this.errorScan);
    if (this.attachmentsCheck !== null) clearImmediate(this.attachmentsCheck);
    this.status.stop();
    this.heartbeat?.stop();
    this.inUse.stop();
    this.finalizer.stop();
    this.named.stop();
    await Promise.all([...this.informers.map((i) => i.stop()), this.contents.stop()]);
  }
}

/** One ConfigMap's or Secret's collection, selected down to it by name. */
function contentRef(ref: ContentRef): ResourceRef {
  const plural = ref.kind === 'ConfigMap' ? 'configmaps' : 'secrets';
  const path = `namespaces/${encodeURIComponent(ref.namespace)}/${plural}`;
  return core(path, ref.kind, `metadata.name=${ref.name}`);
}

/** The owner of the VolumeAttachments the Node lists (NamedGets). */
const nodeOwner = 'Node';

/** The owner of a claim's volume (NamedGets): the claim. */
const claimOwner = (namespace: string | undefined, name: string) =>
  `PersistentVolumeClaim/${namespace ?? 'default'}/${name}`;

/**
 * When a claim, volume or VolumeAttachment is got again: soon while it is missing or not
 * settled (a claim or volume not Bound, an attachment not attached), so a binding or an
 * attach is seen within a second; rarely once settled, for a resize or a change of status.
 */
function namedGetPeriodMs(ref: NamedRef, raw: JsonObject | undefined): number {
  const status = (raw?.status ?? {}) as { phase?: string; attached?: boolean };
  const settled =
    ref.kind === 'VolumeAttachment' ? status.attached === true : status.phase === 'Bound';
  return settled ? kubeNamedGetSettledMs : kubeNamedGetPendingMs;
}
