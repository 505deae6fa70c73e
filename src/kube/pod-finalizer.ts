/**
 * A pod deleted from the API (deletionTimestamp set) stays until its node says its
 * resources are reclaimed: the kubelet's status manager deletes it with grace period 0
 * (precondition: its uid) once no volume of it may still be mounted. vole does the same.
 */
import type { VolumeManager } from '../agent/volume-manager.js';
import { kubeWriteRetryMs } from '../constants.js';
import type { Pod } from '../events/k8s.js';
import { UniquePodName } from '../ids.js';
import type { Clock, TimerHandle } from '../clock.js';
import { KubeApiError, type KubeTransport } from './http.js';

interface Pending {
  readonly uid: string;
  readonly name: string;
  readonly namespace: string;
  deleting: boolean;
}

export class PodFinalizer {
  private readonly pending = new Map<string, Pending>();
  private stopped = false;
  private timer: TimerHandle | null = null;

  constructor(
    private readonly opts: {
      http: KubeTransport;
      clock: Clock;
      vm: VolumeManager;
      say: (line: string) => void;
    },
  ) {}

  add(pod: Pod): void {
    const uid = pod.metadata.uid;
    if (uid === undefined || this.pending.has(uid)) return;
    const namespace = pod.metadata.namespace ?? 'default';
    this.pending.set(uid, { uid, name: pod.metadata.name, namespace, deleting: false });
    this.check();
  }

  /** Deletes every pending pod whose volumes are all unmounted (none uncertain either). */
  check(): void {
    if (this.stopped) return;
    const { vm } = this.opts;
    for (const pod of this.pending.values()) {
      if (pod.deleting || vm.world.pods.has(UniquePodName(pod.uid))) continue;
      if (vm.status.hasPossiblyMountedVolumes(pod.uid)) continue;
      pod.deleting = true;
      void this.delete(pod);
    }
  }

  private async delete(pod: Pending): Promise<void> {
    const namespace = encodeURIComponent(pod.namespace);
    const path = `/api/v1/namespaces/${namespace}/pods/${encodeURIComponent(pod.name)}`;
    try {
      await this.opts.http.delete(path, {
        apiVersion: 'v1',
        kind: 'DeleteOptions',
        gracePeriodSeconds: 0,
        preconditions: { uid: pod.uid },
      });
      this.pending.delete(pod.uid);
    } catch (error) {
      // Gone already, or a new pod of that name (the uid precondition failed): done.
      if (error instanceof KubeApiError && (error.statusCode === 404 || error.statusCode === 409)) {
        this.pending.delete(pod.uid);
        return;
      }
      pod.deleting = false;
      this.opts.say(
        `deleting pod ${pod.namespace}/${pod.name} failed, retrying: ${(error as Error).message}`,
      );
      if (this.timer === null && !this.stopped)
        this.timer = this.opts.clock.setTimer(this.opts.clock.nowMs() + kubeWriteRetryMs, () => {
          this.timer = null;
          this.check();
        });
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) this.opts.clock.clearTimer(this.timer);
  }
}
