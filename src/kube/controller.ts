/**
 * `vole controller --kubeconfig`: the attach/detach controller on a real API server, in
 * place of kube-controller-manager's (run that with `--controllers=*,-attachdetach`).
 *
 * One replica of several: it campaigns for a Lease; the leader opens its log, follows
 * Pods (scheduled ones), Nodes, claims, PVs, CSIDrivers and VolumeAttachments through
 * informers — each one an event in its log, resourceVersion included — attaches CSI
 * volumes by VolumeAttachments (va-plugin.ts), writes `status.volumesAttached` on Nodes
 * and Multi-Attach errors as Events on pods. Every write is fenced on the Lease; losing it
 * stops everything at once. The plugins are one per CSI driver the PVs and CSIDrivers
 * name, recorded in EngineStarted: a new driver or a changed attachRequired starts the
 * engine again (a new EngineStarted), as a restart would.
 */
import type { GroupCommitterOptions } from '../log/group-commit-options.js';
import type { Logger } from 'pino';
import { ControllerManager } from '../agent/controller-manager.js';
import type { LogOptions } from '../agent/lifecycle.js';
import type { Clock } from '../clock.js';
import { type ControllerWorld, maxWaitForUnmountMsDefault } from '../controller/index.js';
import { type ManifestObject, manifestObject, objectKey, pod as podSchema } from '../events/k8s.js';
import { NodeName, UniquePodName } from '../ids.js';
import { describeInvalid, validate } from '../sources/validate.js';
import { type JsonObject, KubeApiError, type KubeTransport } from './http.js';
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
import { KubeClaimBinder } from './claim-binder.js';
import { attachmentsFound } from './found.js';
import { KubeLeadership } from './lease.js';
import { nodeUpdateChangesNothing } from './node-projection.js';
import { ClaimEvents } from './claim-events.js';
import { EventRecorder } from './pod-events.js';
import { VolumesAttachedWriter } from './volumes-attached.js';
import { vaPlugin, VolumeAttachmentCache } from './va-plugin.js';

/** The controllers `vole controller --kubeconfig --controllers` runs. */
export const kubeControllers = ['attachdetach', 'persistentvolume-binder'] as const;
export type KubeControllerName = (typeof kubeControllers)[number];

export interface KubeControllerOptions {
  readonly http: KubeTransport;
  /** Every timer and timestamp, the engine's too (virtual in the simulator). */
  readonly clock: Clock;
  readonly db: string;
  /** A log other than the SQLite file at `db` (the simulator's, in memory). */
  readonly log?: LogOptions<ControllerWorld>;
  readonly identity: string;
  readonly leaseNamespace: string;
  readonly leaseName: string;
  readonly leaseDurationMs: number;
  readonly maxWaitForUnmountMs?: number;
  /**
   * What it runs in kube-controller-manager's place (default: attachdetach): with
   * persistentvolume-binder it writes the claim bindings its planner makes (claim-binder.ts).
   */
  readonly controllers?: readonly KubeControllerName[];
  readonly logger: Logger;
  readonly say: (line: string) => void;
  /** Called with each new manager (the CLI shows its progress). */
  readonly onManager?: (cm: ControllerManager) => void;
  /**
   * Told when the log cannot be written, and (onHalted) when the whole-file check found it
   * damaged: the CLI then stops the controller, exit 2.
   */
  readonly logBlocked?: GroupCommitterOptions;
}

/** Each CSI driver named by a PV or a CSIDriver, with its attachRequired (default true). */
export function csiDrivers(objects: Iterable<ApiObject>): Map<string, boolean> {
  const drivers = new Map<string, boolean>();
  const explicit = new Set<string>();
  for (const o of objects) {
    if (o.kind === 'CSIDriver') {
      const spec = (o.spec ?? {}) as { attachRequired?: boolean };
      drivers.set(o.metadata.name, spec.attachRequired ?? true);
      explicit.add(o.metadata.name);
    } else if (o.kind === 'PersistentVolume') {
      const driver = (o.spec as { csi?: { driver?: string } } | undefined)?.csi?.driver;
      if (driver !== undefined && !explicit.has(driver)) drivers.set(driver, true);
    }
  }
  return drivers;
}

