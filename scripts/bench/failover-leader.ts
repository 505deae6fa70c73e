/**
 * The leading replica of the failover benchmark (failover.ts), a process of its own so it
 * can be SIGKILLed: a ClusterController with the default lease on a fake attachable
 * plugin loads the cluster, snapshots its whole world (in slices, as it does when its
 * pacer says), keeps leading for one more TTL, then prints one JSON line and waits to be
 * killed. Arguments: URLS PREFIX PODS.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import pino from 'pino';
import { connect } from '../../src/cluster/client.js';
import { ClusterController, leaseTtlSDefault } from '../../src/cluster/controller.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import { RealClock } from '../../src/clock.js';
import { FakePlugin } from '../../src/plugins/fake.js';
import { caps } from '../../src/plugins/types.js';
import { attachedAll, noJournal, waitFor } from './cluster.js';
import { diskPlugin } from './generate.js';
import { gc, heapUsedAfterGc, nowMs, progress } from './util.js';

const [urls, prefix, podsText] = process.argv.slice(2);
if (urls === undefined || prefix === undefined || podsText === undefined) {
  process.stderr.write('usage: failover-leader URLS PREFIX PODS\n');
  process.exit(2);
}
const pods = Number(podsText);
const client = connect(urls);
const keys = new ClusterKeys(prefix);
gc();
const heapBefore = heapUsedAfterGc();
const controller = new ClusterController({
  client: new EtcdStore(client),
  keys,
  identity: 'a',
  plugins: [
    new FakePlugin({
      caps: caps(diskPlugin, { attachable: true }),
      clock: new RealClock(),
      journal: noJournal(),
    }),
  ],
  logger: pino({ level: 'silent' }),
  say: (line) => progress(`  controller a: ${line}`),
});
let lost: string | undefined;
void controller.run(new AbortController().signal).then((r) => {
  if (r.lost) lost = 'lost';
});
const loadDelay = monitorEventLoopDelay({ resolution: 10 });
loadDelay.enable();
const started = nowMs();
const attached = attachedAll(controller, pods);
// A lease lost during the load (a machine too busy to answer keepalives) ends the run, saying so.
await waitFor(
  async () => (lost !== undefined ? true : attached()),
  `${pods} attachments`,
  3_600_000,
);
loadDelay.disable();
if (lost !== undefined) {
  process.stdout.write(
    `${JSON.stringify({ lostDuringLoadAfterMs: nowMs() - started, loadLoopDelayMaxMs: loadDelay.max / 1e6 })}\n`,
  );
  process.exit(3);
}
const loadMs = nowMs() - started;
const events = controller.world!.seq;
gc();
const heapBytes = heapUsedAfterGc() - heapBefore;
progress(`  a loaded ${pods} pods in ${Math.round(loadMs)} ms (${events} events), snapshots`);
const delay = monitorEventLoopDelay({ resolution: 10 });
delay.enable();
const snapshot = await controller.snapshotNow();
delay.disable();
if (snapshot === undefined || snapshot.seq < events) throw new Error('failover bench: no snapshot');
await new Promise((r) => setTimeout(r, leaseTtlSDefault * 1000));
const leaseKept = lost === undefined && (await client.get(keys.leader).string()) === 'a';
process.stdout.write(
  `${JSON.stringify({
    loadMs,
    loadLoopDelayMaxMs: loadDelay.max / 1e6,
    events,
    heapBytes,
    snapshotBytes: snapshot.bytes,
    slicedMs: snapshot.encode.totalMs,
    slices: snapshot.encode.slices,
    maxSliceMs: snapshot.encode.maxSliceMs,
    loopDelayMaxMs: delay.max / 1e6,
    writeMs: snapshot.writeMs,
    leaseKept,
    seq: controller.world!.seq,
  })}\n`,
);
await new Promise(() => undefined); // killed by the bench
