/**
 * The kubelet's plugin watcher for CSI drivers: a unix socket appearing in
 * `<root>/plugins_registry/` is asked GetInfo; a CSI plugin speaking CSI v1 is then
 * registered (src/csi/registry.ts) and told NotifyRegistrationStatus. A socket that
 * disappears deregisters its driver; one re-created (a restarted driver) registers again.
 */
import { mkdirSync, readdirSync, statSync, watch, type FSWatcher } from 'node:fs';
import { basename, join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import pino, { type Logger } from 'pino';
import { registrationService } from './proto.js';
import type { CsiDriverRegistry } from './registry.js';
import { grpcErrorMessage } from './transport.js';

/** How often the directory is scanned besides inotify (which can miss a quick re-create). */
const scanIntervalMs = 500;
const registrationDeadlineMs = 5_000;

interface PluginInfo {
  type: string;
  name: string;
  endpoint: string;
  supported_versions: string[];
}

type Unary = (
  request: object,
  options: grpc.CallOptions,
  cb: (e: Error | null, r?: unknown) => void,
) => void;

function ask<T>(client: grpc.Client, method: string, request: object): Promise<T> {
  const fn = (client as unknown as Record<string, Unary>)[method]!.bind(client);
  return new Promise<T>((resolve, reject) =>
    fn(request, { deadline: new Date(Date.now() + registrationDeadlineMs) }, (error, response) =>
      error === null ? resolve(response as T) : reject(error),
    ),
  );
}

export class RegistrationWatcher {
  /** socket path → the driver it registered and the socket's inode then. */
  private readonly known = new Map<string, { name: string; inode: number }>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private watcher: FSWatcher | undefined;
  private scanning: Promise<void> | undefined;

  private readonly logger: Logger;

  constructor(
    private readonly opts: {
      dir: string;
      registry: CsiDriverRegistry;
      /** Where it logs drivers that restart or fail to register (default: nowhere). */
      logger?: Logger;
      say?: (line: string) => void;
    },
  ) {
    this.logger = opts.logger ?? pino({ level: 'silent' });
  }

  /** Registers the drivers whose sockets are there now, then keeps watching. */
  async start(): Promise<void> {
    mkdirSync(this.opts.dir, { recursive: true });
    await this.scan();
    this.timer = setInterval(() => void this.scan(), scanIntervalMs);
    this.timer.unref(); // the agent's own work keeps the process alive, not the watching
    try {
      this.watcher = watch(this.opts.dir, () => void this.scan());
      this.watcher.unref();
    } catch {
      // inotify unavailable: the periodic scan still finds every socket
    }
  }

  stop(): void {
    clearInterval(this.timer);
    this.watcher?.close();
  }

  /** One scan at a time; a scan asked for meanwhile runs after it. */
  scan(): Promise<void> {
    const run = async () => {
      await this.scanning;
      await this.scanOnce();
    };
    this.scanning = run();
    return this.scanning;
  }

  private async scanOnce(): Promise<void> {
    const sockets = new Map<string, number>();
    for (const name of readdirSync(this.opts.dir)) {
      const path = join(this.opts.dir, name);
      const st = (() => {
        try {
          return statSync(path);
        } catch {
          return undefined;
        }
      })();
      if (st?.isSocket() === true) sockets.set(path, st.ino);
    }
    for (const [path, entry] of this.known) {
      if (sockets.get(path) === entry.inode) continue;
      this.known.delete(path);
      const reason =
        `no socket in ${this.opts.dir}/ registers it (${basename(path)} went away); ` +
        "start the driver's registrar again, vole retries until it registers";
      this.opts.registry.remove(entry.name, reason);
      this.opts.say?.(`CSI driver ${entry.name} deregistered (${path} gone)`);
    }
    for (const [path, inode] of sockets) {
      if (this.known.has(path)) continue;
      const name = await this.register(path);
      if (name !== undefined) this.known.set(path, { name, inode });
    }
  }

  /** GetInfo, register, NotifyRegistrationStatus; the driver's name, or undefined (retried next scan). */
  private async register(path: string): Promise<string | undefined> {
    const client = new (registrationService())(`unix://${path}`, grpc.credentials.createInsecure());
    try {
      const info = await ask<PluginInfo>(client, 'GetInfo', {});
      const problem = unsupported(info);
      if (problem !== undefined) {
        await ask(client, 'NotifyRegistrationStatus', { plugin_registered: false, error: problem });
        this.opts.say?.(`plugin at ${path} not registered: ${problem}`);
        return info.name || path;
      }
      const endpoint = info.endpoint.startsWith('unix://')
        ? info.endpoint
        : `unix://${info.endpoint}`;
      try {
        await this.opts.registry.add(endpoint, 'registration', info.name);
      } catch (error) {
        const message = grpcErrorMessage(error as Error);
        await ask(client, 'NotifyRegistrationStatus', { plugin_registered: false, error: message });
        throw error;
      }
      await ask(client, 'NotifyRegistrationStatus', { plugin_registered: true, error: '' });
      this.opts.say?.(`CSI driver ${info.name} registered (endpoint ${endpoint})`);
      return info.name;
    } catch (error) {
      const err = grpcErrorMessage(error as Error);
      this.logger.debug({ path, err }, 'registration failed; retrying');
      return undefined;
    } finally {
      client.close();
    }
  }
}

function unsupported(info: PluginInfo): string | undefined {
  if (info.type !== 'CSIPlugin')
    return `plugin type ${info.type} is not handled by vole (only CSIPlugin)`;
  if (!info.supported_versions.some((v) => v.startsWith('1.')))
    return `${info.name} supports CSI ${info.supported_versions.join(', ') || 'no version'}; vole speaks CSI 1.x`;
  if (info.endpoint === '') return `${info.name} gave no endpoint`;
  return undefined;
}
