/**
 * The scripted fake plugin of docs/scenarios.md: touches nothing on the host, answers each call
 * with the next scripted outcome (per volume handle first, then per plugin; then ok), and
 * records every call with its virtual time for `calls` and `counts`.
 */
import { type Clock, sleep } from '../clock.js';
import { callEffects, type HostMark } from '../operations/calls.js';
import type { CallName, PluginCaps } from '../events/index.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';
import type { ObjectContents } from '../sources/contents.js';
import { missingContent } from './builtin/content.js';
import { callCutOff } from './call-target.js';
import { type CallTarget, PluginError, type VolumePlugin } from './types.js';

export type FakeOutcome = 'ok' | 'transient' | 'uncertain' | 'final' | 'failedPrecondition';

/**
 * One scripted answer, used `times` calls in a row (Infinity: for every later call). A
 * scripted CSI driver also answers `grpc` (a status `code` by name) and `disconnect`.
 */
export interface FaultEntry {
  readonly outcome: FakeOutcome | 'hang' | 'grpc' | 'disconnect';
  readonly code?: string;
  readonly delayMs: number;
  readonly times: number;
}

/** Scripted answers per call: plugin call names, or a CSI driver's RPC names. */
export type FaultScript = Partial<Record<string, readonly FaultEntry[]>>;

export interface FakeCallRecord {
  readonly t: number;
  readonly plugin: string;
  /** A plugin call name, or a CSI RPC name for a scripted CSI driver. */
  readonly call: string;
  readonly volume: string;
  readonly node: string;
  readonly pod: string | null;
  /**
   * The scripted outcome; a gRPC status name for `{grpc: CODE}`, or the code a scripted
   * CSI driver's backend answered with (OUT_OF_RANGE beyond its capacity).
   */
  outcome: string;
}

/**
 * What the fakes have done to their pretend host: a call that succeeded, and one that
 * answered uncertain or never answered (it may have taken effect), leaves its mark. Chaos
 * runs compare it with the desired state at the end: nothing may leak.
 */
export class FakeHost {
  readonly attached = new Set<string>();
  readonly devicesMounted = new Set<string>();
  /** `volume|pod` */
  readonly setUp = new Set<string>();

  /**
   * A final error means the call definitely left nothing in effect (behaviour K0.5): a plugin
   * that answers final after a partial success must have rolled it back.
   */
  rollBack(call: CallName, volume: string, pod: string | null): void {
    const mark = callEffects(call).host;
    if (mark?.ok === 'add') this.marks(mark).delete(this.entry(mark, volume, pod));
  }

  /** What a call that succeeded leaves on the host (the call table's host marks). */
  apply(call: CallName, volume: string, pod: string | null): void {
    const mark = callEffects(call).host;
    if (mark === null) return;
    const set = this.marks(mark);
    const entry = this.entry(mark, volume, pod);
    if (mark.ok === 'add') set.add(entry);
    else set.delete(entry);
  }

  private marks(mark: HostMark): Set<string> {
    return this[mark.set];
  }

  private entry(mark: HostMark, volume: string, pod: string | null): string {
    return mark.set === 'setUp' ? `${volume}|${pod}` : volume;
  }
}

export interface FakePluginOptions {
  readonly caps: PluginCaps;
  readonly faults?: FaultScript;
  readonly volumeFaults?: Readonly<Record<string, FaultScript>>;
  readonly clock: Clock;
  /** Every call of every fake goes here, in order. */
  readonly journal: FakeCallRecord[];
  /** Virtual time 0 of the run, so records carry time since the start. */
  readonly startMs?: number;
  readonly root?: string;
  /** The pretend host the calls act on (optional). */
  readonly host?: FakeHost;
  /**
   * Where a configMap, secret or projected fake reads its objects at setUp, as the real
   * plugins do: a volume whose object is not there fails as theirs (transient, the
   * kubelet's not-found message). Without it setUp never looks.
   */
  readonly contents?: ObjectContents;
}

/** A queue of scripted entries, consumed one call at a time. */
export class Script {
  private readonly queues = new Map<string, { entries: FaultEntry[]; used: number }>();

  constructor(
    faults: FaultScript | undefined,
    volumeFaults: Readonly<Record<string, FaultScript>> | undefined,
  ) {
    for (const [call, entries] of Object.entries(faults ?? {}))
      this.queues.set(`*|${call}`, { entries: [...entries!], used: 0 });
    for (const [handle, script] of Object.entries(volumeFaults ?? {})) {
      for (const [call, entries] of Object.entries(script)) {
        this.queues.set(`${handle}|${call}`, { entries: [...entries!], used: 0 });
      }
    }
  }

  private take(key: string): FaultEntry | undefined {
    const queue = this.queues.get(key);
    const head = queue?.entries[0];
    if (queue === undefined || head === undefined) return undefined;
    queue.used++;
    if (queue.used >= head.times) {
      queue.entries.shift();
      queue.used = 0;
    }
    return head;
  }

  next(handle: string, call: string): FaultEntry {
    return (
      this.take(`${handle}|${call}`) ??
      this.take(`*|${call}`) ?? { outcome: 'ok', delayMs: 0, times: 1 }
    );
  }
}

function handleOf(spec: ResolvedVolume): string {
  return spec.source.kind === 'csi' ? spec.source.volumeHandle : spec.innerVolumeSpecName;
}

