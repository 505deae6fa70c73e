/**
 * The attach/detach controller's CSI plugin on a real API server, as Kubernetes' CSI
 * attacher works in kube-controller-manager: attach creates the VolumeAttachment named
 * `csi-<sha256(handle + driver + node)>` (spec.attacher, spec.nodeName,
 * spec.source.persistentVolumeName) and waits for the external-attacher to set
 * status.attached; detach deletes it and waits until it is gone. The devicePath is empty,
 * as Kubernetes' attacher returns it (the kubelet finds the object again by its name).
 * A driver whose CSIDriver says attachRequired: false gets a plugin that is not
 * attachable: no VolumeAttachment, nothing to do. Every write is fenced on the Lease.
 */
import { csiRpcDeadlineMs } from '../constants.js';
import { csiPluginCaps } from '../csi/plugin.js';
import { csiSourceOf } from '../csi/requests.js';
import {
  type AttacherOps,
  type CallTarget,
  PluginError,
  type VolumePlugin,
} from '../plugins/types.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';
import { volumeAttachmentName } from './attachments.js';
import type { Clock } from '../clock.js';
import { KubeApiError, type KubeTransport } from './http.js';
import type { ApiObject } from './informer.js';

const vaPath = '/apis/storage.k8s.io/v1/volumeattachments';

interface VaStatus {
  attached?: boolean;
  attachError?: { message?: string };
  detachError?: { message?: string };
}

/** The VolumeAttachments the informer listed, with waiters woken at each change. */
export class VolumeAttachmentCache {
  private readonly objects = new Map<string, ApiObject>();
  private readonly waiters = new Set<() => void>();

  /** `clock` times the waits out. */
  constructor(private readonly clock: Clock) {}

  get(name: string): ApiObject | undefined {
    return this.objects.get(name);
  }

  set(object: ApiObject): void {
    this.objects.set(object.metadata.name, object);
    this.wake();
  }

  remove(name: string): void {
    this.objects.delete(name);
    this.wake();
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }

  /** Resolves with `check`'s first non-undefined answer; rejects on timeout or abort. */
  waitFor<T>(check: () => T | undefined, signal: AbortSignal, timeoutMs: number): Promise<T> {
    return new Promise((resolve, reject) => {
      const done = (fn: () => void) => {
        this.waiters.delete(poll);
        this.clock.clearTimer(timer);
        signal.removeEventListener('abort', aborted);
        fn();
      };
      const poll = () => {
        const answer = check();
        if (answer !== undefined) done(() => resolve(answer));
      };
      const aborted = () => done(() => reject(new Error('cut off (the controller stopped)')));
      const timer = this.clock.setTimer(this.clock.nowMs() + timeoutMs, () =>
        done(() => reject(new Error(`timed out after ${timeoutMs} ms`))),
      );
      this.waiters.add(poll);
      signal.addEventListener('abort', aborted, { once: true });
      poll();
    });
  }
}

export interface VaPluginOptions {
  readonly http: Pick<KubeTransport, 'post' | 'delete'>;
  readonly cache: VolumeAttachmentCache;
  /** Rejects when this replica may no longer write (the Lease is lost). */
  readonly fence: () => Promise<void>;
  readonly timeoutMs?: number;
}

const statusOf = (o: ApiObject | undefined) => (o?.status ?? {}) as VaStatus;

function vaNameOf(spec: ResolvedVolume, node: string): { name: string; driver: string } {
  const source = csiSourceOf(spec);
  return {
    name: volumeAttachmentName(source.volumeHandle, source.driver, node),
    driver: source.driver,
  };
}

