/**
 * docs/reliability.md "Durable points", each checked by a crash: a child process runs the
 * engine on a SQLite log (durability full) with fake plugins that journal every call to a
 * file before it takes effect (the pretend host), and is SIGKILLed inside a call or right
 * after a pod is ready. Then, in this process:
 *
 * - every call on the host belongs to an operation whose OperationStarted the log holds
 *   (the host is never touched before it is durable);
 * - the replay plus the restart's EngineStarted may-have every effect the host saw: an
 *   attach leaves the volume attached or uncertain, a mountDevice the device mounted or
 *   uncertain, a setUp the pod's mount mounted or uncertain (a later step's CallStarted
 *   the crash lost included);
 * - restarted on the same log, the engine mounts every pod, redoing each uncertain call at
 *   most once and nothing the log holds as done, and no pod is lost.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { openSqliteLog } from '../../src/agent/sqlite-log.js';
import { RealClock } from '../../src/clock.js';
import { kubeletCore } from '../../src/engine/cores.js';
import { Engine } from '../../src/engine/engine.js';
import type { VoleEvent } from '../../src/events/index.js';
import { UniquePodName, UniqueVolumeName } from '../../src/ids.js';
import type { FakeCallRecord } from '../../src/plugins/fake.js';
import { podEntry } from '../../src/kubelet/by-pod.js';
import { podWaitStatus } from '../../src/kubelet/queries.js';
import type { World } from '../../src/kubelet/types.js';
import type { Operation } from '../../src/kubelet/planner.js';
import { controllerAttached, crashEngine, crashPods } from '../support/durable-child.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-durable-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const child = join(import.meta.dirname, '../support/durable-child.ts');

type AttachMode = 'node' | 'controller';

function crash(killAt: string, attachMode: AttachMode = 'node') {
  const db = join(dir, `${killAt}-${attachMode}.db`);
  const journal = join(dir, `${killAt}-${attachMode}.journal`);
  const args = ['--import', 'tsx', child, db, journal, killAt, attachMode];
  const run = spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 60_000 });
  assert.equal(run.signal, 'SIGKILL', `the child was killed at ${killAt}: ${run.stderr}`);
  const host = readFileSync(journal, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as FakeCallRecord);
  return { db, host };
}

/** What the world says may exist on the host for a call that may have taken effect. */
function mayHave(world: World, call: FakeCallRecord): boolean {
  const volume = UniqueVolumeName(call.volume);
  const attachment = world.attachments.get(volume)?.value;
  switch (call.call) {
    case 'attach':
      return (
        attachment === 'attachUncertain' ||
        attachment === 'attachDeviceUncertain' ||
        (attachment?.startsWith('attached') ?? false)
      );
    case 'mountDevice':
      return (
        attachment === 'attached.deviceMounted' ||
        attachment === 'attached.deviceUncertain' ||
        attachment === 'attachDeviceUncertain'
      );
    case 'setUp': {
      const mount = podEntry(world.mounts.get(volume), UniquePodName(call.pod ?? ''))?.value;
      return mount === 'mounted' || mount === 'mountUncertain';
    }
    default:
      return true; // waitForAttach reads only
  }
}

function restartEngine(db: string, journal: FakeCallRecord[], attachMode: AttachMode) {
  const clock = new RealClock();
  const log = openSqliteLog(db, kubeletCore, { durability: 'full' });
  const logged: VoleEvent[] = [...log.readAll()];
  const engine = crashEngine({
    sink: log.sink,
    journal,
    clock,
    attachMode,
    world: log.loadWorld(),
  });
  return { engine, logged, clock };
}

async function allReady(engine: Engine<World, Operation>): Promise<void> {
  const ready = () =>
    crashPods.every((uid) => podWaitStatus(engine.world, UniquePodName(uid)).ready);
  for (let waitedMs = 0; !ready(); waitedMs += 10) {
    assert.ok(waitedMs < 10_000, 'every pod mounted within 10 s of the restart');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

// With the controller attaching, the engine's verify touches nothing and waits for no
// commit: the mount's OperationStarted is the first durable point, as the kill shows.
const kills: [string, AttachMode][] = [
  ['attach', 'node'],
  ['mountDevice', 'node'],
  ['setUp', 'node'],
  ['setUp-emptyDir', 'node'],
  ['ready', 'node'],
  ['mountDevice', 'controller'],
  ['setUp', 'controller'],
  ['ready', 'controller'],
];

for (const [killAt, attachMode] of kills) {
  const name = `durable points: killed at ${killAt} (${attachMode} attaches), the log knows what the host may have`;
  test(name, async () => {
    const { db, host } = crash(killAt, attachMode);
    assert.ok(host.length > 0, 'the host was touched before the kill');
    const journal: FakeCallRecord[] = [];
    const { engine, logged, clock } = restartEngine(db, journal, attachMode);
    for (const call of host) {
      // A pod's call: its own operation's OperationStarted, or an attach's naming the pod
      // in its mount intent (mountsIntended), durable before the call.
      const started = logged.some(
        (e) =>
          e.type === 'OperationStarted' &&
          ((e.volume === call.volume && (call.pod === null || e.pod === call.pod)) ||
            (call.pod !== null && (e.mountsIntended ?? []).includes(call.pod))),
      );
      assert.ok(
        started,
        `${call.call} of ${call.volume} (pod ${call.pod}) ran without its OperationStarted or a mount intent logged`,
      );
    }
    const before = new Set(crashPods.filter((uid) => engine.world.pods.has(UniquePodName(uid))));
    assert.equal(
      before.size,
      crashPods.length,
      'no pod lost: they were durable with the first operation',
    );
    engine.start(); // EngineStarted cuts off what ran
    for (const call of host)
      assert.ok(
        mayHave(engine.world, call),
        `after the crash, ${call.call} of ${call.volume} (pod ${call.pod}) is not known to maybe exist`,
      );
    const mountedInLog = crashPods.flatMap((uid) =>
      [...engine.world.mounts.entries()]
        .filter(([, mounts]) => podEntry(mounts, UniquePodName(uid))?.value === 'mounted')
        .map(([volume]) => `${volume}|${uid}`),
    );
    engine.append({ type: 'SourcesReady', tsMs: clock.nowMs() });
    // The node's status is reported again after a restart, as the agent's status loop does.
    if (attachMode === 'controller') controllerAttached(engine, clock);
    await allReady(engine);
    await engine.drainAndStop();
    const counts = new Map<string, number>();
    for (const call of journal) {
      const key = `${call.call}|${call.volume}|${call.pod}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    for (const [key, count] of counts)
      assert.ok(count <= 1, `${key} ran ${count} times after the restart`);
    for (const pair of mountedInLog)
      assert.ok(
        !journal.some((c) => c.call === 'setUp' && `${c.volume}|${c.pod}` === pair),
        `${pair} was mounted in the log, yet set up again`,
      );
  });
}

test('durable points: an operator verdict is returned only once the log holds it', async () => {
  const { db } = crash('operator');
  const log = openSqliteLog(db, kubeletCore);
  const types = [...log.readAll()].map((e) => e.type);
  log.sink.close();
  assert.ok(types.includes('OperatorRequested'), 'the request is in the log');
  assert.ok(types.includes('OperatorRequestDecided'), 'the verdict returned is in the log');
});
