/**
 * Pods with one volume of the same name share one `[name]` list (World.oneNameLists), held
 * while some pod record holds it: a re-resolved pod keeps one hold, a removed pod gives its
 * hold back, and the last one drops the list.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { NewEvent, VoleEvent } from '../../src/events/index.js';
import { UniquePodName } from '../../src/ids.js';
import { foldAll } from '../../src/kubelet/index.js';
import {
  claim,
  diskObjects,
  emptyDir,
  engineStarted,
  podUpserted,
  sourcesReady,
} from '../support/builders.js';

function seqd(events: NewEvent[]): VoleEvent[] {
  return events.map((e, i) => ({ ...e, seq: i + 1 }) as VoleEvent);
}

const removed = (uid: string): NewEvent => ({ type: 'PodRemoved', tsMs: 0, uid });

test('shared lists: one `[name]` array for the one-volume pods of a name, dropped with the last', () => {
  const history: NewEvent[] = [
    engineStarted(),
    sourcesReady,
    ...diskObjects('d1'),
    ...diskObjects('d2'),
    podUpserted('uid-a', [claim('d1')]),
    podUpserted('uid-b', [claim('d2')]),
    podUpserted('uid-c', [claim('d1', 'data'), emptyDir()]),
    // Reported again: re-resolved, still one hold.
    podUpserted('uid-a', [claim('d1')]),
  ];
  const world = foldAll(seqd(history));
  const a = world.pods.get(UniquePodName('uid-a'))!;
  const b = world.pods.get(UniquePodName('uid-b'))!;
  const c = world.pods.get(UniquePodName('uid-c'))!;
  assert.equal(a.expectedVolumes, b.expectedVolumes, 'the same array');
  assert.deepEqual(a.expectedVolumes, ['data']);
  assert.deepEqual(c.expectedVolumes, ['data', 'scratch'], 'longer lists are the pod own');
  assert.deepEqual([...world.oneNameLists.keys()], ['data']);
  assert.equal(world.oneNameLists.get('data')!.users, 2);
  const dswEntry = [...world.dsw.values()]
    .map((v) => v.pods)
    .find((p) => 'pod' in p && p.pod === 'uid-b') as { outerVolumeSpecNames: unknown };
  assert.equal(dswEntry.outerVolumeSpecNames, b.expectedVolumes);

  const afterOne = foldAll(seqd([...history, removed('uid-a')]));
  assert.equal(afterOne.oneNameLists.get('data')!.users, 1);
  const gone = [removed('uid-a'), removed('uid-b'), removed('uid-c')];
  const afterAll = foldAll(seqd([...history, ...gone]));
  assert.equal(afterAll.oneNameLists.size, 0, 'no pod holds it: gone');
  assert.equal(afterAll.pods.size, 0);
});
