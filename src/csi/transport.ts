/**
 * How vole talks to a CSI driver: one RPC at a time with a deadline. `GrpcTransport`
 * speaks gRPC over the driver's unix socket; the simulator's scripted driver implements
 * the same interface on the virtual clock (src/csi/fake.ts), so the client plugin above
 * it is the same code in both.
 */
import * as grpc from '@grpc/grpc-js';
import type { ErrorKind } from '../../machines/index.js';
import { type CsiRpc, csiServices, serviceOf } from './proto.js';

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
  call<Res>(rpc: CsiRpc, request: object, opts: { deadlineMs: number; info?: RpcInfo }): Promise<Res>;
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
 * CSI.md error classes (the kubelet's isFinalError): these codes, and any failure without
 * a status, mean the operation may still be in progress; every other code means it did
 * not happen.
 */
export const inProgressCodes: ReadonlySet<string> = new Set([
  'CANCELLED',
  'DEADLINE_EXCEEDED',
  'UNAVAILABLE',
  'RESOURCE_EXHAUSTED',
  'ABORTED',
]);

export function errorClassOf(code: string | null): Exclude<ErrorKind, 'transient'> {
  return code === null || inProgressCodes.has(code) ? 'uncertain' : 'final';
}

/** The gRPC status names, by number (0 OK … 16 UNAUTHENTICATED). */
export const grpcCodeNames: readonly string[] = Object.entries(grpc.status)
  .filter(([, value]) => typeof value === 'number')
  .sort((a, b) => (a[1] as number) - (b[1] as number))
  .map(([name]) => name);

/** The numeric gRPC status of a name (`NOT_FOUND` → 5), for servers answering errors. */
export function grpcCode(name: string): grpc.status {
  const index = grpcCodeNames.indexOf(name);
  if (index < 0) throw new Error(`unknown gRPC status "${name}"`);
  return index as grpc.status;
}

type UnaryMethod = (
  request: object,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, response?: unknown) => void,
) => void;

/**
 * Reconnect quickly: a driver restarted on the same socket is used again within a second,
 * instead of after grpc-js's default backoff of up to two minutes.
 */
const channelOptions: grpc.ChannelOptions = {
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1000,
};

/** gRPC to a driver at `unix:///abs/path.sock` (or any grpc-js address). */
export class GrpcTransport implements CsiTransport {
  private readonly clients: Record<'Identity' | 'Controller' | 'Node', grpc.Client>;

  constructor(readonly endpoint: string) {
    const services = csiServices();
    const credentials = grpc.credentials.createInsecure();
    this.clients = {
      Identity: new services.Identity(endpoint, credentials, channelOptions),
      Controller: new services.Controller(endpoint, credentials, channelOptions),
      Node: new services.Node(endpoint, credentials, channelOptions),
    };
  }

  call<Res>(rpc: CsiRpc, request: object, opts: { deadlineMs: number }): Promise<Res> {
    const client = this.clients[serviceOf(rpc)];
    const method = (client as unknown as Record<string, UnaryMethod>)[rpc]!.bind(client);
    return new Promise<Res>((resolve, reject) => {
      const deadline = new Date(Date.now() + opts.deadlineMs);
      method(request, new grpc.Metadata(), { deadline }, (error, response) => {
        if (error === null) resolve(response as Res);
        else reject(toRpcError(rpc, error));
      });
    });
  }

  close(): void {
    for (const client of Object.values(this.clients)) client.close();
  }
}

function toRpcError(rpc: CsiRpc, error: grpc.ServiceError | Error): CsiRpcError {
  const code = 'code' in error && typeof error.code === 'number' ? grpcCodeNames[error.code] : undefined;
  const details = 'details' in error && typeof error.details === 'string' ? error.details : error.message;
  return new CsiRpcError(code ?? null, `${rpc}: ${code ?? 'no gRPC status'}: ${details}`);
}