/** A deleted pod none of whose containers runs: terminated, as Kubernetes' IsPodTerminated. */
export function deletedAndStopped(raw: ApiObject): boolean {
  if (raw.metadata.deletionTimestamp === undefined) return false;
  const status = (raw.status ?? {}) as Record<string, { state?: { running?: unknown } }[]>;
  const all = ['initContainerStatuses', 'containerStatuses', 'ephemeralContainerStatuses'];
  return all.every((field) => (status[field] ?? []).every((c) => c.state?.running === undefined));
}

const driversText = (d: ReadonlyMap<string, boolean>) =>
  [...d]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([n, r]) => `${n}=${r}`)
    .join(',');

export class KubeController {
  private leadership: KubeLeadership | null = null;
  private cm: ControllerManager | null = null;
  private informers: KubeInformer[] = [];
  private stops: (() => void | Promise<void>)[] = [];
  private readonly cache: VolumeAttachmentCache;
  /** What the informers hold now: the drivers are derived from it. */
  private readonly known = new Map<string, ApiObject>();
  private drivers = new Map<string, boolean>();
  private restarting = false;
  private writer: VolumesAttachedWriter | null = null;
  /** While the informers first list: their objects by kind, fed once all have listed. */
  private pending: Map<string, Map<string, ApiObject>> | null = null;

  constructor(private readonly opts: KubeControllerOptions) {
    this.cache = new VolumeAttachmentCache(opts.clock);
  }

  get world(): ControllerManager['world'] | undefined {
    return this.cm?.world;
  }

  /** Campaigns, then leads until the Lease is lost or `signal` aborts. */
  async run(signal: AbortSignal): Promise<{ lost: boolean; message: string }> {
    const { http, clock, identity, leaseNamespace, leaseName, leaseDurationMs, say } = this.opts;
    const leadership = await KubeLeadership.campaign({
      http,
      clock,
      identity,
      namespace: leaseNamespace,
      name: leaseName,
      leaseDurationMs,
      signal,
      say,
    });
    this.leadership = leadership;
    const ended = new Promise<{ lost: boolean; message: string }>((resolve) => {
      leadership.onLost((error) => resolve({ lost: true, message: error.message }));
      signal.addEventListener('abort', () => resolve({ lost: false, message: 'stopped' }), {
        once: true,
      });
    });
    leadership.onLost(() => void this.halt());
    if (!leadership.isLost && !signal.aborted) {
      try {
        await this.lead();
      } catch (error) {
        leadership.lose(`could not start leading: ${(error as Error).message}`);
      }
    }
    const result = await ended;
    await this.halt();
    if (!result.lost) await leadership.resign();
    return result;
  }

  private fence = (): Promise<void> => {
    const leadership = this.leadership;
    if (leadership === null) return Promise.reject(new Error('this replica does not lead'));
    return leadership.fence();
  };

  /**
   * Lists everything first, the engine not yet started: then EngineStarted, the objects,
   * the attachments the API server shows (another leader's work), and the pods, in one go,
   * so the planner's first look sees all of them (populateActualStateOfWorld, then the
   * desired state, as Kubernetes' controller starts).
   */
  private async lead(): Promise<void> {
    const pending = new Map<string, Map<string, ApiObject>>();
    this.pending = pending;
    let halted = false;
    const stopped = new Promise<void>((resolve) =>
      this.stops.push(() => ((halted = true), resolve())),
    );
    this.startInformers();
    await Promise.race([Promise.all(this.informers.map((i) => i.synced)), stopped]);
    if (halted || this.pending !== pending) return; // stopped meanwhile
    this.drivers = csiDrivers(this.known.values());
    this.startManager();
    this.pending = null;
    const of = (kind: string) => [...(pending.get(kind)?.values() ?? [])];
    for (const kind of [
      'Node',
      'StorageClass',
      'PersistentVolume',
      'PersistentVolumeClaim',
      'CSIDriver',
    ] as const) {
      for (const o of of(kind)) this.upsertObject(o);
      this.dropUnlisted(kind, of(kind));
    }
    for (const o of of('VolumeAttachment')) this.upsertObject(o);
    this.dropUnlisted('VolumeAttachment', of('VolumeAttachment'));
    const found = attachmentsFound(of('Node'), of('PersistentVolume'), of('VolumeAttachment'));
    this.cm?.attachmentsFound(found);
    const pods = of('Pod');
    for (const o of pods) this.onPod(o);
    this.dropUnlistedPods(pods);
    const what = found.map((f) => `${f.volume} on ${f.node}${f.attached ? '' : '?'}`).join(', ');
    this.opts.say(`found ${found.length} attachment(s) on the API server before acting: ${what}`);
    this.opts.say(`leading: CSI drivers [${driversText(this.drivers)}], log ${this.opts.db}`);
  }

