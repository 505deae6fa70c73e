/**
 * The cloud of `vole chaos --cluster`: where disks are really attached, per node. The
 * controller replicas attach and detach through it (their attacher); it answers after a
 * drawn delay, sometimes with a failure. A call takes effect when the cloud accepts it,
 * so a call cut off with its controller (killed in the middle of an attach) has taken
 * effect: only "uncertain" is a safe assumption for the new leader.
 *
 * A detach fails only after taking effect ("uncertain"). The spec lets the controller
 * attach a ReadWriteOnce disk elsewhere while an entry is uncertain, relying on the
 * storage to refuse (behaviour C3.4, S7): this cloud refuses, as real storage (and vole's disk
 * plugin) does, an attach of a ReadWriteOnce disk attached to another node — a transient
 * failure that takes no effect.
 *
 * It checks, at the moment each call takes effect, the rules about the real disks: no
 * controller attaches a ReadWriteOnce disk its own world has confirmed on another node
 * (S7), and the cloud never holds one on two nodes; a disk is never detached while its
 * node reports it in use (or has it mounted) unless the detach was forced, with the
 * reason recorded in the controller's log.
 */
import { type Clock, sleep } from '../clock.js';
import { callCutOff } from '../plugins/call-target.js';
import { FakePlugin } from '../plugins/fake.js';
import { caps, PluginError, type VolumePlugin } from '../plugins/types.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';

export interface CloudCall {
  readonly t: number;
  readonly replica: string;
  readonly call: 'attach' | 'detach';
  readonly volume: string;
  readonly node: string;
  readonly outcome: 'ok' | 'transient' | 'uncertain';
  readonly delayMs: number;
  /** For a detach the node reported in use: the forced-detach reason, if any. */
  readonly forced?: string;
}

export interface CloudHooks {
  /** Does `node` report `volume` in use now, or have it mounted? */
  inUse(volume: string, node: string): boolean;
  /** The nodes where the calling replica's world has `volume` confirmed attached. */
  confirmedOn(replica: string, volume: string): string[];
  /** The forced-detach reason the detach was started with (from the caller's log). */
  forced(replica: string, volume: string, node: string): string | undefined;
  violation(message: string): void;
}

const cloudPluginName = 'fake.disk';

export class SimCloud {
  readonly attached = new Map<string, Set<string>>();
  readonly calls: CloudCall[] = [];
  private readonly inFlight = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    private readonly random: () => number,
    /** The volumes no two nodes may share. */
    private readonly readWriteOnce: ReadonlySet<string>,
    private readonly hooks: CloudHooks,
  ) {}

  /** Attach calls of `replica` that have not answered yet. */
  attachesInFlight(replica: string): number {
    return this.inFlight.get(replica) ?? 0;
  }

  nodesOf(volume: string): string[] {
    return [...(this.attached.get(volume) ?? [])].sort();
  }

  private draw(call: CloudCall['call']): { outcome: CloudCall['outcome']; delayMs: number } {
    const roll = this.random();
    const failure = call === 'attach' && roll < 0.9 ? 'transient' : 'uncertain';
    const outcome = roll < 0.8 ? 'ok' : failure;
    return { outcome, delayMs: 200 + Math.floor(this.random() * 5_800) };
  }

  /** Attaches, or answers the nodes that hold this ReadWriteOnce disk (the storage refuses). */
  private attachNow(replica: string, volume: string, node: string): string[] | undefined {
    const confirmed = this.hooks.confirmedOn(replica, volume).filter((n) => n !== node);
    if (this.readWriteOnce.has(volume) && confirmed.length > 0)
      this.hooks.violation(
        `${replica} attached ${volume} to ${node} while its world has it attached to ${confirmed.join(', ')} (S7)`,
      );
    const nodes = this.attached.get(volume) ?? new Set<string>();
    const others = [...nodes].filter((n) => n !== node);
    if (this.readWriteOnce.has(volume) && others.length > 0) return others;
    nodes.add(node);
    this.attached.set(volume, nodes);
    return undefined;
  }

  private detachNow(replica: string, volume: string, node: string): string | undefined {
    if (!this.hooks.inUse(volume, node)) return undefined;
    const forced = this.hooks.forced(replica, volume, node);
    if (forced === undefined)
      this.hooks.violation(
        `${replica} detached ${volume} from ${node} while the node reports it in use, not forced`,
      );
    return forced;
  }

  private async call(
    replica: string,
    call: CloudCall['call'],
    spec: ResolvedVolume,
    target: { node: string; signal: AbortSignal },
  ): Promise<void> {
    const drawn = this.draw(call);
    let { outcome } = drawn;
    const { delayMs } = drawn;
    const { volume } = spec;
    const { node } = target;
    let forced: string | undefined;
    let holders: string[] | undefined;
    if (outcome !== 'transient') {
      if (call === 'attach') {
        holders = this.attachNow(replica, volume, node);
        if (holders !== undefined) outcome = 'transient';
      } else {
        forced = this.detachNow(replica, volume, node);
        this.attached.get(volume)?.delete(node);
      }
    }
    const t = this.clock.nowMs();
    this.calls.push({
      t,
      replica,
      call,
      volume,
      node,
      outcome,
      delayMs,
      ...(forced === undefined ? {} : { forced }),
    });
    if (call === 'attach') this.inFlight.set(replica, this.attachesInFlight(replica) + 1);
    await sleep(this.clock, delayMs);
    if (call === 'attach') this.inFlight.set(replica, this.attachesInFlight(replica) - 1);
    // Cut off (its controller died or stopped): the answer goes nowhere.
    if (callCutOff(target)) return new Promise<void>(() => {});
    if (holders !== undefined)
      throw new PluginError(
        'transient',
        `cloud attach of ${volume} to ${node}: refused, attached to ${holders.join(', ')}`,
      );
    if (outcome !== 'ok')
      throw new PluginError(outcome, `cloud ${call} of ${volume} to ${node}: ${outcome} failure`);
  }

  /** The cloud's attacher as `replica` calls it. */
  plugin(replica: string): VolumePlugin {
    const base = new FakePlugin({
      caps: caps(cloudPluginName, { attachable: true, deviceMountable: true }),
      clock: this.clock,
      journal: [],
    });
    const attacher = base.attacher!;
    return {
      name: base.name,
      caps: base.caps,
      pod: base.pod,
      ...(base.deviceMounter === undefined ? {} : { deviceMounter: base.deviceMounter }),
      attacher: {
        ...attacher,
        attach: async (spec, target) => {
          await this.call(replica, 'attach', spec, target);
          return `/dev/cloud/${spec.volume}`;
        },
        detach: (spec, target) => this.call(replica, 'detach', spec, target),
        volumesAreAttached: async (specs, target) =>
          new Map(
            specs.map((s) => [s.volume, this.attached.get(s.volume)?.has(target.node) === true]),
          ),
      },
    };
  }
}
