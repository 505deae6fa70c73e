/**
 * A volume's one pod is kept bare, a Map only from two pods on (src/kubelet/by-pod.ts): the
 * helpers' transitions, and the fold's desired state and mount records through a second
 * pod coming and going.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { NewEvent, VoleEvent } from '../../src/events/index.js';
import { UniquePodName, UniqueVolumeName } from '../../src/ids.js';
import {
  deletePodEntry,
  foldAll,
  podCount,
  podEntries,
  podEntriesByName,
  podEntry,
  setPodEntry,
} from '../../src/kubelet/index.js';
import {
  claim,
  diskObjects,
  engineStarted,
  operation,
  podUpserted,
  sourcesReady,
} from '../support/builders.js';

const a = { pod: UniquePodName('uid-a'), n: 1 };
const b = { pod: UniquePodName('uid-b'), n: 2 };

test('by-pod: one entry bare, a Map from two, and bare again when one is left', () => {
  let byPod = setPodEntry(undefined, a);
  assert.equal(byPod, a);
  assert.deepEqual(setPodEntry(byPod, { ...a, n: 3 }), { ...a, n: 3 }, 'replaced, still bare');
  byPod = setPodEntry(byPod, b);
  assert.ok(byPod instanceof Map);
  assert.equal(podCount(byPod), 2);
  assert.deepEqual(
    podEntriesByName(byPod).map((e) => e.pod),
    ['uid-a', 'uid-b'],
  );
  assert.equal(podEntry(byPod, b.pod), b);
  const left = deletePodEntry(byPod, b.pod);
  assert.equal(left, a, 'a Map shrunk to one entry becomes the bare entry');
  assert.equal(deletePodEntry(left, b.pod), a, 'deleting another pod leaves it');
  assert.equal(deletePodEntry(left, a.pod), undefined);
  assert.equal(podCount(undefined), 0);
  assert.deepEqual([...podEntries(undefined)], []);
  assert.equal(podEntry(a, b.pod), undefined);
});

function seqd(events: NewEvent[]): VoleEvent[] {
  return events.map((e, i) => ({ ...e, seq: i + 1 }) as VoleEvent);
}

test('by-pod: the fold keeps a second pod of a volume in a Map, and goes back to bare', () => {
  const vol = UniqueVolumeName('fake.disk/shared');
  const history: NewEvent[] = [
    engineStarted(),
    sourcesReady,
    ...diskObjects('shared', { accessModes: ['ReadWriteMany'] }),
    podUpserted('uid-a', [claim('shared')]),
  ];
  history.push(
    ...operation(history.length + 1, { op: 'attach', volume: vol }, [
      { call: 'attach', devicePath: '/dev/x' },
    ]),
  );
  history.push(
    ...operation(history.length + 1, { op: 'mount', volume: vol, pod: 'uid-a' }, [
      { call: 'waitForAttach', devicePath: '/dev/x' },
      { call: 'mountDevice', deviceMountPath: '/g/shared' },
      { call: 'setUp' },
    ]),
  );
  const one = foldAll(seqd(history));
  assert.equal((one.dsw.get(vol)!.pods as { pod: string }).pod, 'uid-a', 'one pod: bare');
  assert.equal((one.mounts.get(vol) as { pod: string }).pod, 'uid-a');

  history.push(podUpserted('uid-b', [claim('shared')]));
  history.push(
    ...operation(history.length + 1, { op: 'mount', volume: vol, pod: 'uid-b' }, [
      { call: 'waitForAttach', devicePath: '/dev/x' },
      { call: 'setUp' },
    ]),
  );
  const two = foldAll(seqd(history));
  assert.ok(two.dsw.get(vol)!.pods instanceof Map);
  assert.ok(two.mounts.get(vol) instanceof Map);
  assert.equal(podCount(two.mounts.get(vol)), 2);

  history.push({ type: 'PodRemoved', tsMs: 0, uid: 'uid-b' });
  history.push(
    ...operation(history.length + 1, { op: 'unmount', volume: vol, pod: 'uid-b' }, [
      { call: 'tearDown' },
    ]),
  );
  const back = foldAll(seqd(history));
  assert.equal((back.dsw.get(vol)!.pods as { pod: string }).pod, 'uid-a', 'bare again');
  const mount = back.mounts.get(vol) as { pod: string; value: string };
  assert.equal(mount.pod, 'uid-a');
  assert.equal(mount.value, 'mounted');
});