  private startManager(): void {
    const plugins = [...this.drivers].map(([driver, attachRequired]) =>
      vaPlugin(driver, attachRequired, {
        http: this.opts.http,
        cache: this.cache,
        fence: this.fence,
      }),
    );
    const options = {
      plugins,
      clock: this.opts.clock,
      logger: this.opts.logger,
      maxWaitForUnmountMs: this.opts.maxWaitForUnmountMs ?? maxWaitForUnmountMsDefault,
      externalProvisioning: this.opts.controllers?.includes('persistentvolume-binder') === true,
      ...(this.opts.logBlocked === undefined ? {} : { logBlocked: this.opts.logBlocked }),
      nodeInUseCheck: (node: string, volume: string) => this.nodeInUse(node, volume),
    };
    const { log, db } = this.opts;
    const cm =
      log === undefined
        ? ControllerManager.open({ ...options, db })
        : ControllerManager.create({ ...options, log });
    this.cm = cm;
    this.opts.onManager?.(cm);
    cm.start();
    const writer = new VolumesAttachedWriter({
      http: this.opts.http,
      clock: this.opts.clock,
      cm,
      fence: this.fence,
      say: this.opts.say,
      observedNode: (name) => this.known.get(objectKey('Node', name)),
    });
    this.writer = writer;
    const recorder = new EventRecorder({
      http: this.opts.http,
      clock: this.opts.clock,
      node: this.opts.identity,
      logger: this.opts.logger,
      component: 'attachdetach-controller',
    });
    const unsubscribe = cm.subscribe((event, world) => {
      if (event.type !== 'ReportRaised') return;
      const record = world.pods.get(UniquePodName(event.pod));
      if (record === undefined) return;
      const { name, namespace = 'default' } = record.pod.metadata;
      const object = { kind: 'Pod' as const, uid: event.pod, name, namespace };
      void this.fence()
        .then(() =>
          recorder.record({
            object,
            type: 'Warning',
            reason: event.reason,
            message: event.message,
          }),
        )
        .catch((error: Error) => this.opts.say(`Event not written: ${error.message}`));
    });
    writer.start();
    this.stops.push(unsubscribe, () => ((this.writer = null), writer.stop()));
    if (this.opts.controllers?.includes('persistentvolume-binder') === true) this.startBinder(cm);
  }

  /**
   * verifyVolumeIsSafeToDetach on the API server: the node's volumesAttached without the
   * volume written first (the detach's OperationStarted took it out of the report), then
   * the Node read with a GET, not from the informer. Either the kubelet's volumesInUse
   * patch landed before this GET and the detach is refused, or it lands after the
   * volumesAttached write and the kubelet's own GET (verifyControllerAttachedVolume) finds
   * the volume gone and mounts nothing.
   */
  private async nodeInUse(node: string, volume: string): Promise<boolean> {
    const writer = this.writer;
    if (writer === null) throw new Error('this replica does not lead: no detach may start');
    await writer.publishNode(node);
    let object: JsonObject;
    try {
      object = await this.opts.http.get(`/api/v1/nodes/${encodeURIComponent(node)}`);
    } catch (error) {
      if (error instanceof KubeApiError && error.statusCode === 404) return false; // gone
      throw error;
    }
    const inUse = (object.status as { volumesInUse?: unknown } | undefined)?.volumesInUse;
    return Array.isArray(inUse) && inUse.includes(volume);
  }

  /** The PV controller's part: bindings and external provisioning written, claim Events. */
  private startBinder(cm: ControllerManager): void {
    const { http, clock, say, identity, logger } = this.opts;
    const binder = new KubeClaimBinder({ http, clock, cm, fence: this.fence, say });
    binder.start();
    const component = 'persistentvolume-controller';
    const recorder = new EventRecorder({ http, clock, node: identity, logger, component });
    const claimEvents = new ClaimEvents({ cm, recorder, clock, fence: this.fence, say });
    claimEvents.start();
    this.stops.push(
      () => binder.stop(),
      () => claimEvents.stop(),
    );
  }

