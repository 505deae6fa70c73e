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

/**
 * The shortest time between two looks at the list. A volume that needs attaching waits for
 * the list before its mount (behaviour C5), so this is latency on such a mount; it is a
 * hundredth of the kubelet's.
 */
export const inUseLookEveryMs = 100;

export class InUsePublisher {
  private published: string | null = null;
  private publishing = false;
  private lookQueued = false;
  private lookTimer: TimerHandle | null = null;
  private lastLookMs = Number.NEGATIVE_INFINITY;
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
   * Looks once the events appended in this turn are all in, and at most once every
   * inUseLookEveryMs: the agent asks after every event, and the list is a walk of every
   * volume, so looking at each event made a pod's cost grow with the pods on the node.
   * The kubelet looks less often still: its node status sync runs the VolumesInUse setter
   * (pkg/kubelet/nodestatus/setters.go) every nodeStatusUpdateFrequency (10 s).
   */
  schedule(): void {
    if (this.lookQueued || this.stopped) return;
    this.lookQueued = true;
    const { clock } = this.opts;
    const run = () => {
      this.lookQueued = false;
      this.lookTimer = null;
      this.look();
    };
    const atMs = this.lastLookMs + inUseLookEveryMs;
    if (atMs <= clock.nowMs()) queueMicrotask(run);
    else this.lookTimer = clock.setTimer(atMs, run);
  }

  /** Publishes when the list changed; otherwise re-marks volumes that re-entered the DSW. */
  private look(): void {
    if (this.publishing || this.stopped) return;
    const { vm } = this.opts;
    this.lastLookMs = this.opts.clock.nowMs();
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
    if (this.lookTimer !== null) this.opts.clock.clearTimer(this.lookTimer);
  }
}
