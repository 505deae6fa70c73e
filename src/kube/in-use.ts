/**
 * Node.status.volumesInUse, kept as the kubelet keeps it: published when the volume
 * manager's answer changes, then marked reported in the log (behaviour C5: the controller may
 * detach a volume only once it has left this list), one patch at a time.
 */
import type { Clock, TimerHandle } from '../clock.js';
import { kubeWriteRetryMs } from '../constants.js';
import type { VolumeManager } from '../agent/volume-manager.js';
import { UniqueVolumeName } from '../ids.js';
import type { NodeStatusWriter } from './node-status.js';

export class InUsePublisher {
  private published: string | null = null;
  private publishing = false;
  private lookQueued = false;
  private stopped = false;
  private timer: TimerHandle | null = null;

  constructor(
    private readonly opts: {
      vm: VolumeManager;
      clock: Clock;
      status: Pick<NodeStatusWriter, 'patchVolumesInUse'>;
      say: (line: string) => void;
    },
  ) {}

  /**
   * Looks once the events appended in this turn are all in: the agent asks after every
   * event, and the list is a walk of every volume, so asking at each of a burst's events
   * made a pod's cost grow with the number of pods on the node.
   */
  schedule(): void {
    if (this.lookQueued) return;
    this.lookQueued = true;
    queueMicrotask(() => {
      this.lookQueued = false;
      this.look();
    });
  }

  /** Publishes when the list changed; otherwise re-marks volumes that re-entered the DSW. */
  private look(): void {
    if (this.publishing || this.stopped) return;
    const { vm } = this.opts;
    if (!vm.world.sourcesReady) return;
    const inUse = vm.status.getVolumesInUse();
    const text = JSON.stringify(inUse);
    if (text === this.published) {
      const dsw = vm.world.dsw;
      if (inUse.some((v) => dsw.get(UniqueVolumeName(v))?.reportedInUse === false))
        vm.inputs.markVolumesAsReportedInUse(inUse);
      return;
    }
    this.publishing = true;
    void this.opts.status.patchVolumesInUse(inUse).then(
      () => {
        this.published = text;
        this.publishing = false;
        if (this.stopped) return;
        vm.inputs.markVolumesAsReportedInUse(inUse);
        this.look();
      },
      (error: Error) => {
        // A patch that failed may have been applied: publish again even an equal list.
        this.published = null;
        this.publishing = false;
        this.opts.say(`patching volumesInUse failed, retrying: ${error.message}`);
        this.retryLater();
      },
    );
  }

  private retryLater(): void {
    if (this.timer !== null || this.stopped) return;
    const { clock } = this.opts;
    this.timer = clock.setTimer(clock.nowMs() + kubeWriteRetryMs, () => {
      this.timer = null;
      this.look();
    });
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) this.opts.clock.clearTimer(this.timer);
  }
}
