/**
 * A scripted CSI driver at the gRPC boundary (SCENARIOS.md `csi:` plugin entries): it
 * answers each RPC with the next scripted outcome — `ok`, `{grpc: CODE}`, `{disconnect:
 * true}`, `{delay}`, `{hang}` — on the virtual clock, honouring the caller's deadline, and
 * records every RPC in the simulation's journal under the driver's name.
 */
import { type Clock, sleep } from '../clock.js';
import type { CallName } from '../events/index.js';
import { type FakeCallRecord, type FakeHost, type FaultScript, Script } from '../plugins/fake.js';
import type { CsiRpc } from './proto.js';
import { type CsiTransport, CsiRpcError, errorClassOf, type RpcInfo } from './transport.js';

export interface FakeCsiDriverOptions {
  readonly name: string;
  readonly faults?: FaultScript;
  readonly volumeFaults?: Readonly<Record<string, FaultScript>>;
  readonly clock: Clock;
  readonly journal: FakeCallRecord[];
  readonly host?: FakeHost;
}

/** What each RPC does to the pretend host, in plugin-call terms (chaos leak checks). */
const effectOf: Partial<Record<CsiRpc, CallName>> = {
  ControllerPublishVolume: 'attach',
  ControllerUnpublishVolume: 'detach',
  NodeStageVolume: 'mountDevice',
  NodeUnstageVolume: 'unmountDevice',
  NodePublishVolume: 'setUp',
  NodeUnpublishVolume: 'tearDown',
};

function responseOf(rpc: CsiRpc, request: object, handle: string): object {
  if (rpc === 'ControllerPublishVolume') return { publish_context: { devicePath: `/dev/fake/${handle}` } };
  if (rpc === 'NodeExpandVolume') {
    const range = (request as { capacity_range?: { required_bytes?: string } }).capacity_range;
    return { capacity_bytes: range?.required_bytes ?? '0' };
  }
  return {};
}

export class FakeCsiDriver implements CsiTransport {
  private readonly script: Script;

  constructor(private readonly opts: FakeCsiDriverOptions) {
    this.script = new Script(opts.faults, opts.volumeFaults);
  }

  async call<Res>(rpc: CsiRpc, request: object, opts: { deadlineMs: number; info?: RpcInfo }): Promise<Res> {
    const info = opts.info ?? { volume: '', node: '', pod: null, handle: '' };
    const entry = this.script.next(info.handle, rpc);
    const { clock } = this.opts;
    this.opts.journal.push({
      t: clock.nowMs(),
      plugin: this.opts.name,
      call: rpc,
      volume: info.volume,
      node: info.node,
      pod: info.pod,
      outcome: entry.outcome === 'grpc' ? entry.code! : entry.outcome,
    });
    const call = effectOf[rpc];
    const effect = () => call !== undefined && this.opts.host?.apply(call, info.volume, info.pod);
    const waitMs = entry.outcome === 'hang' ? Number.POSITIVE_INFINITY : entry.delayMs;
    const cutOff = () => info.signal?.aborted === true;
    if (waitMs >= opts.deadlineMs) {
      effect(); // it may still happen after the deadline: assume the worst for leak checks
      await sleep(clock, opts.deadlineMs);
      if (cutOff()) return new Promise<Res>(() => {});
      throw new CsiRpcError('DEADLINE_EXCEEDED', `${rpc}: DEADLINE_EXCEEDED: deadline of ${opts.deadlineMs} ms passed`);
    }
    if (waitMs > 0) await sleep(clock, waitMs);
    // A call cut off by an engine stop dies with the process: no late effect.
    if (cutOff()) return new Promise<Res>(() => {});
    return this.answer<Res>(rpc, request, { entry, info, effect });
  }

  private answer<Res>(
    rpc: CsiRpc,
    request: object,
    a: { entry: ReturnType<Script['next']>; info: RpcInfo; effect: () => void },
  ): Res {
    const { entry, info } = a;
    const call = effectOf[rpc];
    switch (entry.outcome) {
      case 'grpc': {
        const code = entry.code!;
        if (errorClassOf(code) === 'uncertain') a.effect();
        else if (call !== undefined) this.opts.host?.rollBack(call, info.volume, info.pod);
        throw new CsiRpcError(code, `${rpc}: ${code}: scripted by the scenario`);
      }
      case 'disconnect':
        a.effect();
        throw new CsiRpcError(null, `${rpc}: the connection to ${this.opts.name} broke (scripted)`);
      default:
        a.effect();
        return responseOf(rpc, request, info.handle) as Res;
    }
  }

  close(): void {}
}
