/**
 * Node.status.volumesInUse (src/kube/in-use.ts): the agent asks after every event, and the
 * publisher looks once the turn's events are in and at most once every inUseLookEveryMs, so
 * a burst of events costs one walk of the volumes and one patch of the list it ends with.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { VolumeManager } from '../../src/agent/volume-manager.js';
import { VirtualClock } from '../../src/clock.js';
import { InUsePublisher, inUseLookEveryMs } from '../../src/kube/in-use.js';

/** A volume manager with only what the publisher reads: the list, counted, and the marks. */
function fakeVm(list: { volumes: string[] }) {
  const seen = { looks: 0, marked: [] as string[][] };
  const vm = {
    world: { sourcesReady: true, dsw: new Map<string, { reportedInUse: boolean }>() },
    status: {
      getVolumesInUse: () => {
        seen.looks += 1;
        return [...list.volumes];
      },
    },
    inputs: { markVolumesAsReportedInUse: (v: string[]) => seen.marked.push(v) },
  };
  return { vm: vm as unknown as VolumeManager, seen };
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('volumesInUse publisher', () => {
  it('looks once for a burst of events and patches the list the burst ends with', async () => {
    const list = { volumes: ['a'] };
    const { vm, seen } = fakeVm(list);
    const patches: string[][] = [];
    const clock = new VirtualClock(0);
    const publisher = new InUsePublisher({
      vm,
      clock,
      status: { patchVolumesInUse: async (v) => void patches.push([...v]) },
      say: () => undefined,
    });
    for (let i = 0; i < 100; i += 1) {
      if (i === 50) list.volumes = ['a', 'b'];
      publisher.schedule();
    }
    await turn();
    assert.deepEqual(patches, [['a', 'b']]);
    assert.deepEqual(seen.marked, [['a', 'b']]);
    // One look for the burst, one after the patch (the list unchanged: no second patch).
    assert.equal(seen.looks, 2);
    // Within inUseLookEveryMs of the last look: the next waits for the clock.
    list.volumes = [];
    publisher.schedule();
    await turn();
    assert.deepEqual(patches, [['a', 'b']], 'no look before inUseLookEveryMs');
    assert.equal(seen.looks, 2);
    assert.equal(clock.nextTimerAtMs(), inUseLookEveryMs);
    assert.ok(clock.fireNext(inUseLookEveryMs));
    await turn();
    assert.deepEqual(patches, [['a', 'b'], []]);
    assert.equal(seen.looks, 4);
    clock.moveTo(10 * inUseLookEveryMs);
    publisher.schedule();
    await turn();
    assert.deepEqual(patches, [['a', 'b'], []], 'an unchanged list is not patched again');
    assert.equal(seen.looks, 5);
    publisher.stop();
  });
});
