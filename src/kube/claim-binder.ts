/**
 * `vole controller --kubeconfig --controllers …,persistentvolume-binder`: the claim
 * bindings the controller's planner records (ClaimBound, by the persistent-volume
 * controller's rules: src/binding/claims.ts) written to the API server as Kubernetes'
 * PersistentVolume controller writes them (pv_controller.go bind): the PV first
 * (bindVolumeToClaim: `spec.claimRef` naming the claim with its uid and resourceVersion,
 * annotation `pv.kubernetes.io/bound-by-controller: "yes"` unless the claimRef already named
 * it; then `status.phase: Bound`), then the claim (bindClaimToVolume: `spec.volumeName`,
 * annotations `pv.kubernetes.io/bound-by-controller` unless it named the PV already and
 * `pv.kubernetes.io/bind-completed`; then `status`: phase Bound, the PV's access modes and
 * capacity). A PV nobody claims gets phase Available (syncVolume). The decisions left to
 * Kubernetes' external-provisioner (src/controller/plan-external.ts) are written as
 * the PV controller writes them: a claim's `volume.kubernetes.io/storage-provisioner` and
 * `volume.beta.kubernetes.io/storage-provisioner` annotations (setClaimProvisioner; with
 * `volume.kubernetes.io/selected-node`, the scheduler's part, for WaitForFirstConsumer),
 * and a PV's `status.phase: Released` once the API server confirms its claim is gone. Each
 * write is an update carrying the object's resourceVersion (a conflict is read again) and
 * is fenced on the Lease. Run kube-controller-manager with
 * `--controllers=*,-persistentvolume-binder-controller,…` beside it.
 */
import type { ControllerManager } from '../agent/controller-manager.js';
import { kubeWriteRetryMs } from '../constants.js';
import type { EventOf } from '../events/index.js';
import { objectKey } from '../events/k8s.js';
import { requestedAnnotations, selectedNodeAnnotation } from '../binding/external-provisioning.js';
import { type Clock, sleep } from '../clock.js';
import { KubeApiError, type KubeTransport } from './http.js';

const boundByControllerAnnotation = 'pv.kubernetes.io/bound-by-controller';
const bindCompletedAnnotation = 'pv.kubernetes.io/bind-completed';

export interface ClaimBinderOptions {
  readonly http: KubeTransport;
  readonly clock: Clock;
  readonly cm: Pick<ControllerManager, 'world' | 'subscribe'>;
  readonly fence: () => Promise<void>;
  readonly say: (line: string) => void;
}

interface ApiMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  annotations?: Record<string, string>;
}
interface ApiPv {
  metadata: ApiMeta & { deletionTimestamp?: string };
  spec: {
    claimRef?: { name?: string; namespace?: string; uid?: string };
    accessModes?: string[];
    capacity?: Record<string, string>;
  };
  status?: { phase?: string };
}
interface ApiPvc {
  metadata: ApiMeta;
  spec: { volumeName?: string };
  status?: { phase?: string };
}

const pvPath = (name: string) => `/api/v1/persistentvolumes/${encodeURIComponent(name)}`;
const pvcPath = (namespace: string, name: string) =>
  `/api/v1/namespaces/${encodeURIComponent(namespace)}/persistentvolumeclaims/` +
  encodeURIComponent(name);

function annotated(meta: ApiMeta, key: string): ApiMeta {
  if (meta.annotations?.[key] !== undefined) return meta;
  return { ...meta, annotations: { ...meta.annotations, [key]: 'yes' } };
}

/** Does the PV's claimRef name this claim (and its uid)? isVolumeBoundToClaim. */
function namesClaim(pv: ApiPv, pvc: ApiPvc): boolean {
  const ref = pv.spec.claimRef;
  return (
    ref?.name === pvc.metadata.name &&
    (ref.namespace ?? 'default') === (pvc.metadata.namespace ?? 'default') &&
    (ref.uid === undefined || ref.uid === pvc.metadata.uid)
  );
}

type Request = EventOf<'ExternalProvisioningRequested'>;
const requestPrefix = 'external/';
const releasedPrefix = 'released//';

export class KubeClaimBinder {
  private readonly dirty = new Set<string>();
  /** The last external-provisioning request per claim (`external/<ns>/<name>`), to write. */
  private readonly requests = new Map<string, Request>();
  private scheduled = false;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;
  private unsubscribe: () => void = () => undefined;
  /** Bindings the API holds after this writer's updates (for tests and the progress line). */
  written = 0;

