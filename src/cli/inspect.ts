/**
 * `vole inspect --db FILE | --etcd URLS [--port N] [--host ADDR]`: serve the inspector until
 * SIGINT/SIGTERM, over a log file or over the controller log in etcd, followed live.
 */
import { UsageError } from './postmortem.js';
import { type InspectedSource, startInspector } from '../inspect/server.js';
import { ClusterError, connect, describeEtcdError, withDeadline } from '../cluster/client.js';
import { ClusterKeys, defaultPrefix } from '../cluster/keys.js';
import { EtcdLogMirror } from '../cluster/log-mirror.js';
import { EtcdStore } from '../cluster/store-etcd.js';
import { RealClock } from '../clock.js';

export interface InspectCliOptions {
  readonly db?: string;
  readonly etcd?: string;
  readonly prefix?: string;
  readonly port?: string;
  readonly host?: string;
}

const etcdLoadDeadlineMs = 30_000;

/** The controller log in etcd, loaded and followed (`--etcd`). */
async function etcdSource(
  urls: string,
  prefix: string,
  warn: (m: string) => void,
): Promise<InspectedSource> {
  let client;
  try {
    client = connect(urls);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const keys = new ClusterKeys(prefix);
  try {
    const clock = new RealClock();
    const opening = EtcdLogMirror.open(new EtcdStore(client), keys, clock, { warn });
    const mirror = await withDeadline(opening, etcdLoadDeadlineMs, `etcd at ${urls}`, clock);
    return {
      store: mirror,
      name: `controller log in etcd (${prefix})`,
      close: async () => {
        await mirror.close();
        client.close();
      },
    };
  } catch (error) {
    client.close();
    throw new UsageError(
      error instanceof ClusterError ? error.message : describeEtcdError(error, urls),
    );
  }
}

const inspectPortDefault = 7421;

export async function inspectCommand(opts: InspectCliOptions): Promise<number> {
  const portText = opts.port ?? String(inspectPortDefault);
  if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) > 65_535) {
    throw new UsageError(`--port ${portText}: give a port number (0 picks a free one)`);
  }
  const host = opts.host ?? '127.0.0.1';
  if ((opts.db === undefined) === (opts.etcd === undefined))
    throw new UsageError(
      'give the log to inspect: --db FILE, or --etcd URLS for the controller log in etcd',
    );
  const warn = (m: string) => process.stderr.write(`vole inspect: ${m}\n`);
  const source =
    opts.etcd === undefined
      ? undefined
      : await etcdSource(opts.etcd, opts.prefix ?? defaultPrefix, warn);
  let inspector;
  try {
    inspector = await startInspector({
      ...(source === undefined ? { db: opts.db } : { source }),
      port: Number(portText),
      host,
      warn,
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE')
      throw new UsageError(
        `port ${portText} on ${host} is in use; choose another with --port (0 picks a free one)`,
      );
    if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EACCES') {
      throw new UsageError(
        `cannot listen on ${host}:${portText} (${code}); give --host an address of this machine`,
      );
    }
    throw error;
  }
  process.stderr.write(
    `vole inspect: ${source?.name ?? opts.db} at ${inspector.url} (read-only; Ctrl-C to stop)\n`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  await inspector.close();
  return 0;
}
