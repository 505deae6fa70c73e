/**
 * Mount intents (src/kubelet/mount-intents.ts, docs/reliability.md "Durable points"): a
 * kubelet's attach names the pods waiting to mount its volume; their mounts then run
 * without a commit of their own, so a crash may lose them and even the attach's answer.
 * The restart takes every volume of such a pod that the log does not hold mounted as
 * maybe mounted (the device too), and the planner never detaches under it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { NewEvent, VoleEvent } from '../../src/events/index.js';
import { UniquePodName, UniqueVolumeName } from '../../src/ids.js';
import { plan } from '../../src/kubelet/planner.js';
import { podEntry } from '../../src/kubelet/by-pod.js';
import { fold, initialWorld } from '../../src/kubelet/index.js';
import type { World } from '../../src/kubelet/types.js';
import {
  claim,
  diskObjects,
  emptyDir,
  engineStarted,
  operation,
  podUpserted,
  sourcesReady,
} from '../support/builders.js';
import { PlanSpecification } from '../support/plan-spec.js';

const spec = PlanSpecification.for({ fold, plan, initialWorld });
const vol = 'fake.disk/disk-1';
// The kubelet's executor on a log with commits: its mounts may run on an intent.
const started = { ...engineStarted(), durableCalls: 'first', mountIntents: true } as NewEvent;
const podA = podUpserted('uid-a', [claim('disk-1'), emptyDir()]);
const base = [started, sourcesReady, ...diskObjects('disk-1'), podA];

/** The attach of disk-1, its OperationStarted naming uid-a, cut off before its answer. */
function attachCutOff(at: number): NewEvent[] {
  const [opStarted, callStarted] = operation(at, { op: 'attach', volume: vol }, [
    { call: 'attach' },
  ]);
  return [{ ...opStarted, mountsIntended: ['uid-a'] } as NewEvent, callStarted!];
}

/** The history up to a restart after the crash: EngineStarted, then the sources again. */
const crashed = [...base, ...attachCutOff(base.length + 1), started, sourcesReady];

function worldOf(events: readonly NewEvent[]): World {
  return events.map((e, i) => ({ ...e, seq: i + 1 }) as VoleEvent).reduce(fold, initialWorld());
}

function mountOf(world: World, volume: string, pod: string): string | undefined {
  return podEntry(world.mounts.get(UniqueVolumeName(volume)), UniquePodName(pod))?.value;
}

test('mount intents: the attach names the pods that wait to mount its volume', () => {
  const world = worldOf([...base, ...attachCutOff(base.length + 1)]);
  assert.equal(world.mountIntents.get(UniquePodName('uid-a')), base.length + 1);
  const { operations } = plan(worldOf(base), 0);
  const attach = operations.find((op) => op.op === 'attach');
  assert.deepEqual(attach !== undefined && 'mountsIntended' in attach && attach.mountsIntended, [
    'uid-a',
  ]);
});

test('mount intents: after a crash, each volume of the pod may be mounted, its device too', () => {
  const world = worldOf(crashed);
  assert.equal(world.attachments.get(UniqueVolumeName(vol))?.value, 'attachDeviceUncertain');
  assert.equal(mountOf(world, vol, 'uid-a'), 'mountUncertain');
  const scratch = [...world.dsw.keys()].find((name) => name !== vol)!;
  assert.equal(mountOf(world, scratch, 'uid-a'), 'mountUncertain', 'the emptyDir too');
  assert.equal(world.mountIntents.size, 0, 'the restart ends the intents');
});

test('mount intents: a pod still wanted is attached again, its device then uncertain', () => {
  spec
    .given(crashed)
    .when({ type: 'SourcesReady', tsMs: 1 }, { nowMs: 60_000 })
    .then([
      { op: 'attach', volume: vol },
      { op: 'verifyControllerAttached', volume: [...worldOf(crashed).dsw.keys()][1]! },
    ]);
  const reattached = [
    ...crashed,
    ...operation(
      crashed.length + 1,
      { op: 'attach', volume: vol },
      [{ call: 'attach', devicePath: '/dev/x' }],
      { tsMs: 60_000 },
    ),
  ];
  const world = worldOf(reattached);
  assert.equal(world.attachments.get(UniqueVolumeName(vol))?.value, 'attached.deviceUncertain');
  const mount = plan(world, 60_000).operations.find((op) => op.op === 'mount');
  assert.deepEqual(mount !== undefined && 'steps' in mount && mount.steps, [
    'waitForAttach',
    'mountDevice',
    'setUp',
  ]);
});

