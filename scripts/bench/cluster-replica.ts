/**
 * One controller replica for the failover benchmark (cluster.ts): a ClusterController on a
 * fake attachable plugin (instant attach and detach), so the figure is the election and
 * the takeover, not a disk. Arguments: URLS PREFIX IDENTITY LEASE_TTL_S. Says its progress
 * lines on stdout (`standby: warm at seq N …` once its standby world is warm).
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import pino from 'pino';
import { connect } from '../../src/cluster/client.js';
import { ClusterController } from '../../src/cluster/controller.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import { RealClock } from '../../src/clock.js';
import { FakePlugin } from '../../src/plugins/fake.js';
import { caps } from '../../src/plugins/types.js';
import { diskPlugin } from './generate.js';

const [urls, prefix, identity, ttl] = process.argv.slice(2);
if (urls === undefined || prefix === undefined || identity === undefined || ttl === undefined) {
  process.stderr.write('usage: cluster-replica URLS PREFIX IDENTITY LEASE_TTL_S\n');
  process.exit(2);
}
// BENCH_FAILOVER_PROFILE=DIR: a CPU profile from the start, written there on SIGUSR2.
const profileDir = process.env.BENCH_FAILOVER_PROFILE;
if (profileDir !== undefined) {
  const profiler = new Session();
  profiler.connect();
  await profiler.post('Profiler.enable');
  await profiler.post('Profiler.start');
  process.once('SIGUSR2', () => {
    void profiler.post('Profiler.stop').then(({ profile }) => {
      writeFileSync(join(profileDir, `replica-${identity}.cpuprofile`), JSON.stringify(profile));
      process.stderr.write(`replica ${identity}: profile written\n`);
    });
  });
}
const client = connect(urls);
const controller = new ClusterController({
  client: new EtcdStore(client),
  keys: new ClusterKeys(prefix),
  identity,
  plugins: [
    new FakePlugin({
      caps: caps(diskPlugin, { attachable: true }),
      clock: new RealClock(),
      journal: [],
    }),
  ],
  logger: pino({ level: 'silent' }),
  leaseTtlS: Number(ttl),
  say: (line) => process.stdout.write(`${line}\n`),
});
const stop = new AbortController();
process.once('SIGTERM', () => stop.abort());
const result = await controller.run(stop.signal);
client.close();
process.exit(result.lost ? 3 : 0);
