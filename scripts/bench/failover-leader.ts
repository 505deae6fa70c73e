/**
 * The leading replica of the failover benchmark (failover.ts), a process of its own so it
 * can be SIGKILLed: a ClusterController with the default lease on a fake attachable
 * plugin loads the cluster, snapshots its whole world (in slices, as it does when its
 * pacer says), keeps leading for one more TTL, then prints one JSON line and waits to be
 * killed. Arguments: URLS PREFIX PODS [LOAD_TTL_S]: with LOAD_TTL_S, a first replica on
 * that lease does the first load (attaching every disk), then stops, and a takes over on the
 * default lease (loading the snapshot and the log, listing the cluster) before it snapshots.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
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
import { nowMs, progress } from './util.js';

const [urls, prefix, podsText, loadTtlText] = process.argv.slice(2);
if (urls === undefined || prefix === undefined || podsText === undefined) {
  process.stderr.write('usage: failover-leader URLS PREFIX PODS\n');
  process.exit(2);
}
const pods = Number(podsText);
const loadTtlS = Number(loadTtlText ?? leaseTtlSDefault);
const client = connect(urls);
const keys = new ClusterKeys(prefix);
function replica(identity: string, leaseTtlS: number) {
  const controller = new ClusterController({
    client: new EtcdStore(client),
    keys,
    identity,
    plugins: [
      new FakePlugin({
        caps: caps(diskPlugin, { attachable: true }),
        clock: new RealClock(),
        journal: noJournal(),
      }),
    ],
    logger: pino({ level: 'silent' }),
    leaseTtlS,
    say: (line) => progress(`  controller ${identity}: ${line}`),
  });
  const stop = new AbortController();
  const state: { lost?: string } = {};
  const running = controller.run(stop.signal).then((r) => {
    if (r.lost) state.lost = 'lost';
  });
  return { controller, state, stop: () => (stop.abort(), running) };
}

/** Until `pods` are attached, or the lease is lost (a busy machine); says which. */
async function untilAttached(r: ReturnType<typeof replica>): Promise<boolean> {
  const attached = attachedAll(r.controller, pods);
  await waitFor(
    async () => (r.state.lost !== undefined ? true : attached()),
    `${pods} attachments`,
    3_600_000,
  );
  return r.state.lost === undefined;
}

/** A snapshot of the world as it is now, once a snapshot the pacer began has been written. */
async function snapshotAtHead(c: ClusterController): ReturnType<ClusterController['snapshotNow']> {
  for (;;) {
    try {
      return await c.snapshotNow();
    } catch (error) {
      if (!/already being taken/.test((error as Error).message)) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

// Says when the event loop was held up for over a second, and at which seqs (on stderr).
let current: ClusterController | undefined;
let lastTickMs = nowMs();
let lastSeq = 0;
const stalls = setInterval(() => {
  const seq = current?.world?.seq ?? 0;
  const gapMs = nowMs() - lastTickMs;
  if (gapMs > 1_000) progress(`  event loop held ${Math.round(gapMs)} ms, seq ${lastSeq} → ${seq}`);
  lastTickMs = nowMs();
  lastSeq = seq;
}, 100);
const loadDelay = monitorEventLoopDelay({ resolution: 10 });
loadDelay.enable();
const started = nowMs();
let loaderMs: number | undefined;
if (loadTtlS !== leaseTtlSDefault) {
  // The first load on a longer lease (a busy machine stalls it); then a takes over on the default one.
  const loader = replica('loader', loadTtlS);
  current = loader.controller;
  if (!(await untilAttached(loader))) throw new Error('failover bench: the loader lost its lease');
  loaderMs = nowMs() - started;
  // As a leader that has led a while: a snapshot at the head for a to start from (stopping
  // mid-snapshot left a to fold up to a million events after an older one).
  await snapshotAtHead(loader.controller);
  await loader.stop();
  progress(`  loader: ${pods} pods attached in ${Math.round(loaderMs)} ms; a takes over`);
}
// BENCH_FAILOVER_PROFILE=DIR writes a CPU profile of a's takeover and snapshot there.
const profileDir = process.env.BENCH_FAILOVER_PROFILE;
const profiler = profileDir === undefined ? undefined : new Session();
if (profiler !== undefined) {
  profiler.connect();
  await profiler.post('Profiler.enable');
  await profiler.post('Profiler.start');
}
const a = replica('a', leaseTtlSDefault);
const controller = a.controller;
current = controller;
const aStarted = nowMs();
const kept = await untilAttached(a);
loadDelay.disable();
if (!kept) {
  process.stdout.write(
    `${JSON.stringify({ lostDuringLoadAfterMs: nowMs() - aStarted, loadLoopDelayMaxMs: loadDelay.max / 1e6 })}\n`,
  );
  clearInterval(stalls);
  process.exit(3);
}
const loadMs = nowMs() - aStarted;
const events = controller.world!.seq;
progress(`  a loaded ${pods} pods in ${Math.round(loadMs)} ms (${events} events), snapshots`);
const delay = monitorEventLoopDelay({ resolution: 10 });
delay.enable();
const snapshot = await snapshotAtHead(controller);
delay.disable();
if (snapshot === undefined || snapshot.seq < events) throw new Error('failover bench: no snapshot');
await new Promise((r) => setTimeout(r, leaseTtlSDefault * 1000));
const leaseKept = a.state.lost === undefined && (await client.get(keys.leader).string()) === 'a';
if (profiler !== undefined && profileDir !== undefined) {
  // Written once the figures are taken: writing it holds the event loop for seconds.
  const { profile } = await profiler.post('Profiler.stop');
  writeFileSync(join(profileDir, `takeover-${pods}.cpuprofile`), JSON.stringify(profile));
  profiler.disconnect();
}
// Writing the profile held the loop: lead one more TTL of keepalives, so the takeover
// measured next begins from a lease a holds as a leader does (and says if not).
await new Promise((r) => setTimeout(r, leaseTtlSDefault * 1000));
const leadingAtCut = a.state.lost === undefined && (await client.get(keys.leader).string()) === 'a';
process.stdout.write(
  `${JSON.stringify({
    loadMs,
    ...(loaderMs === undefined ? {} : { loaderMs }),
    loadLoopDelayMaxMs: loadDelay.max / 1e6,
    events,
    snapshotBytes: snapshot.bytes,
    slicedMs: snapshot.encode.totalMs,
    slices: snapshot.encode.slices,
    maxSliceMs: snapshot.encode.maxSliceMs,
    loopDelayMaxMs: delay.max / 1e6,
    writeMs: snapshot.writeMs,
    leaseKept,
    leadingAtCut,
    seq: controller.world!.seq,
  })}\n`,
);
clearInterval(stalls);
await new Promise(() => undefined); // killed by the bench