  constructor(private readonly opts: ClaimBinderOptions) {}

  start(): void {
    for (const key of this.opts.cm.world.bindings.keys()) this.dirty.add(key);
    this.unsubscribe = this.opts.cm.subscribe((event) => {
      if (event.type === 'ClaimBound')
        this.mark(objectKey('PersistentVolumeClaim', event.claim, event.namespace));
      else if (event.type === 'ExternalProvisioningRequested') {
        const key = `${requestPrefix}${event.namespace}/${event.claim}`;
        this.requests.set(key, event);
        this.mark(key);
      } else if (event.type === 'VolumeReleased') this.mark(`${releasedPrefix}${event.pv}`);
      else if (event.type === 'ObjectUpserted' && event.object.kind === 'PersistentVolume') {
        // syncVolume: a PV nobody claims is Available (its phase is Pending when created).
        const { object } = event;
        const phase = object.status?.phase;
        const free = object.spec.claimRef?.name === undefined;
        if (free && (phase === undefined || phase === 'Pending'))
          this.mark(objectKey('PersistentVolume', object.metadata.name));
      } else if (event.type === 'ObjectUpserted' && event.object.kind === 'PersistentVolumeClaim') {
        const { name, namespace } = event.object.metadata;
        const key = objectKey('PersistentVolumeClaim', name, namespace);
        if (this.opts.cm.world.bindings.has(key)) this.mark(key);
      }
    });
    this.schedule();
  }