test('mount intents: a pod gone is torn down, then its device unmounted, never detached under it', () => {
  const gone = [...crashed, { type: 'PodRemoved', tsMs: 1, uid: 'uid-a' } as NewEvent];
  const scratch = [...worldOf(crashed).dsw.keys()].find((name) => name !== vol)!;
  spec
    .given(gone.slice(0, -1))
    .when(gone.at(-1)!, { nowMs: 60_000 })
    .then([
      { op: 'unmount', volume: vol, pod: 'uid-a' },
      { op: 'unmount', volume: scratch, pod: 'uid-a' },
    ]);
  const tornDown = [
    ...gone,
    ...operation(gone.length + 1, { op: 'unmount', volume: scratch, pod: 'uid-a' }, [
      { call: 'tearDown' },
    ]),
  ];
  tornDown.push(
    ...operation(tornDown.length + 1, { op: 'unmount', volume: vol, pod: 'uid-a' }, [
      { call: 'tearDown' },
    ]),
  );
  spec
    .given(tornDown.slice(0, -1))
    .when(tornDown.at(-1)!, { nowMs: 60_000 })
    .then([{ op: 'unmountDevice', volume: vol }]);
  const unmounted = [
    ...tornDown,
    ...operation(tornDown.length + 1, { op: 'unmountDevice', volume: vol }, [
      { call: 'unmountDevice' },
    ]),
  ];
  spec
    .given(unmounted.slice(0, -1))
    .when(unmounted.at(-1)!, { nowMs: 60_000 })
    .then([{ op: 'detach', volume: vol }]);
});

test('mount intents: a covered mount the log holds started, no call yet, may have run every step', () => {
  const attached = [
    ...base,
    ...attachCutOff(base.length + 1),
    {
      type: 'CallSucceeded',
      tsMs: 0,
      opId: `op-${base.length + 1}`,
      call: 'attach',
      devicePath: '/dev/x',
    } as NewEvent,
    {
      type: 'OperationFinished',
      tsMs: 0,
      opId: `op-${base.length + 1}`,
      outcome: 'ok',
    } as NewEvent,
  ];
  const mountStarted = {
    ...operation(attached.length + 1, { op: 'mount', volume: vol, pod: 'uid-a' }, [])[0]!,
    steps: ['waitForAttach', 'mountDevice', 'setUp'],
  } as NewEvent;
  const world = worldOf([...attached, mountStarted, started]);
  assert.equal(world.attachments.get(UniqueVolumeName(vol))?.value, 'attached.deviceUncertain');
  assert.equal(mountOf(world, vol, 'uid-a'), 'mountUncertain');
});

test('mount intents: a pod removed drops its intent; a pod not named has none', () => {
  const intended = [...base, ...attachCutOff(base.length + 1)];
  const removed = worldOf([...intended, { type: 'PodRemoved', tsMs: 1, uid: 'uid-a' } as NewEvent]);
  assert.equal(removed.mountIntents.size, 0);
  const other = worldOf([...intended, podUpserted('uid-b', [emptyDir()]), started]);
  const scratchB = [...other.dsw.keys()].find((name) => name.includes('uid-b'));
  assert.equal(scratchB === undefined ? undefined : mountOf(other, scratchB, 'uid-b'), undefined);
});

test('mount intents: a first mount is covered, a later mount of the same pair is not', () => {
  const attached = [
    ...base,
    ...operation(base.length + 1, { op: 'attach', volume: vol }, [
      { call: 'attach', devicePath: '/dev/x' },
    ]),
  ];
  attached[base.length] = { ...attached[base.length]!, mountsIntended: ['uid-a'] } as NewEvent;
  const first = operation(attached.length + 1, { op: 'mount', volume: vol, pod: 'uid-a' }, [
    { call: 'waitForAttach' },
    { call: 'mountDevice', deviceMountPath: '/g/disk-1' },
    { call: 'setUp' },
  ]);
  const firstWorld = worldOf([...attached, first[0]!]);
  assert.equal([...firstWorld.running.values()][0]?.coveredBy, base.length + 1);
  const again = operation(
    attached.length + first.length + 1,
    {
      op: 'mount',
      volume: vol,
      pod: 'uid-a',
    },
    [{ call: 'setUp' }],
  );
  const againWorld = worldOf([...attached, ...first, again[0]!]);
  assert.equal(mountOf(againWorld, vol, 'uid-a'), 'mounted');
  assert.equal([...againWorld.running.values()][0]?.coveredBy, undefined, 'a remount waits');
});
