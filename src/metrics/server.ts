/**
 * The metrics endpoint of a running agent or controller: `/metrics` (the registry's text
 * exposition), `/healthz` (the process answers) and `/readyz` (sources ready and the
 * reconciler synced). GET and HEAD only.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface MetricsServer {
  /** `http://host:port`, with the port the kernel gave when 0 was asked. */
  readonly url: string;
  close(): Promise<void>;
}

/** `127.0.0.1:9102`, `[::1]:0`, `:9102` (127.0.0.1): the host and port to listen on. */
export function parseMetricsAddress(text: string): { host: string; port: number } | string {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]*)):([0-9]{1,5})$/.exec(text);
  const port = match === null ? Number.NaN : Number(match[3]);
  if (match === null || !(port >= 0 && port <= 65_535))
    return `--metrics-address ${text}: give HOST:PORT, e.g. 127.0.0.1:9102 (port 0: any free one)`;
  const host = match[1] ?? (match[2] === '' ? '127.0.0.1' : match[2]!);
  return { host, port };
}

export async function serveMetrics(opts: {
  readonly registry: Registry;
  readonly host: string;
  readonly port: number;
  readonly ready: () => boolean;
}): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, type: string, body: string) => {
      res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (path === '/healthz') return send(200, 'text/plain', 'ok\n');
    if (path === '/readyz')
      return opts.ready()
        ? send(200, 'text/plain', 'ok\n')
        : send(503, 'text/plain', 'not ready: sources not ready or reconciler not synced\n');
    if (path !== '/metrics') return send(404, 'text/plain', 'not found: try /metrics\n');
    opts.registry.metrics().then(
      (text) => send(200, opts.registry.contentType, text),
      (error: Error) => send(500, 'text/plain', `metrics failed: ${error.message}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
