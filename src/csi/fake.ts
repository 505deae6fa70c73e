/**
 * A scripted CSI driver at the gRPC boundary (docs/scenarios.md `csi:` plugin entries): it
 * answers each RPC with the next scripted outcome — `ok`, `{grpc: CODE}`, `{disconnect:
 * true}`, `{delay}`, `{hang}` — on the virtual clock, honouring the caller's deadline, and
 * records every RPC in the simulation's journal under the driver's name.
 */
import { type Clock, sleep } from '../clock.js';
import type { CallName } from '../events/index.js';
import { type FakeCallRecord, type FakeHost, type FaultScript, Script } from '../plugins/fake.js';
import type { CsiRpc } from './proto.js';
import {
  type CsiTransport,
  CsiRpcError,
  errorClassOf,
  provisionErrorClassOf,
  type RpcInfo,
} from './transport.js';

/** What a scripted driver's controller provisions from (docs/scenarios.md fake driver keys). */
export interface FakeBackend {
  /** Bytes the backend can still give (CreateVolume and growth beyond: OUT_OF_RANGE). */
  capacityBytes: number;
  /** Created volumes: volume_id → size and accessible topology. */
  readonly volumes: Map<string, { sizeBytes: number; topology: Record<string, string>[] }>;
}

export interface FakeCsiDriverOptions {
  readonly name: string;
  /** Its controller's volumes (CreateVolume / DeleteVolume / ControllerExpandVolume). */
  readonly backend?: FakeBackend;
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

type CreateRequest = {
  name: string;
  capacity_range?: { required_bytes?: string };
  accessibility_requirements?: { requisite?: { segments: Record<string, string> }[] };
};

/** The spec's rules for CreateVolume: idempotent by name, OUT_OF_RANGE beyond capacity. */
function createVolume(backend: FakeBackend, request: CreateRequest): object {
  const sizeBytes = Number(request.capacity_range?.required_bytes ?? 0);
  const known = backend.volumes.get(request.name);
  if (known !== undefined && known.sizeBytes !== sizeBytes)
    throw new CsiRpcError(
      'ALREADY_EXISTS',
      `CreateVolume: ALREADY_EXISTS: ${request.name} exists with another size`,
    );
  if (known === undefined) {
    if (sizeBytes > backend.capacityBytes)
      throw new CsiRpcError(
        'OUT_OF_RANGE',
        `CreateVolume: OUT_OF_RANGE: ${sizeBytes} bytes asked, ${backend.capacityBytes} left`,
      );
    const first = request.accessibility_requirements?.requisite?.[0]?.segments;
    backend.capacityBytes -= sizeBytes;
    backend.volumes.set(request.name, { sizeBytes, topology: first === undefined ? [] : [first] });
  }
  const volume = backend.volumes.get(request.name)!;
  return {
    volume: {
      volume_id: request.name,
      capacity_bytes: String(volume.sizeBytes),
      volume_context: {},
      accessible_topology: volume.topology.map((segments) => ({ segments })),
    },
  };
}

function expandVolume(backend: FakeBackend, request: CreateRequest & { volume_id: string }) {
  const volume = backend.volumes.get(request.volume_id);
  if (volume === undefined)
    throw new CsiRpcError(
      'NOT_FOUND',
      `ControllerExpandVolume: NOT_FOUND: no volume ${request.volume_id}`,
    );
  const sizeBytes = Number(request.capacity_range?.required_bytes ?? 0);
  const more = sizeBytes - volume.sizeBytes;
  if (more > backend.capacityBytes)
    throw new CsiRpcError(
      'OUT_OF_RANGE',
      `ControllerExpandVolume: OUT_OF_RANGE: ${more} more bytes asked`,
    );
  if (more > 0) {
    backend.capacityBytes -= more;
    volume.sizeBytes = sizeBytes;
  }
  return { capacity_bytes: String(volume.sizeBytes), node_expansion_required: true };
}

/** The controller's RPCs on the backend (undefined: not one of them). */
function controllerAnswer(backend: FakeBackend | undefined, rpc: CsiRpc, request: object) {
  if (backend === undefined) return undefined;
  if (rpc === 'CreateVolume') return createVolume(backend, request as CreateRequest);
  if (rpc === 'ControllerExpandVolume')
    return expandVolume(backend, request as CreateRequest & { volume_id: string });
  if (rpc === 'DeleteVolume') {
    const id = (request as { volume_id: string }).volume_id;
    const volume = backend.volumes.get(id);
    if (volume !== undefined) backend.capacityBytes += volume.sizeBytes;
    backend.volumes.delete(id); // an unknown id is OK (idempotent)
    return {};
  }
  return undefined;
}

function responseOf(rpc: CsiRpc, request: object, handle: string): object {
  if (rpc === 'ControllerPublishVolume')
    return { publish_context: { devicePath: `/dev/fake/${handle}` } };
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

  async call<Res>(
    rpc: CsiRpc,
    request: object,
    opts: { deadlineMs: number; info?: RpcInfo },
  ): Promise<Res> {
    const info = opts.info ?? { volume: '', node: '', pod: null, handle: '' };
    const entry = this.script.next(info.handle, rpc);
    const { clock } = this.opts;
    const record: FakeCallRecord = {
      t: clock.nowMs(),
      plugin: this.opts.name,
      call: rpc,
      volume: info.volume,
      node: info.node,
      pod: info.pod,
      outcome: entry.outcome === 'grpc' ? entry.code! : entry.outcome,
    };
    this.opts.journal.push(record);
    const call = effectOf[rpc];
    const backend = this.opts.backend;
    const effect = () => {
      if (call !== undefined) this.opts.host?.apply(call, info.volume, info.pod);
      // A provisioning RPC that may be in progress may have taken effect: assume it did.
      if (rpc === 'CreateVolume' || rpc === 'DeleteVolume') {
        try {
          controllerAnswer(backend, rpc, request);
        } catch {
          // It failed in the backend: nothing took effect.
        }
      }
    };
    const waitMs = entry.outcome === 'hang' ? Number.POSITIVE_INFINITY : entry.delayMs;
    const cutOff = () => info.signal?.aborted === true;
    if (waitMs >= opts.deadlineMs) {
      effect(); // it may still happen after the deadline: assume the worst for leak checks
      await sleep(clock, opts.deadlineMs);
      if (cutOff()) return new Promise<Res>(() => {});
      throw new CsiRpcError(
        'DEADLINE_EXCEEDED',
        `${rpc}: DEADLINE_EXCEEDED: deadline of ${opts.deadlineMs} ms passed`,
      );
    }
    if (waitMs > 0) await sleep(clock, waitMs);
    // A call cut off by an engine stop dies with the process: no late effect.
    if (cutOff()) return new Promise<Res>(() => {});
    try {
      return this.answer<Res>(rpc, request, { entry, info, effect });
    } catch (error) {
      // The backend refused what the script let through: the journal says how.
      if (entry.outcome !== 'grpc' && error instanceof CsiRpcError && error.code !== null)
        record.outcome = error.code;
      throw error;
    }
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
        const provisioning = rpc === 'CreateVolume' || rpc === 'DeleteVolume';
        const mayHaveRun = provisioning ? provisionErrorClassOf(code) : errorClassOf(code);
        if (mayHaveRun === 'uncertain') a.effect();
        else if (call !== undefined) this.opts.host?.rollBack(call, info.volume, info.pod);
        throw new CsiRpcError(code, `${rpc}: ${code}: scripted by the scenario`);
      }
      case 'disconnect':
        a.effect();
        throw new CsiRpcError(null, `${rpc}: the connection to ${this.opts.name} broke (scripted)`);
      default: {
        if (call !== undefined) this.opts.host?.apply(call, info.volume, info.pod);
        const controller = controllerAnswer(this.opts.backend, rpc, request);
        return (controller ?? responseOf(rpc, request, info.handle)) as Res;
      }
    }
  }

  close(): void {}
}
