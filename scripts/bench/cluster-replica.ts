/**
 * One controller replica for the failover benchmark (cluster.ts): a ClusterController on a
 * fake attachable plugin (instant attach and detach), so the figure is the election and
 * the takeover, not a disk. Arguments: URLS PREFIX IDENTITY LEASE_TTL_S.
 */
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
});
const stop = new AbortController();
process.once('SIGTERM', () => stop.abort());
const result = await controller.run(stop.signal);
client.close();
process.exit(result.lost ? 3 : 0);
