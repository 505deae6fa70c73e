/** `vole inspect --db FILE [--port N] [--host ADDR]`: serve the inspector until SIGINT/SIGTERM. */
import { UsageError } from './postmortem.js';
import { startInspector } from '../inspect/server.js';

export interface InspectCliOptions {
  readonly db: string;
  readonly port?: string;
  readonly host?: string;
}

export const inspectPortDefault = 7421;

export async function inspectCommand(opts: InspectCliOptions): Promise<number> {
  const portText = opts.port ?? String(inspectPortDefault);
  if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) > 65_535) {
    throw new UsageError(`--port ${portText}: give a port number (0 picks a free one)`);
  }
  const host = opts.host ?? '127.0.0.1';
  let inspector;
  try {
    inspector = await startInspector({ db: opts.db, port: Number(portText), host });
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
    `vole inspect: ${opts.db} at ${inspector.url} (read-only; Ctrl-C to stop)\n`,
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
