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
import type { Logger } from 'pino';
import { ControllerManager } from '../agent/controller-manager.js';
import { RealClock } from '../clock.js';
import { maxWaitForUnmountMsDefault } from '../controller/index.js';
import { type ManifestObject, manifestObject, objectKey, pod as podSchema } from '../events/k8s.js';
import { UniquePodName } from '../ids.js';
import { describeInvalid, validate } from '../sources/validate.js';
import type { KubeHttp } from './http.js';
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
import { KubeLeadership } from './lease.js';
import { PodEventRecorder } from './pod-events.js';
import { VolumesAttachedWriter } from './volumes-attached.js';
import { vaPlugin, VolumeAttachmentCache } from './va-plugin.js';

/** The controllers `vole controller --kubeconfig --controllers` runs. */
export const kubeControllers = ['attachdetach', 'persistentvolume-binder'] as const;
export type KubeControllerName = (typeof kubeControllers)[number];

export interface KubeControllerOptions {
  readonly http: KubeHttp;
  readonly db: string;
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
  private readonly cache = new VolumeAttachmentCache();
  /** What the informers hold now: the drivers are derived from it. */
  private readonly known = new Map<string, ApiObject>();
  private drivers = new Map<string, boolean>();
  private restarting = false;

  constructor(private readonly opts: KubeControllerOptions) {}

  get world(): ControllerManager['world'] | undefined {
    return this.cm?.world;
  }

  /** Campaigns, then leads until the Lease is lost or `signal` aborts. */
  async run(signal: AbortSignal): Promise<{ lost: boolean; message: string }> {
    const { http, identity, leaseNamespace, leaseName, leaseDurationMs, say } = this.opts;
    const leadership = await KubeLeadership.campaign({
      http,
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

  private async lead(): Promise<void> {
    const { http, say } = this.opts;
    // The drivers first: the engine records its plugins when it starts.
    const [pvs, csiDriverList] = await Promise.all([
      http.get('/api/v1/persistentvolumes'),
      http.get('/apis/storage.k8s.io/v1/csidrivers'),
    ]);
    const listed = [
      ...((pvs.items ?? []) as ApiObject[]).map((o) => ({ ...o, kind: 'PersistentVolume' })),
      ...((csiDriverList.items ?? []) as ApiObject[]).map((o) => ({ ...o, kind: 'CSIDriver' })),
    ];
    for (const o of listed)
      this.known.set(objectKey(o.kind as ManifestObject['kind'], o.metadata.name), o);
    this.drivers = csiDrivers(this.known.values());
    this.startManager();
    say(`leading: CSI drivers [${driversText(this.drivers)}], log ${this.opts.db}`);
    this.startInformers();
    await Promise.all(this.informers.map((i) => i.synced));
    // Pods last: their claims, PVs and Nodes are in the log before them.
    const pods = this.watch(core('pods', 'Pod', 'spec.nodeName!='), {
      upsert: (o) => this.onPod(o),
      remove: (o) => this.podGone(o.metadata.uid ?? ''),
      listed: (all) => this.dropUnlistedPods(all),
    });
    await pods.synced;
  }

  private startManager(): void {
    const plugins = [...this.drivers].map(([driver, attachRequired]) =>
      vaPlugin(driver, attachRequired, {
        http: this.opts.http,
        cache: this.cache,
        fence: this.fence,
      }),
    );
    const cm = ControllerManager.open({
      db: this.opts.db,
      plugins,
      clock: new RealClock(),
      logger: this.opts.logger,
      maxWaitForUnmountMs: this.opts.maxWaitForUnmountMs ?? maxWaitForUnmountMsDefault,
    });
    this.cm = cm;
    this.opts.onManager?.(cm);
    cm.start();
    const writer = new VolumesAttachedWriter({
      http: this.opts.http,
      cm,
      fence: this.fence,
      say: this.opts.say,
    });
    const recorder = new PodEventRecorder({
      http: this.opts.http,
      node: this.opts.identity,
      logger: this.opts.logger,
      component: 'attachdetach-controller',
    });
    const unsubscribe = cm.subscribe((event, world) => {
      if (event.type !== 'ReportRaised') return;
      const record = world.pods.get(UniquePodName(event.pod));
      if (record === undefined) return;
      const { name, namespace = 'default' } = record.pod.metadata;
      const pod = { uid: event.pod, name, namespace };
      void this.fence()
        .then(() =>
          recorder.record({ pod, type: 'Warning', reason: event.reason, message: event.message }),
        )
        .catch((error: Error) => this.opts.say(`Event not written: ${error.message}`));
    });
    writer.start();
    this.stops.push(unsubscribe, () => writer.stop());
    if (this.opts.controllers?.includes('persistentvolume-binder') === true) {
      const binder = new KubeClaimBinder({
        http: this.opts.http,
        cm,
        fence: this.fence,
        say: this.opts.say,
      });
      binder.start();
      this.stops.push(() => binder.stop());
    }
  }

  private startInformers(): void {
    this.watch(core('nodes', 'Node'), this.objectHandlers('Node'));
    this.watch(
      core('persistentvolumes', 'PersistentVolume'),
      this.objectHandlers('PersistentVolume'),
    );
    this.watch(
      core('persistentvolumeclaims', 'PersistentVolumeClaim'),
      this.objectHandlers('PersistentVolumeClaim'),
    );
    this.watch(storage('csidrivers', 'CSIDriver'), this.objectHandlers('CSIDriver'));
    this.watch(storage('volumeattachments', 'VolumeAttachment'), {
      upsert: (o) => {
        this.cache.set(o);
        this.upsertObject(o);
      },
      remove: (o) => {
        this.cache.remove(o.metadata.name);
        this.removeObject(o);
      },
      listed: (all) => this.dropUnlisted('VolumeAttachment', all),
    });
  }

  private watch(ref: ResourceRef, handlers: Omit<InformerHandlers, 'trouble'>): KubeInformer {
    const informer = startInformer(this.opts.http, ref, handlers, this.opts.say);
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
    const informers = this.informers;
    this.informers = [];
    for (const informer of informers) await informer.stop().catch(() => undefined);
    const stops = this.stops;
    this.stops = [];
    for (const stop of stops) await stop();
    const cm = this.cm;
    this.cm = null;
    if (cm?.isRunning === true) cm.stop();
  }
}
