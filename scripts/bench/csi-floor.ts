/**
 * The floors of the CSI bench, measured in the same run as the engine on the same arrival
 * schedule: what three round trips to another process cost with no engine at all.
 *
 * - `grpcFloor`: the three RPCs of a pod (ControllerPublishVolume, NodeStageVolume,
 *   NodePublishVolume, requests shaped as the plugin's) through the same transport to the
 *   same null driver, one after the other. What gRPC costs with no engine around it.
 * - `http2Floor`: the same through a minimal unary client on node:http2 (`Http2Unary`):
 *   how much of the gRPC floor is grpc-js's own client.
 * - `socketFloor`: three round trips of a 200-byte line over a plain unix socket to an echo
 *   in the driver process. What any separate process costs on this machine: its wake-ups
 *   and the scheduler's delays, with no gRPC.
 */
import { type ClientHttp2Session, connect } from 'node:http2';
import { createConnection, type Socket } from 'node:net';
import type { MethodDefinition } from '@grpc/grpc-js';
import { type CsiRpc, csiServices } from '../../src/csi/proto.js';
import type { CsiTransport } from '../../src/csi/transport.js';
import { sleepMs } from './util.js';

/**
 * Runs `pod(i)` for each pod on the bench's schedule (pod i starts at i × gapMs; a pod still
 * running when the next is due overlaps it, as in the engine) and returns each one's time.
 */
export async function onSchedule(
  pods: number,
  gapMs: number,
  pod: (i: number) => Promise<void>,
): Promise<number[]> {
  const latencies: number[] = [];
  const running: Promise<void>[] = [];
  const start = performance.now();
  for (let i = 0; i < pods; i++) {
    const wait = start + i * gapMs - performance.now();
    if (wait > 0) await sleepMs(wait);
    const t0 = performance.now();
    running.push(pod(i).then(() => void latencies.push(performance.now() - t0)));
  }
  await Promise.all(running);
  return latencies;
}

const capability = {
  mount: { fs_type: 'ext4', mount_flags: [] },
  access_mode: { mode: 'SINGLE_NODE_WRITER' },
};

/** A pod's three RPCs, straight through the transport (or the minimal http2 client below). */
export function grpcPod(
  transport: Pick<CsiTransport, 'call'>,
  deadlineMs: number,
): (i: number) => Promise<void> {
  const opts = { deadlineMs };
  return async (i) => {
    const volumeId = `disk-floor-${i}`;
    const staging = `/var/lib/vole/plugins/kubernetes.io/csi/fake.disk/${volumeId}/globalmount`;
    const answer = await transport.call<{ publish_context: Record<string, string> }>(
      'ControllerPublishVolume',
      {
        volume_id: volumeId,
        node_id: 'node-1',
        volume_capability: capability,
        readonly: false,
        volume_context: {},
      },
      opts,
    );
    const common = {
      volume_id: volumeId,
      publish_context: answer.publish_context,
      volume_capability: capability,
      volume_context: {},
    };
    await transport.call('NodeStageVolume', { ...common, staging_target_path: staging }, opts);
    await transport.call(
      'NodePublishVolume',
      {
        ...common,
        staging_target_path: staging,
        target_path: `/var/lib/vole/pods/floor-${i}/volumes/kubernetes.io~csi/data/mount`,
        readonly: false,
      },
      opts,
    );
  };
}

/** A line-echo client: each `roundTrip` resolves when its line comes back (in order). */
export class EchoClient {
  private readonly waiting: (() => void)[] = [];
  private buffered = '';
  private constructor(private readonly socket: Socket) {
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.buffered += chunk;
      let end: number;
      while ((end = this.buffered.indexOf('\n')) >= 0) {
        this.buffered = this.buffered.slice(end + 1);
        this.waiting.shift()?.();
      }
    });
  }

  static connect(path: string): Promise<EchoClient> {
    return new Promise((resolve, reject) => {
      const socket = createConnection(path, () => resolve(new EchoClient(socket)));
      socket.once('error', reject);
    });
  }

  roundTrip(line: string): Promise<void> {
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.socket.write(line);
    });
  }

  close(): void {
    this.socket.destroy();
  }
}

const line = `${'x'.repeat(199)}\n`;

export function socketPod(echo: EchoClient): () => Promise<void> {
  return async () => {
    await echo.roundTrip(line);
    await echo.roundTrip(line);
    await echo.roundTrip(line);
  };
}

/**
 * The same three RPCs through a minimal unary gRPC client written on node:http2 (one
 * session on the socket, length-prefixed protobuf, `grpc-status` from the trailers): how
 * much of the floor is grpc-js's own client. A measurement only; vole calls through grpc-js.
 */
export class Http2Unary {
  private constructor(
    private readonly session: ClientHttp2Session,
    private readonly methods: ReadonlyMap<string, MethodDefinition<object, unknown>>,
  ) {}

  static async connect(socketPath: string): Promise<Http2Unary> {
    const session = connect('http://localhost', {
      createConnection: () => createConnection(socketPath),
    });
    await new Promise<void>((resolve, reject) => {
      session.once('connect', () => resolve());
      session.once('error', reject);
    });
    const services = csiServices();
    const methods = new Map<string, MethodDefinition<object, unknown>>();
    for (const ctor of [services.Identity, services.Controller, services.Node])
      for (const [name, definition] of Object.entries(ctor.service))
        methods.set(name, definition as MethodDefinition<object, unknown>);
    return new Http2Unary(session, methods);
  }

  call<Res>(rpc: CsiRpc, request: object, opts: { deadlineMs: number }): Promise<Res> {
    const method = this.methods.get(rpc)!;
    const body = method.requestSerialize(request);
    const frame = Buffer.alloc(5 + body.length);
    frame.writeUInt32BE(body.length, 1);
    body.copy(frame, 5);
    return new Promise<Res>((resolve, reject) => {
      const stream = this.session.request({
        ':method': 'POST',
        ':path': method.path,
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-timeout': `${opts.deadlineMs}m`,
      });
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('trailers', (trailers) => {
        if (trailers['grpc-status'] !== '0')
          reject(new Error(`${rpc}: grpc-status ${String(trailers['grpc-status'])}`));
        else resolve(method.responseDeserialize(Buffer.concat(chunks).subarray(5)) as Res);
      });
      stream.on('error', reject);
      stream.end(frame);
    });
  }

  close(): void {
    this.session.close();
  }
}

/**
 * A driver inside the agent's process, answering each RPC on the next turn of the event
 * loop: with it, the CSI row measures the engine and the CSI plugin alone (their events,
 * requests, deadlines and hops), without gRPC or another process. It is a diagnostic
 * row, never the CSI figure.
 */
export const inProcessTransport: CsiTransport = {
  call: <Res>(rpc: CsiRpc) =>
    new Promise<Res>((resolve) => {
      const answer =
        rpc === 'ControllerPublishVolume'
          ? { publish_context: { devicePath: '/dev/in-process' } }
          : {};
      setImmediate(() => resolve(answer as Res));
    }),
  close: () => {},
};
