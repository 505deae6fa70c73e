/**
 * Serves a CSI driver's handlers over gRPC on a unix socket (the csi.v1 Identity,
 * Controller and Node services), and, with a registration directory, the kubelet's
 * plugin registration service on `<dir>/<driver>-reg.sock` so an agent watching that
 * directory finds it (docs/csi.md driver discovery).
 */
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { csiServices, registrationService } from '../proto.js';
import { grpcCode } from '../transport.js';
import type { CsiRequest, Handler } from './common.js';
import { DriverError, driverErrorOf } from './errors.js';

/** The socket path of `unix:///abs/path` (or of a bare absolute path). */
export function socketPathOf(endpoint: string): string {
  const path = endpoint.startsWith('unix://') ? endpoint.slice('unix://'.length) : endpoint;
  if (!path.startsWith('/'))
    throw new Error(
      `endpoint "${endpoint}" is not unix:///absolute/path.sock; give an absolute socket path`,
    );
  return path;
}

/** A socket file left by a driver that died is removed; anything else in the way is an error. */
function clearStaleSocket(path: string): void {
  const st = (() => {
    try {
      return statSync(path);
    } catch {
      return undefined;
    }
  })();
  if (st === undefined) return;
  if (!st.isSocket())
    throw new Error(`${path} exists and is not a socket; remove it or choose another endpoint`);
  rmSync(path, { force: true });
}

function bind(server: grpc.Server, path: string): Promise<void> {
  clearStaleSocket(path);
  return new Promise((resolve, reject) => {
    server.bindAsync(`unix://${path}`, grpc.ServerCredentials.createInsecure(), (error) =>
      error === null ? resolve() : reject(error),
    );
  });
}

type UnaryHandler = grpc.handleUnaryCall<CsiRequest, object>;

function implementation(
  service: grpc.ServiceDefinition,
  handlers: Readonly<Record<string, Handler>>,
  logger: Logger,
): Record<string, UnaryHandler> {
  const impl: Record<string, UnaryHandler> = {};
  for (const name of Object.keys(service)) {
    impl[name] = (call, callback) => {
      const startMs = performance.now();
      const handler = handlers[name];
      const answer =
        handler === undefined
          ? Promise.reject(
              new DriverError('UNIMPLEMENTED', `${name} is not implemented by this driver`),
            )
          : handler(call.request);
      answer.then(
        (response) => {
          logger.info({ rpc: name, code: 'OK', durationMs: performance.now() - startMs }, 'rpc');
          callback(null, response);
        },
        (error: unknown) => {
          const e = driverErrorOf(error);
          logger.info(
            { rpc: name, code: e.code, durationMs: performance.now() - startMs, err: e.message },
            'rpc',
          );
          callback({ code: grpcCode(e.code), details: e.message });
        },
      );
    };
  }
  return impl;
}

export interface ServedDriver {
  readonly socketPath: string;
  readonly registrationSocketPath?: string;
  close(): void;
}

/** Starts serving; `close` stops at once and removes the sockets. */
export async function serveCsiDriver(opts: {
  name: string;
  endpoint: string;
  handlers: Readonly<Record<string, Handler>>;
  registrationDir?: string;
  logger: Logger;
}): Promise<ServedDriver> {
  const socketPath = socketPathOf(opts.endpoint);
  const server = new grpc.Server();
  const services = csiServices();
  for (const ctor of [services.Identity, services.Controller, services.Node])
    server.addService(ctor.service, implementation(ctor.service, opts.handlers, opts.logger));
  await bind(server, socketPath);
  const registration =
    opts.registrationDir === undefined
      ? undefined
      : await serveRegistration({ ...opts, socketPath });
  return {
    socketPath,
    ...(registration === undefined ? {} : { registrationSocketPath: registration.path }),
    close() {
      registration?.server.forceShutdown();
      server.forceShutdown();
      rmSync(socketPath, { force: true });
      if (registration !== undefined) rmSync(registration.path, { force: true });
    },
  };
}

/**
 * The registration service alone (what node-driver-registrar serves for a driver): GetInfo
 * names the driver and its endpoint socket; `<dir>/<name>-reg.sock`.
 */
export async function serveRegistration(opts: {
  name: string;
  socketPath: string;
  registrationDir?: string;
  logger: Logger;
}): Promise<{ server: grpc.Server; path: string }> {
  mkdirSync(opts.registrationDir!, { recursive: true });
  const path = join(opts.registrationDir!, `${opts.name}-reg.sock`);
  const server = new grpc.Server();
  server.addService(registrationService().service, {
    GetInfo: ((_call, callback) =>
      callback(null, {
        type: 'CSIPlugin',
        name: opts.name,
        endpoint: opts.socketPath,
        supported_versions: ['1.0.0'],
      })) as UnaryHandler,
    NotifyRegistrationStatus: ((call, callback) => {
      const status = call.request as unknown as { plugin_registered: boolean; error: string };
      opts.logger.info(
        { registered: status.plugin_registered, error: status.error },
        'registration status',
      );
      callback(null, {});
    }) as UnaryHandler,
  });
  await bind(server, path);
  return { server, path };
}
