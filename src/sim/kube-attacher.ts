/**
 * The CSI external-attacher of `vole chaos --kube`, with the cloud behind it: for each
 * VolumeAttachment it puts its finalizer on, attaches the disk (ControllerPublishVolume)
 * and sets status.attached; for one being deleted it detaches the disk and takes its
 * finalizer off, as kubernetes-csi/external-attacher's csi_handler does. It goes through
 * the API server like any client (its requests fail and are retried).
 *
 * The cloud holds each disk on at most one node and refuses to attach it to a second one,
 * as the CSI spec asks of a SINGLE_NODE volume published elsewhere (FAILED_PRECONDITION):
 * the attacher writes the refusal as status.attachError and tries again later. The
 * controller may ask while a failed detach left the first node's entry uncertain (as
 * Kubernetes' actual state does since its detach failures mark the entry uncertain,
 * operation_generator.go); it must never ask while that node reports the disk in use:
 * that is the ReadWriteOnce violation, caught at the moment it would happen.
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
  /** The Node's status.volumesInUse as the API server holds it now. */
  volumesInUse(node: string): string[];
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
  readonly calls: {
    op: 'attach' | 'detach' | 'refused';
    pv: string;
    node: string;
    atMs: number;
  }[] = [];
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
    const refused = this.attach(va);
    if (refused !== undefined) {
      const attachError = {
        message: refused,
        time: new Date(this.sim.clock.nowMs()).toISOString(),
      };
      await this.client.patch(
        `${pvPath}/status`,
        { status: { attached: false, attachError } },
        'merge',
      );
      return true;
    }
    await this.client.patch(
      `${pvPath}/status`,
      { status: { attached: true, attachError: null } },
      'merge',
    );
    return false;
  }

  /** Attaches the disk; the refusal's message when it is attached to another node. */
  private attach(va: VaView): string | undefined {
    const disk = handleOfPv(va.pv);
    const holder = this.cloud.get(disk);
    if (holder !== undefined && holder !== va.node) {
      if (this.sim.volumesInUse(holder).some((v) => v.endsWith(`^${disk}`)))
        this.sim.fail(
          `ReadWriteOnce ${disk} asked on ${va.node} while ${holder} reports it in use ` +
            `(VolumeAttachment ${va.name})`,
        );
      this.calls.push({ op: 'refused', pv: va.pv, node: va.node, atMs: this.sim.clock.nowMs() });
      return `rpc error: code = FailedPrecondition desc = ${disk} is attached to node ${holder}`;
    }
    this.cloud.set(disk, va.node);
    this.calls.push({ op: 'attach', pv: va.pv, node: va.node, atMs: this.sim.clock.nowMs() });
    return undefined;
  }

  private detach(va: VaView): void {
    const disk = handleOfPv(va.pv);
    if (this.cloud.get(disk) === va.node) this.cloud.delete(disk);
    this.calls.push({ op: 'detach', pv: va.pv, node: va.node, atMs: this.sim.clock.nowMs() });
  }
}

/** pv-N holds disk-N (kube-sim.ts boundPair). */
export const handleOfPv = (pv: string) => pv.replace(/^pv-/, 'disk-');
