/**
 * A TCP forwarder for tests that put a process in a network namespace of their own
 * (netns.ts): run there (`nsenter --net=… node --import tsx netns-forward.ts LISTEN
 * TARGET`), it accepts on LISTEN and pipes each connection to TARGET, each either
 * HOST:PORT or the path of a unix socket (unix sockets cross network namespaces). Prints
 * "ready" once listening.
 */
import { connect, createServer, type Socket } from 'node:net';

type Endpoint = { readonly path: string } | { readonly host: string; readonly port: number };

function endpoint(text: string): Endpoint {
  if (text.startsWith('/')) return { path: text };
  const colon = text.lastIndexOf(':');
  const port = Number(text.slice(colon + 1));
  if (colon < 0 || !Number.isInteger(port)) throw new Error(`HOST:PORT or /path, not "${text}"`);
  return { host: text.slice(0, colon), port };
}

/** Pipes `a` and `b` both ways; either closing or failing ends both. */
export function pipeBoth(a: Socket, b: Socket): void {
  a.pipe(b);
  b.pipe(a);
  const end = () => {
    a.destroy();
    b.destroy();
  };
  a.on('error', end).on('close', end);
  b.on('error', end).on('close', end);
}

if (process.argv[1] !== undefined && import.meta.filename === process.argv[1]) {
  const [listen, target] = process.argv.slice(2);
  if (listen === undefined || target === undefined)
    throw new Error('usage: netns-forward.ts LISTEN TARGET');
  const to = endpoint(target);
  const dial = () => ('path' in to ? connect(to.path) : connect(to.port, to.host));
  const server = createServer((socket) => pipeBoth(socket, dial()));
  server.listen(endpoint(listen), () => process.stdout.write('ready\n'));
}
