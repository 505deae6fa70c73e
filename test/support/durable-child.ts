/**
 * A node engine on a SQLite log (durability full) with the fake plugins, SIGKILLed at a
 * chosen point: test/engine/durable-points.scenario.test.ts runs it as a child process.
 *
 *   node --import tsx durable-child.ts DB JOURNAL KILL_AT [node|controller]
 *
 * The last argument says who attaches (node by default): with `controller`, the disks are
 * listed in node.status.volumesAttached and reported in use, and the engine verifies them
 * (a call that touches nothing) instead of attaching.
 * Three pods arrive, each with a disk (attach, waitForAttach, mountDevice, setUp) and an
 * emptyDir (setUp). Every plugin call is written to JOURNAL (the pretend host) before it
 * takes effect. KILL_AT is `CALL` (the first call of that name, on the first pod's disk),
 * or `ready` (the first pod's volumes all mounted, as the fold says, before its last
 * events are committed), or `operator` (through the volume manager: the first pod mounted,
 * then an operator's retry request, killed as soon as its verdict is returned).
 */
import { appendFileSync } from 'node:fs';
import pino from 'pino';
import { openSqliteLog } from '../../src/agent/sqlite-log.js';
import { VolumeManager } from '../../src/agent/volume-manager.js';
import { RealClock } from '../../src/clock.js';
import { kubeletCore } from '../../src/engine/cores.js';
import { Engine } from '../../src/engine/engine.js';
import { Executor } from '../../src/execute/executor.js';
import type { Operation } from '../../src/kubelet/planner.js';
import type { EventSink } from '../../src/engine/sink.js';
import type { World } from '../../src/kubelet/types.js';
import { UniquePodName } from '../../src/ids.js';
import { type FakeCallRecord, FakePlugin } from '../../src/plugins/fake.js';
import { PluginManager } from '../../src/plugins/manager.js';
import { caps } from '../../src/plugins/types.js';
import { podWaitStatus } from '../../src/kubelet/queries.js';
import { claim, diskObjects, disk, emptyDir, pod, podUpserted } from './builders.js';

export const crashPods = ['p-0', 'p-1', 'p-2'];
export const emptyDirCaps = caps('kubernetes.io/empty-dir');

/** The journal the fakes write to: each call also goes to `path`, and may end the process. */
export class FileJournal extends Array<FakeCallRecord> {
  constructor(
    private readonly path: string,
    private readonly killAt: (record: FakeCallRecord) => boolean,
  ) {
    super();
  }

  override push(...records: FakeCallRecord[]): number {
    for (const record of records) {
      appendFileSync(this.path, `${JSON.stringify(record)}\n`);
      if (this.killAt(record)) process.kill(process.pid, 'SIGKILL');
    }
    return super.push(...records);
  }
}

/** The fake disk and emptyDir plugins, journaling to `journal`. */
export function crashPlugins(clock: RealClock, journal: FakeCallRecord[]): PluginManager {
  const plugins = new PluginManager();
  plugins.register(new FakePlugin({ caps: disk, clock, journal }));
  plugins.register(new FakePlugin({ caps: emptyDirCaps, clock, journal }));
  return plugins;
}

/** The operator's verdict is answered only once the log holds it. */
async function operatorRequest(db: string, journalPath: string): Promise<void> {
  const clock = new RealClock();
  const journal = new FileJournal(journalPath, () => false);
  const vm = VolumeManager.open({
    db,
    durability: 'full',
    node: 'node-1',
    plugins: crashPlugins(clock, journal),
    clock,
    controllerAttachDetach: false,
  });
  vm.start();
  for (const event of diskObjects('disk-p-0'))
    if (event.type === 'ObjectUpserted') vm.inputs.upsertObject(event.object);
  vm.inputs.markSourcesReady();
  vm.inputs.addPod(pod('p-0', [claim('disk-p-0'), emptyDir()]));
  await vm.waitForAttachAndMount('p-0');
  await vm.operator.request({
    action: 'retry',
    volume: 'fake.disk/disk-p-0',
    reason: 'test',
    force: false,
  });
  process.kill(process.pid, 'SIGKILL');
}

/** A node-1 engine on `sink` with the journaling plugins, the node or the controller attaching. */
export function crashEngine(opts: {
  readonly sink: EventSink;
  readonly journal: FakeCallRecord[];
  readonly clock: RealClock;
  readonly attachMode: string;
  readonly world?: World;
}): Engine<World, Operation> {
  return new Engine({
    core: kubeletCore,
    runner: (host) => new Executor(host),
    config: { node: 'node-1', controllerAttachDetach: opts.attachMode === 'controller' },
    plugins: crashPlugins(opts.clock, opts.journal),
    clock: opts.clock,
    sink: opts.sink,
    logger: pino({ level: 'silent' }),
    ...(opts.world === undefined ? {} : { world: opts.world }),
  });
}

/** The controller's side: every desired disk attached to node-1 and reported in use. */
export function controllerAttached(engine: Engine<World, Operation>, clock: RealClock): void {
  const volumes = [...engine.world.dsw.keys()];
  const volumesAttached = volumes
    .filter((name) => name.startsWith(`${disk.name}/`))
    .map((name) => ({ name, devicePath: `/dev/${name.replaceAll('/', '-')}` }));
  engine.append({
    type: 'NodeStatusObserved',
    tsMs: clock.nowMs(),
    node: 'node-1',
    volumesAttached,
  });
  engine.append({ type: 'VolumesReportedInUse', tsMs: clock.nowMs(), volumes });
}

async function main(): Promise<void> {
  const [db, journalPath, killAt, attachMode = 'node'] = process.argv.slice(2);
  if (db === undefined || journalPath === undefined || killAt === undefined)
    throw new Error('usage: durable-child.ts DB JOURNAL KILL_AT');
  if (killAt === 'operator') return operatorRequest(db, journalPath);
  const clock = new RealClock();
  // KILL_AT `setUp-emptyDir`: the first pod's emptyDir set-up, which its disk's attach
  // intends (no commit of its own when the node attaches).
  const [call, volumeOf = 'disk-p-0'] =
    killAt === 'setUp-emptyDir' ? ['setUp', 'empty-dir/p-0'] : [killAt];
  const journal = new FileJournal(
    journalPath,
    (r) => r.call === call && r.volume.includes(volumeOf),
  );
  const sink = openSqliteLog(db, kubeletCore, { durability: 'full' }).sink;
  const engine = crashEngine({ sink, journal, clock, attachMode });
  if (killAt === 'ready') {
    engine.subscribe((_event, world) => {
      if (podWaitStatus(world, UniquePodName('p-0')).ready) process.kill(process.pid, 'SIGKILL');
    });
  }
  engine.start();
  engine.append({ type: 'SourcesReady', tsMs: clock.nowMs() });
  for (const uid of crashPods) {
    for (const event of diskObjects(`disk-${uid}`)) engine.append(event);
    engine.append(podUpserted(uid, [claim(`disk-${uid}`), emptyDir()]));
  }
  if (attachMode === 'controller') controllerAttached(engine, clock);
  await new Promise((resolve) => setTimeout(resolve, 10_000));
  throw new Error(`durable-child: not killed at ${killAt}`);
}

if (process.argv[1]?.endsWith('durable-child.ts')) await main();