  private startInformers(): void {
    const objects = (kind: ManifestObject['kind']) =>
      this.buffered(kind, this.objectHandlers(kind));
    this.watch(core('nodes', 'Node'), objects('Node'));
    this.watch(core('persistentvolumes', 'PersistentVolume'), objects('PersistentVolume'));
    this.watch(
      core('persistentvolumeclaims', 'PersistentVolumeClaim'),
      objects('PersistentVolumeClaim'),
    );
    this.watch(storage('csidrivers', 'CSIDriver'), objects('CSIDriver'));
    // The binder reads classes: their provisioner, binding mode and default.
    if (this.opts.controllers?.includes('persistentvolume-binder') === true)
      this.watch(storage('storageclasses', 'StorageClass'), objects('StorageClass'));
    const vas = this.buffered('VolumeAttachment', {
      upsert: (o) => this.upsertObject(o),
      remove: (o) => this.removeObject(o),
      listed: (all) => this.dropUnlisted('VolumeAttachment', all),
    });
    this.watch(storage('volumeattachments', 'VolumeAttachment'), {
      upsert: (o) => (this.cache.set(o), vas.upsert(o)),
      remove: (o) => (this.cache.remove(o.metadata.name), vas.remove(o)),
      listed: (all) => vas.listed?.(all),
    });
    this.watch(
      core('pods', 'Pod', 'spec.nodeName!='),
      this.buffered('Pod', {
        upsert: (o) => this.onPod(o),
        remove: (o) => this.podGone(o.metadata.uid ?? ''),
        listed: (all) => this.dropUnlistedPods(all),
      }),
    );
  }

  /** Until every informer has listed, objects wait in `pending` (the drivers learn them). */
  private buffered(kind: string, live: Omit<InformerHandlers, 'trouble'>) {
    const key = (o: ApiObject) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;
    const held = () => {
      const pending = this.pending;
      if (pending === null) return undefined;
      const map = pending.get(kind) ?? new Map<string, ApiObject>();
      pending.set(kind, map);
      return map;
    };
    return {
      upsert: (o: ApiObject) => {
        const map = held();
        if (map === undefined) return live.upsert(o);
        map.set(key(o), o);
        if (kind === 'PersistentVolume' || kind === 'CSIDriver')
          this.known.set(objectKey(kind, o.metadata.name), o);
      },
      remove: (o: ApiObject) => {
        const map = held();
        if (map === undefined) return live.remove(o);
        map.delete(key(o));
        this.known.delete(objectKey(kind as ManifestObject['kind'], o.metadata.name));
      },
      listed: (all: readonly ApiObject[]) => {
        if (held() === undefined) live.listed?.(all);
      },
    };
  }

  private watch(ref: ResourceRef, handlers: Omit<InformerHandlers, 'trouble'>): KubeInformer {
    const informer = startInformer(this.opts, ref, handlers, this.opts.say);
    this.informers.push(informer);
    return informer;
  }

  private objectHandlers(kind: ManifestObject['kind']) {
    return objectHandlers<ManifestObject['kind']>(this, kind);
  }

  private get running(): ControllerManager | undefined {
    const cm = this.cm;
    return cm !== null && cm.isRunning && !this.restarting ? cm : undefined;
  }

  /** @internal */
  upsertObject(raw: ApiObject): void {
    const cm = this.running;
    if (cm === undefined) return;
    if (raw.kind === 'Node' && this.unchangedNode(cm, raw)) return;
    const errors = validate(raw);
    const parsed = manifestObject.safeParse(raw);
    if (errors.length > 0 || !parsed.success) {
      const what = { kind: raw.kind, name: raw.metadata.name, namespace: raw.metadata.namespace };
      const why = errors.length > 0 ? describeInvalid(errors, what) : parsed.error?.message;
      this.opts.say(`refused ${raw.kind} ${raw.metadata.name} from the API: ${why}`);
      return;
    }
    const key = objectKey(
      raw.kind as ManifestObject['kind'],
      raw.metadata.name,
      raw.metadata.namespace,
    );
    this.known.set(key, raw);
    if (raw.kind === 'CSIDriver' || raw.kind === 'PersistentVolume') this.checkDrivers();
    if (this.running !== undefined) cm.upsertObject(parsed.data);
  }

