/**
 * The test's window into its network namespaces. Run inside the observer's namespace
 * (`nsenter --net=… node --import tsx netns-relay.ts DIR NAME=HOST:PORT…`), it listens on
 * a unix socket DIR/NAME.sock for each target and pipes each connection to HOST:PORT;
 * unix sockets cross network namespaces, so the test (in the machine's namespace) reaches
 * them through `loopbackRelay`, which listens on 127.0.0.1. Prints "ready" once listening.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';

function pipeBoth(a: Socket, b: Socket): void {
  a.pipe(b);
  b.pipe(a);
  const end = () => {
    a.destroy();
    b.destroy();
  };
  a.on('error', end).on('close', end);
  b.on('error', end).on('close', end);
}

/** 127.0.0.1:PORT in this process, piped to the unix socket `path`; answers the port. */
export async function loopbackRelay(path: string): Promise<{ port: number; server: Server }> {
  const server = createServer((socket) => pipeBoth(socket, connect(path)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return { port, server };
}

async function main(dir: string, targets: string[]): Promise<void> {
  for (const target of targets) {
    const [name, hostPort] = target.split('=');
    const [host, port] = (hostPort ?? '').split(':');
    if (name === undefined || host === undefined || port === undefined)
      throw new Error(`a target is NAME=HOST:PORT, not "${target}"`);
    const server = createServer((socket) =>
      pipeBoth(socket, connect({ host, port: Number(port) })),
    );
    await new Promise<void>((resolve) => server.listen(join(dir, `${name}.sock`), resolve));
  }
  process.stdout.write('ready\n');
}

if (process.argv[1] !== undefined && import.meta.filename === process.argv[1]) {
  const [dir, ...targets] = process.argv.slice(2);
  if (dir === undefined) throw new Error('usage: netns-relay.ts DIR NAME=HOST:PORT…');
  void main(dir, targets);
}
