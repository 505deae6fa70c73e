/**
 * How vole talks to a CSI driver: one RPC at a time with a deadline. `GrpcTransport`
 * speaks gRPC over the driver's unix socket; the simulator's scripted driver implements
 * the same interface on the virtual clock (src/csi/fake.ts), so the client plugin above
 * it is the same code in both.
 */
import * as grpc from '@grpc/grpc-js';
import type { ErrorKind } from '../../machines/index.js';
import { withoutResolutionNote } from './grpc-text.js';
import { type CsiRpc, csiRpcs, csiServices } from './proto.js';

/** What the caller knows about an RPC, for a fake's journal (real transports ignore it). */
export interface RpcInfo {
  readonly volume: string;
  readonly node: string;
  readonly pod: string | null;
  /** The volume handle (scripted faults per volume use it). */
  readonly handle: string;
  /** Aborted when the engine stops: a scripted driver then never answers (the process died). */
  readonly signal?: AbortSignal;
}

export interface CsiTransport {
  call<Res>(
    rpc: CsiRpc,
    request: object,
    opts: { deadlineMs: number; info?: RpcInfo },
  ): Promise<Res>;
  close(): void;
}

/**
 * An RPC that failed. `code` is the gRPC status name (`DEADLINE_EXCEEDED`), or null when
 * there was no status at all (the connection broke, the socket is gone).
 */
export class CsiRpcError extends Error {
  override name = 'CsiRpcError';
  constructor(
    readonly code: string | null,
    message: string,
  ) {
    super(message);
  }
}

/**
 * docs/csi.md error classes (the kubelet's isFinalError): these codes, and any failure without
 * a status, mean the operation may still be in progress; every other code means it did
 * not happen.
 */
const inProgressCodes: ReadonlySet<string> = new Set([
  'CANCELLED',
  'DEADLINE_EXCEEDED',
  'UNAVAILABLE',
  'RESOURCE_EXHAUSTED',
  'ABORTED',
]);

export function errorClassOf(code: string | null): Exclude<ErrorKind, 'transient'> {
  return code === null || inProgressCodes.has(code) ? 'uncertain' : 'final';
}

/**
 * The external-provisioner's reading of a CreateVolume failure (controller.go's final-error
 * check): CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE, ABORTED and a broken connection may
 * still be in progress; every other code (RESOURCE_EXHAUSTED and OUT_OF_RANGE too) is a
 * final failure of the attempt.
 */
const provisionInProgressCodes: ReadonlySet<string> = new Set([
  'CANCELLED',
  'DEADLINE_EXCEEDED',
  'UNAVAILABLE',
  'ABORTED',
]);

export function provisionErrorClassOf(code: string | null): Exclude<ErrorKind, 'transient'> {
  return code === null || provisionInProgressCodes.has(code) ? 'uncertain' : 'final';
}

/** The gRPC status names, by number (0 OK … 16 UNAUTHENTICATED). */
const grpcCodeNames: readonly string[] = Object.entries(grpc.status)
  .filter(([, value]) => typeof value === 'number')
  .sort((a, b) => (a[1] as number) - (b[1] as number))
  .map(([name]) => name);

/** The numeric gRPC status of a name (`NOT_FOUND` → 5), for servers answering errors. */
export function grpcCode(name: string): grpc.status {
  const index = grpcCodeNames.indexOf(name);
  if (index < 0) throw new Error(`unknown gRPC status "${name}"`);
  return index as grpc.status;
}

/**
 * One channel to the driver, tuned for a local socket:
 * - it reconnects quickly: a driver restarted on the same socket is used again within a
 *   second, instead of after grpc-js's default backoff of up to two minutes;
 * - no channelz: vole serves no channelz, and its bookkeeping is work on every call;
 * - no keepalive pings (grpc-js's default): a unix socket's peer going away is seen at once.
 */
const channelOptions: grpc.ChannelOptions = {
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1000,
  'grpc.enable_channelz': 0,
};

/** What a unary call needs of its method: its path and (de)serializers, found once per RPC. */
type MethodDefinition = grpc.MethodDefinition<object, unknown>;

function methodDefinitions(): ReadonlyMap<CsiRpc, MethodDefinition> {
  const services = csiServices();
  const definitions = new Map<CsiRpc, MethodDefinition>();
  for (const service of ['Identity', 'Controller', 'Node'] as const) {
    for (const rpc of csiRpcs[service]) {
      const definition = services[service].service[rpc];
      if (definition === undefined)
        throw new Error(`csi.proto has no ${service}.${rpc}; reinstall vole`);
      definitions.set(rpc, definition as MethodDefinition);
    }
  }
  return definitions;
}

/**
 * gRPC to a driver at `unix:///abs/path.sock` (or any grpc-js address): one channel for
 * the three CSI services, opened once (its address resolved once), each call a unary
 * request with its deadline.
 */
export class GrpcTransport implements CsiTransport {
  private readonly client: grpc.Client;
  private readonly methods = methodDefinitions();

  constructor(readonly endpoint: string) {
    this.client = new grpc.Client(endpoint, grpc.credentials.createInsecure(), channelOptions);
  }

  call<Res>(rpc: CsiRpc, request: object, opts: { deadlineMs: number }): Promise<Res> {
    const method = this.methods.get(rpc)!;
    return new Promise<Res>((resolve, reject) => {
      const deadline = Date.now() + opts.deadlineMs;
      this.client.makeUnaryRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        request,
        { deadline },
        (error: grpc.ServiceError | null, response?: unknown) => {
          if (error === null) resolve(response as Res);
          else reject(toRpcError(rpc, error));
        },
      );
    });
  }

  close(): void {
    this.client.close();
  }
}

/** A gRPC error's message (its details), without grpc-js's trailing resolution note. */
export function grpcErrorMessage(error: Error): string {
  const details =
    'details' in error && typeof error.details === 'string' ? error.details : error.message;
  return withoutResolutionNote(details);
}

function toRpcError(rpc: CsiRpc, error: grpc.ServiceError | Error): CsiRpcError {
  const code =
    'code' in error && typeof error.code === 'number' ? grpcCodeNames[error.code] : undefined;
  const message = `${rpc}: ${code ?? 'no gRPC status'}: ${grpcErrorMessage(error)}`;
  return new CsiRpcError(code ?? null, message);
}