async function attach(opts: VaPluginOptions, spec: ResolvedVolume, target: CallTarget) {
  const { name, driver } = vaNameOf(spec, target.node);
  await opts.fence();
  const body = {
    apiVersion: 'storage.k8s.io/v1',
    kind: 'VolumeAttachment',
    metadata: { name },
    spec: {
      attacher: driver,
      nodeName: target.node,
      source: { persistentVolumeName: spec.innerVolumeSpecName },
    },
  };
  try {
    await opts.http.post(vaPath, body);
  } catch (error) {
    // AlreadyExists: made by an earlier try or another leader; the wait below decides.
    // Another 4xx: refused, nothing made; anything else may have made it.
    const code = error instanceof KubeApiError ? error.statusCode : 0;
    if (code !== 409)
      throw new PluginError(
        code >= 400 && code < 500 ? 'final' : 'uncertain',
        `creating VolumeAttachment ${name}: ${(error as Error).message}`,
      );
  }
  const timeoutMs = opts.timeoutMs ?? csiRpcDeadlineMs;
  const outcome = await opts.cache
    .waitFor(
      () => {
        const object = opts.cache.get(name);
        if (object?.metadata.deletionTimestamp !== undefined)
          return { ok: false as const, message: 'it is being deleted (a detach not finished)' };
        const s = statusOf(object);
        if (s.attached === true) return { ok: true as const };
        if (s.attachError?.message !== undefined)
          return { ok: false as const, message: s.attachError.message };
        return undefined;
      },
      target.signal,
      timeoutMs,
    )
    .catch((error: Error) => ({ ok: false as const, message: error.message }));
  if (!outcome.ok)
    throw new PluginError(
      'uncertain',
      `rpc error: VolumeAttachment ${name} for volume ${spec.volume} not attached: ${outcome.message}`,
    );
  return '';
}

async function detach(opts: VaPluginOptions, spec: ResolvedVolume, target: CallTarget) {
  const { name } = vaNameOf(spec, target.node);
  await opts.fence();
  try {
    await opts.http.delete(`${vaPath}/${name}`);
  } catch (error) {
    if (!(error instanceof KubeApiError && error.statusCode === 404))
      throw new PluginError(
        'uncertain',
        `deleting VolumeAttachment ${name}: ${(error as Error).message}`,
      );
    return;
  }
  const timeoutMs = opts.timeoutMs ?? csiRpcDeadlineMs;
  const outcome = await opts.cache
    .waitFor(
      () => {
        const object = opts.cache.get(name);
        if (object === undefined) return { ok: true as const };
        const message = statusOf(object).detachError?.message;
        return message === undefined ? undefined : { ok: false as const, message };
      },
      target.signal,
      timeoutMs,
    )
    .catch((error: Error) => ({ ok: false as const, message: error.message }));
  if (!outcome.ok)
    throw new PluginError('uncertain', `VolumeAttachment ${name} not detached: ${outcome.message}`);
}

function attacherOps(opts: VaPluginOptions): AttacherOps {
  return {
    attach: (spec, target) => attach(opts, spec, target),
    waitForAttach: (_spec, devicePath) => Promise.resolve(devicePath),
    volumesAreAttached: (specs, target) => {
      const answer = new Map<string, boolean>();
      for (const spec of specs) {
        const object = opts.cache.get(vaNameOf(spec, target.node).name);
        answer.set(spec.volume, statusOf(object).attached === true);
      }
      return Promise.resolve(answer);
    },
    detach: (spec, target) => detach(opts, spec, target),
  };
}

const notOnController = (call: string) => () =>
  Promise.reject(new PluginError('final', `${call} is the node's, not the controller's`));

/** The controller's plugin for CSI driver `driver` (attachRequired from its CSIDriver). */
export function vaPlugin(
  driver: string,
  attachRequired: boolean,
  opts: VaPluginOptions,
): VolumePlugin {
  const caps = csiPluginCaps(driver, {
    publishUnpublish: attachRequired,
    stageUnstage: false,
    expand: false,
    singleNodeMultiWriter: false,
    maxVolumesPerNode: 0,
  });
  return {
    name: driver,
    caps,
    pod: {
      podVolumePath: () => '',
      setUp: notOnController('setUp'),
      tearDown: notOnController('tearDown'),
    },
    ...(attachRequired ? { attacher: attacherOps(opts) } : {}),
    deviceMounter: {
      deviceMountPath: () => '',
      mountDevice: notOnController('mountDevice'),
      unmountDevice: notOnController('unmountDevice'),
      deviceMountRefs: () => Promise.resolve([]),
    },
    blockMapper: {
      globalMapPath: () => '',
      podDevicePath: () => '',
      setUpDevice: notOnController('setUpDevice'),
      mapPodDevice: notOnController('mapPodDevice'),
      unmapPodDevice: notOnController('unmapPodDevice'),
      tearDownDevice: notOnController('tearDownDevice'),
      deviceMapRefs: () => Promise.resolve([]),
    },
  };
}
