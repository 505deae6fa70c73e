/**
 * The CSI external-attacher of `vole chaos --kube`, with the cloud behind it: for each
 * VolumeAttachment it puts its finalizer on, attaches the disk (ControllerPublishVolume)
 * and sets status.attached; for one being deleted it detaches the disk and takes its
 * finalizer off, as kubernetes-csi/external-attacher's csi_handler does. It goes through
 * the API server like any client (its requests fail and are retried).
 *
 * The cloud holds each disk on at most one node: a disk attached to a second node is
 * the ReadWriteOnce violation, caught at the moment it would happen.
 */
import type { Clock } from '../clock.js';
import type { JsonObject } from '../kube/http.js';
import type { KubeChange, SimKubeApi, SimKubeClient } from './kube-api-sim.js';

/** What the attacher needs of the simulation (kube-sim.ts). */
export interface AttacherHost {
  readonly clock: Clock;
  readonly api: SimKubeApi;
  readonly onChange: ((change: KubeChange, client: string) => void)[];
  fail(message: string): void;
}

const finalizer = 'external-attacher/fake-disk';
const vaPath = '/apis/storage.k8s.io/v1/volumeattachments';

interface VaView {
  name: string;
  node: string;
  pv: string;
  deleting: boolean;
  finalizers: string[];
  attached: boolean;
}

function viewOf(o: JsonObject): VaView {
  const metadata = o.metadata as { name: string; deletionTimestamp?: string; finalizers?: [] };
  const spec = o.spec as { nodeName: string; source: { persistentVolumeName: string } };
  return {
    name: metadata.name,
    node: spec.nodeName,
    pv: spec.source.persistentVolumeName,
    deleting: metadata.deletionTimestamp !== undefined,
    finalizers: metadata.finalizers ?? [],
    attached: (o.status as { attached?: boolean } | undefined)?.attached === true,
  };
}

export class KubeAttacher {
  /** disk handle → the node it is attached to. */
  readonly cloud = new Map<string, string>();
  readonly calls: { op: 'attach' | 'detach'; pv: string; node: string; atMs: number }[] = [];
  private readonly busy = new Set<string>();
  private readonly client: SimKubeClient;

  constructor(
    private readonly sim: AttacherHost,
    private readonly random: () => number,
  ) {
    this.client = sim.api.client('external-attacher');
    sim.onChange.push((change) => this.onChange(change));
  }

  private onChange(change: KubeChange): void {
    if (change.resource !== 'storage.k8s.io/v1/volumeattachments' || change.after === undefined)
      return;
    this.kick(viewOf(change.after).name);
  }

  /** Works on the VolumeAttachment `name` after a short drawn delay, one at a time. */
  kick(name: string): void {
    if (this.busy.has(name)) return;
    this.busy.add(name);
    const delayMs = 50 + Math.floor(this.random() * 2_000);
    this.sim.clock.setTimer(this.sim.clock.nowMs() + delayMs, () => {
      void this.reconcile(name).then(
        (again) => {
          this.busy.delete(name);
          if (again) this.kick(name);
        },
        () => {
          this.busy.delete(name);
          this.kick(name);
        },
      );
    });
  }

  /** One step toward what the object asks; true when another step is due. */
  private async reconcile(name: string): Promise<boolean> {
    const current = this.sim.api.peek(`${vaPath}/${name}`);
    if (current === undefined) return false;
    const va = viewOf(current);
    const pvPath = `${vaPath}/${name}`;
    if (va.deleting) {
      if (!va.finalizers.includes(finalizer)) return false;
      this.detach(va);
      await this.client.patch(pvPath, { metadata: { finalizers: null } }, 'merge');
      return false;
    }
    if (!va.finalizers.includes(finalizer)) {
      await this.client.patch(pvPath, { metadata: { finalizers: [finalizer] } }, 'merge');
      return true;
    }
    if (va.attached) return false;
    this.attach(va);
    await this.client.patch(`${pvPath}/status`, { status: { attached: true } }, 'merge');
    return false;
  }

  private attach(va: VaView): void {
    const disk = handleOfPv(va.pv);
    const holder = this.cloud.get(disk);
    if (holder !== undefined && holder !== va.node)
      this.sim.fail(
        `ReadWriteOnce ${disk} attached to ${va.node} while attached to ${holder} ` +
          `(VolumeAttachment ${va.name})`,
      );
    this.cloud.set(disk, va.node);
    this.calls.push({ op: 'attach', pv: va.pv, node: va.node, atMs: this.sim.clock.nowMs() });
  }

  private detach(va: VaView): void {
    const disk = handleOfPv(va.pv);
    if (this.cloud.get(disk) === va.node) this.cloud.delete(disk);
    this.calls.push({ op: 'detach', pv: va.pv, node: va.node, atMs: this.sim.clock.nowMs() });
  }
}

/** pv-N holds disk-N (kube-sim.ts boundPair). */
export const handleOfPv = (pv: string) => pv.replace(/^pv-/, 'disk-');