  private mark(key: string): void {
    this.dirty.add(key);
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled || this.stopped || this.dirty.size === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const keys = [...this.dirty].sort();
      this.dirty.clear();
      this.running = this.running.then(() => this.writeAll(keys));
    });
  }

  private async writeAll(keys: readonly string[]): Promise<void> {
    for (const key of keys) {
      if (this.stopped) return;
      try {
        await this.bind(key);
      } catch (error) {
        if (this.stopped) return;
        const conflict = error instanceof KubeApiError && error.statusCode === 409;
        if (!conflict)
          this.opts.say(`binding of ${key} not written, retrying: ${(error as Error).message}`);
        await sleep(this.opts.clock, conflict ? 100 : kubeWriteRetryMs);
        this.mark(key);
      }
    }
  }

  /** syncVolume for an unclaimed PV: its phase Available, unless it was claimed meanwhile. */
  private async available(name: string): Promise<void> {
    const pv = await this.got<ApiPv>(pvPath(name));
    if (pv === undefined || pv.spec.claimRef?.name !== undefined) return;
    if (pv.status?.phase !== undefined && pv.status.phase !== 'Pending') return;
    await this.update(`${pvPath(name)}/status`, {
      ...pv,
      status: { ...pv.status, phase: 'Available' },
    });
  }

  /** The object at `path`, or undefined when the API server has none. */
  private async got<T>(path: string): Promise<T | undefined> {
    return (await this.opts.http.get(path).catch((error: unknown) => {
      if (error instanceof KubeApiError && error.statusCode === 404) return undefined;
      throw error;
    })) as T | undefined;
  }

  /**
   * setClaimProvisioner (and the scheduler's selected node): the claim's annotations, unless
   * it is gone, bound meanwhile, or annotated already. A selected node set by someone else
   * (a scheduler) stays.
   */
  private async annotate(key: string): Promise<void> {
    const request = this.requests.get(key);
    if (request === undefined) return;
    const pvc = await this.got<ApiPvc>(pvcPath(request.namespace, request.claim));
    if (pvc === undefined || (pvc.spec.volumeName ?? '') !== '') {
      this.requests.delete(key);
      return;
    }
    const has = pvc.metadata.annotations ?? {};
    const wanted = requestedAnnotations(request);
    if (has[selectedNodeAnnotation]) wanted[selectedNodeAnnotation] = has[selectedNodeAnnotation];
    if (Object.entries(wanted).every(([k, v]) => has[k] === v)) {
      this.requests.delete(key);
      return;
    }
    const annotations = { ...has, ...wanted };
    await this.update(pvcPath(request.namespace, request.claim), {
      ...pvc,
      metadata: { ...pvc.metadata, annotations },
    });
    if (this.requests.get(key) === request) this.requests.delete(key);
    this.written++;
  }

  /**
   * syncVolume for a PV whose claim is gone: Released, once the API server confirms the
   * claim its claimRef names (by uid) does not exist; a Failed or Released one stays.
   */
  private async release(name: string): Promise<void> {
    const pv = await this.got<ApiPv>(pvPath(name));
    if (pv === undefined || pv.metadata.deletionTimestamp !== undefined) return;
    if (pv.status?.phase === 'Released' || pv.status?.phase === 'Failed') return;
    const ref = pv.spec.claimRef;
    if (ref?.name === undefined || ref.uid === undefined || ref.uid === '') return;
    const pvc = await this.got<ApiPvc>(pvcPath(ref.namespace ?? 'default', ref.name));
    if (pvc !== undefined && pvc.metadata.uid === ref.uid)
      return this.opts.say(`not releasing ${name}: its claim ${ref.name} still exists`);
    await this.update(`${pvPath(name)}/status`, {
      ...pv,
      status: { ...pv.status, phase: 'Released' },
    });
    this.written++;
  }

  /** pv_controller.go bind: the PV, its phase, the claim, its status; each only if needed. */
  private async bind(key: string): Promise<void> {
    if (key.startsWith('PersistentVolume//'))
      return this.available(key.slice('PersistentVolume//'.length));
    if (key.startsWith(requestPrefix)) return this.annotate(key);
    if (key.startsWith(releasedPrefix)) return this.release(key.slice(releasedPrefix.length));
    const binding = this.opts.cm.world.bindings.get(key);
    if (binding === undefined) return;
    const [, namespace = 'default', name = ''] = key.split('/');
    let pvc = await this.got<ApiPvc>(pvcPath(namespace, name));
    let pv = await this.got<ApiPv>(pvPath(binding.volume));
    if (pvc === undefined || pv === undefined) return; // gone: nothing to bind
    const volumeName = pvc.spec.volumeName ?? '';
    if (volumeName !== '' && volumeName !== binding.volume)
      return this.opts.say(`not binding ${key}: its volumeName is ${volumeName}`);
    const ref = pv.spec.claimRef;
    if (ref?.name !== undefined && !namesClaim(pv, pvc))
      return this.opts.say(
        `not binding ${key}: PersistentVolume ${pv.metadata.name} names another claim`,
      );
    if (!namesClaim(pv, pvc) || pv.spec.claimRef?.uid === undefined)
      pv = await this.update(pvPath(binding.volume), this.boundPv(pv, pvc));
    if (pv.status?.phase !== 'Bound')
      pv = await this.update(`${pvPath(binding.volume)}/status`, {
        ...pv,
        status: { ...pv.status, phase: 'Bound' },
      });
    if (
      volumeName !== binding.volume ||
      pvc.metadata.annotations?.[bindCompletedAnnotation] === undefined
    )
      pvc = await this.update(pvcPath(namespace, name), this.boundPvc(pvc, pv));
    if (pvc.status?.phase !== 'Bound') {
      const status = {
        ...pvc.status,
        phase: 'Bound',
        accessModes: pv.spec.accessModes ?? [],
        capacity: pv.spec.capacity ?? {},
      };
      await this.update(`${pvcPath(namespace, name)}/status`, { ...pvc, status });
    }
    this.written++;
  }

  /** bindVolumeToClaim: the claimRef as ref.GetReference makes it, bound-by-controller. */
  private boundPv(pv: ApiPv, pvc: ApiPvc): ApiPv {
    const claimRef = {
      kind: 'PersistentVolumeClaim',
      namespace: pvc.metadata.namespace ?? 'default',
      name: pvc.metadata.name,
      uid: pvc.metadata.uid,
      apiVersion: 'v1',
      resourceVersion: pvc.metadata.resourceVersion,
    };
    const metadata = namesClaim(pv, pvc)
      ? pv.metadata
      : annotated(pv.metadata, boundByControllerAnnotation);
    return { ...pv, metadata, spec: { ...pv.spec, claimRef } };
  }

  /** bindClaimToVolume: volumeName, bound-by-controller unless pre-bound, bind-completed. */
  private boundPvc(pvc: ApiPvc, pv: ApiPv): ApiPvc {
    let metadata = pvc.metadata;
    if (pvc.spec.volumeName !== pv.metadata.name)
      metadata = annotated(metadata, boundByControllerAnnotation);
    metadata = annotated(metadata, bindCompletedAnnotation);
    return { ...pvc, metadata, spec: { ...pvc.spec, volumeName: pv.metadata.name } };
  }

  /** An update (PUT with the object's resourceVersion), fenced on the Lease. */
  private async update<T>(path: string, body: T): Promise<T> {
    await this.opts.fence();
    return (await this.opts.http.put(path, body)) as T;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe();
    await this.running.catch(() => undefined);
  }
}