export class FakePlugin implements VolumePlugin {
  readonly name: string;
  readonly caps: PluginCaps;
  readonly pod: VolumePlugin['pod'];
  readonly attacher?: VolumePlugin['attacher'];
  readonly deviceMounter?: VolumePlugin['deviceMounter'];
  readonly expander?: VolumePlugin['expander'];
  readonly blockMapper?: VolumePlugin['blockMapper'];
  private readonly script: Script;

  constructor(private readonly opts: FakePluginOptions) {
    this.name = opts.caps.name;
    this.caps = opts.caps;
    this.script = new Script(opts.faults, opts.volumeFaults);
    const root = opts.root ?? '/var/lib/vole';
    const dir = this.name.replaceAll('/', '~');
    this.pod = {
      podVolumePath: (spec, uid) =>
        `${root}/pods/${uid}/volumes/${dir}/${spec.innerVolumeSpecName}`,
      setUp: (spec, _o, target) => this.answer('setUp', spec, target, undefined),
      tearDown: (spec, target) => this.answer('tearDown', spec, target, undefined),
    };
    if (opts.caps.attachable) {
      this.attacher = {
        attach: (spec, target) =>
          this.answer('attach', spec, target, `/dev/fake/${handleOf(spec)}`),
        waitForAttach: (spec, devicePath, target) =>
          this.answer('waitForAttach', spec, target, devicePath || `/dev/fake/${handleOf(spec)}`),
        // For this check a scripted `final` means "answered: not attached" (the volume is
        // gone); transient and uncertain are errors, which skip the plugin this round.
        volumesAreAttached: async (specs, target) => {
          const result = new Map<string, boolean>();
          for (const spec of specs) {
            const attached = await this.answer('volumesAreAttached', spec, target, true).catch(
              (error: unknown) => {
                if (error instanceof PluginError && error.kind === 'final') return false;
                throw error;
              },
            );
            result.set(spec.volume, attached);
          }
          return result;
        },
        detach: (spec, target) => this.answer('detach', spec, target, undefined),
      };
    }
    if (opts.caps.deviceMountable) {
      this.deviceMounter = {
        deviceMountPath: (spec) => `${root}/plugins/${this.name}/mounts/${handleOf(spec)}`,
        mountDevice: (spec, _d, _p, target) => this.answer('mountDevice', spec, target, undefined),
        unmountDevice: (spec, _p, target) => this.answer('unmountDevice', spec, target, undefined),
        deviceMountRefs: async () => [],
      };
    }
    if (opts.caps.blockMappable) {
      this.blockMapper = {
        globalMapPath: (spec) => `${root}/plugins/${this.name}/volumeDevices/${handleOf(spec)}`,
        podDevicePath: (spec, uid) =>
          `${root}/pods/${uid}/volumeDevices/${dir}/${spec.innerVolumeSpecName}`,
        setUpDevice: (spec, _d, _g, target) => this.answer('setUpDevice', spec, target, undefined),
        mapPodDevice: (spec, _d, _g, target) =>
          this.answer('mapPodDevice', spec, target, undefined),
        unmapPodDevice: (spec, target) => this.answer('unmapPodDevice', spec, target, undefined),
        tearDownDevice: (spec, _g, target) =>
          this.answer('tearDownDevice', spec, target, undefined),
        deviceMapRefs: async () => [],
      };
    }
    if (opts.caps.nodeExpandable) {
      this.expander = {
        nodeExpand: (spec, o, target) => this.answer('nodeExpand', spec, target, o.newSizeBytes),
      };
    }
  }

  /** Records the call, waits its scripted delay on the virtual clock, then answers. */
  private async answer<T>(
    call: CallName,
    spec: ResolvedVolume,
    target: CallTarget,
    value: T,
  ): Promise<T> {
    const entry = this.script.next(handleOf(spec), call);
    this.opts.journal.push({
      t: this.opts.clock.nowMs() - (this.opts.startMs ?? 0),
      plugin: this.name,
      call,
      volume: spec.volume,
      node: target.node,
      pod: target.pod,
      outcome: entry.outcome,
    });
    const effect = () => this.opts.host?.apply(call, spec.volume, target.pod);
    if (entry.outcome === 'hang') {
      effect(); // it may happen any time; assume the worst for leak checks
      return new Promise<T>(() => {});
    }
    if (entry.delayMs > 0) await sleep(this.opts.clock, entry.delayMs);
    // A call cut off by an engine stop dies with the process: no late effect.
    if (callCutOff(target)) return new Promise<T>(() => {});
    // Read when the call would write the files: what the store holds at that moment.
    const missing =
      call === 'setUp' && this.opts.contents !== undefined
        ? missingContent(spec, this.opts.contents)
        : undefined;
    if (missing !== undefined && entry.outcome !== 'final')
      throw new PluginError('transient', missing);
    if (entry.outcome === 'ok' || entry.outcome === 'uncertain') effect();
    if (entry.outcome === 'final') this.opts.host?.rollBack(call, spec.volume, target.pod);
    switch (entry.outcome) {
      case 'ok':
        return value;
      case 'failedPrecondition':
        throw new PluginError('final', `fake ${call} of ${spec.volume}: failed precondition`, true);
      case 'grpc':
      case 'disconnect':
        // The scenario parser keeps these to CSI drivers' RPC names.
        throw new PluginError('final', `fake ${call}: ${entry.outcome} is for CSI drivers only`);
      default:
        throw new PluginError(
          entry.outcome,
          `fake ${call} of ${spec.volume}: scripted ${entry.outcome} failure`,
        );
    }
  }
}
