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
 * capacity). A PV nobody claims gets phase Available (syncVolume). Each write is an update
 * carrying the object's resourceVersion (a conflict is read again) and is fenced on the
 * Lease. Run kube-controller-manager with `--controllers=*,-persistentvolume-binder-controller,…`
 * beside it.
 */
import type { ControllerManager } from '../agent/controller-manager.js';
import { kubeWriteRetryMs } from '../constants.js';
import { objectKey } from '../events/k8s.js';
import { KubeApiError, type KubeHttp } from './http.js';

export const boundByControllerAnnotation = 'pv.kubernetes.io/bound-by-controller';
export const bindCompletedAnnotation = 'pv.kubernetes.io/bind-completed';

export interface ClaimBinderOptions {
  readonly http: KubeHttp;
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
  metadata: ApiMeta;
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

export class KubeClaimBinder {
  private readonly dirty = new Set<string>();
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
        await new Promise((resolve) => setTimeout(resolve, conflict ? 100 : kubeWriteRetryMs));
        this.mark(key);
      }
    }
  }

  /** syncVolume for an unclaimed PV: its phase Available, unless it was claimed meanwhile. */
  private async available(name: string): Promise<void> {
    const pv = (await this.opts.http.get(pvPath(name)).catch((error: unknown) => {
      if (error instanceof KubeApiError && error.statusCode === 404) return undefined;
      throw error;
    })) as ApiPv | undefined;
    if (pv === undefined || pv.spec.claimRef?.name !== undefined) return;
    if (pv.status?.phase !== undefined && pv.status.phase !== 'Pending') return;
    await this.update(`${pvPath(name)}/status`, {
      ...pv,
      status: { ...pv.status, phase: 'Available' },
    });
  }

  /** pv_controller.go bind: the PV, its phase, the claim, its status; each only if needed. */
  private async bind(key: string): Promise<void> {
    if (key.startsWith('PersistentVolume//'))
      return this.available(key.slice('PersistentVolume//'.length));
    const binding = this.opts.cm.world.bindings.get(key);
    if (binding === undefined) return;
    const [, namespace = 'default', name = ''] = key.split('/');
    const got = async <T>(path: string): Promise<T | undefined> =>
      (await this.opts.http.get(path).catch((error: unknown) => {
        if (error instanceof KubeApiError && error.statusCode === 404) return undefined;
        throw error;
      })) as T | undefined;
    let pvc = await got<ApiPvc>(pvcPath(namespace, name));
    let pv = await got<ApiPv>(pvPath(binding.volume));
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