  /**
   * A Node update whose fold would change nothing (nodeUpdateChangesNothing): not logged,
   * but the writer compares its volumesAttached with the world's.
   */
  private unchangedNode(cm: ControllerManager, raw: ApiObject): boolean {
    const key = objectKey('Node', raw.metadata.name);
    const logged = cm.world.objects.get(key);
    const record = cm.world.nodes.get(NodeName(raw.metadata.name));
    if (logged?.kind !== 'Node' || !nodeUpdateChangesNothing(logged, record, raw)) return false;
    this.known.set(key, raw);
    this.writer?.nodeObserved(raw.metadata.name);
    return true;
  }

  /** @internal */
  removeObject(raw: ApiObject): void {
    const kind = raw.kind as ManifestObject['kind'];
    const { name, namespace } = raw.metadata;
    this.known.delete(objectKey(kind, name, namespace));
    const cm = this.running;
    if (cm === undefined || !cm.world.objects.has(objectKey(kind, name, namespace))) return;
    cm.removeObject({ kind, name, ...(namespace === undefined ? {} : { namespace }) });
  }

  /** @internal */
  dropUnlisted(kind: ManifestObject['kind'], listed: readonly ApiObject[]): void {
    const cm = this.running;
    if (cm === undefined) return;
    const names = new Set(listed.map((o) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`));
    for (const [, object] of cm.world.objects) {
      if (object.kind !== kind) continue;
      const { name, namespace } = object.metadata;
      if (names.has(`${namespace ?? ''}/${name}`)) continue;
      this.known.delete(objectKey(kind, name, namespace));
      cm.removeObject({ kind, name, ...(namespace === undefined ? {} : { namespace }) });
    }
  }

  private onPod(raw: ApiObject): void {
    const cm = this.running;
    if (cm === undefined) return;
    const parsed = podSchema.safeParse(raw);
    if (!parsed.success) {
      const what = `${raw.metadata.namespace}/${raw.metadata.name}`;
      return this.opts.say(`refused pod ${what}: ${parsed.error.message}`);
    }
    const pod = parsed.data;
    const uid = UniquePodName(pod.metadata.uid ?? '');
    if (!deletedAndStopped(raw)) return cm.upsertPod(pod);
    // Kubernetes' populator drops a deleted pod none of whose containers runs (terminated):
    // the log keeps the API's word, then the pod goes.
    if (!cm.world.pods.has(uid)) return;
    cm.upsertPod(pod);
    cm.removePod(uid);
  }

  private podGone(uid: string): void {
    const cm = this.running;
    if (cm !== undefined && cm.world.pods.has(UniquePodName(uid))) cm.removePod(uid);
  }

  private dropUnlistedPods(listed: readonly ApiObject[]): void {
    const cm = this.running;
    if (cm === undefined) return;
    const uids = new Set(listed.map((o) => o.metadata.uid ?? ''));
    for (const uid of [...cm.world.pods.keys()]) if (!uids.has(uid)) cm.removePod(uid);
  }

  /** A new CSI driver, or a changed attachRequired: the engine starts again with it. */
  private checkDrivers(): void {
    const next = csiDrivers(this.known.values());
    for (const [driver, required] of this.drivers)
      if (!next.has(driver)) next.set(driver, required);
    if (driversText(next) === driversText(this.drivers) || this.restarting) return;
    this.restarting = true;
    this.opts.say(`CSI drivers now [${driversText(next)}]: starting the engine again`);
    setImmediate(() => void this.restart());
  }

  private async restart(): Promise<void> {
    await this.halt();
    this.restarting = false;
    if (this.leadership === null || this.leadership.isLost) return;
    try {
      await this.lead();
    } catch (error) {
      this.leadership.lose(`could not start again: ${(error as Error).message}`);
    }
  }

  /** Stops at once: running calls are cut off, nothing more is written. */
  private async halt(): Promise<void> {
    this.pending = null;
    const informers = this.informers;
    this.informers = [];
    const informersStopped = informers.map((informer) => informer.stop().catch(() => undefined));
    // The engine stops at once, before anything below is awaited: a stop that waits on the
    // API server (a write in flight to a server that no longer answers) must not leave it
    // acting, its verifier appending, while another process of this replica takes the log.
    const cm = this.cm;
    this.cm = null;
    if (cm?.isRunning === true) cm.stop();
    await Promise.all(informersStopped);
    const stops = this.stops;
    this.stops = [];
    for (const stop of stops) await stop();
  }
}
