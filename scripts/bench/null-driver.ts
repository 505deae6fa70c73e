/**
 * A CSI driver that does nothing and answers at once (its own process, so its gRPC work
 * does not share the engine's thread): the CSI bench measures what the gRPC boundary
 * adds, not what a storage system costs. It also echoes lines on `SOCKET_PATH.echo`, a
 * plain unix socket: the bench's floor of a round trip to another process without gRPC.
 * Usage: node null-driver.js SOCKET_PATH
 */
import { rmSync } from 'node:fs';
import { createServer } from 'node:net';
import pino from 'pino';
import type { Handler } from '../../src/csi/driver/common.js';
import { serveCsiDriver } from '../../src/csi/driver/server.js';

const socket = process.argv[2];
if (socket === undefined) {
  process.stderr.write('usage: null-driver.js SOCKET_PATH\n');
  process.exit(2);
}
const ok: Handler = async () => ({});
const handlers: Record<string, Handler> = {
  GetPluginInfo: async () => ({ name: 'fake.disk', vendor_version: '0' }),
  ControllerPublishVolume: async () => ({ publish_context: { devicePath: '/dev/null-driver' } }),
  NodeStageVolume: ok,
  NodeUnstageVolume: ok,
  NodePublishVolume: ok,
  NodeUnpublishVolume: ok,
  ControllerUnpublishVolume: ok,
};
const served = await serveCsiDriver({
  name: 'fake.disk',
  endpoint: `unix://${socket}`,
  handlers,
  logger: pino({ level: 'silent' }),
});
const echoPath = `${socket}.echo`;
rmSync(echoPath, { force: true });
const echo = createServer((connection) => connection.pipe(connection));
await new Promise<void>((resolve) => echo.listen(echoPath, resolve));
process.stdout.write('ready\n');
process.once('SIGTERM', () => {
  served.close();
  echo.close();
  rmSync(echoPath, { force: true });
  process.exit(0);
});
