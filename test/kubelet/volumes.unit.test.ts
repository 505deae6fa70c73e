/**
 * The world's leaner shapes (docs/performance-notes.md): one record per volume read through the
 * dsw / attachments / mounts / causes views, pod records that keep no reference list when
 * their volumes say it, and settled mount contexts shared by volume name.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { NewEvent, VoleEvent } from '../../src/events/index.js';
import { UniquePodName, UniqueVolumeName } from '../../src/ids.js';
import { foldAll } from '../../src/kubelet/index.js';
import type { World } from '../../src/kubelet/types.js';
import {
  claim,
  configMap,
  diskObjects,
  emptyDir,
  engineStarted,
  operation,
  podUpserted,
  sourcesReady,
} from '../support/builders.js';

function seqd(events: NewEvent[]): VoleEvent[] {
  return events.map((e, i) => ({ ...e, seq: i + 1 }) as VoleEvent);
}

const removed = (uid: string): NewEvent => ({ type: 'PodRemoved', tsMs: 0, uid });

/** Attaches disk `handle` and mounts it into pod `uid` (after `history`). */
function mounted(history: NewEvent[], handle: string, uid: string): void {
  const volume = `fake.disk/${handle}`;
  history.push(
    ...operation(history.length + 1, { op: 'attach', volume }, [
      { call: 'attach', devicePath: `/dev/${handle}` },
    ]),
  );
  history.push(
    ...operation(history.length + 1, { op: 'mount', volume, pod: uid }, [
      { call: 'waitForAttach', devicePath: `/dev/${handle}` },
      { call: 'mountDevice', deviceMountPath: `/g/${handle}` },
      { call: 'setUp' },
    ]),
  );
}

/** What each view holds, counted from the records themselves. */
function counted(world: World) {
  const records = [...world.volumes.values()];
  return {
    dsw: records.filter((r) => r.pods !== undefined).length,
    attachments: records.filter((r) => r.attachment !== undefined).length,
    mounts: records.filter((r) => r.mounts !== undefined).length,
    causes: records.filter((r) => r.cause !== 0).length,
  };
}

function sizes(world: World) {
  return {
    dsw: world.dsw.size,
    attachments: world.attachments.size,
    mounts: world.mounts.size,
    causes: world.causes.size,
  };
}

test('volumes: one record a volume, read as four maps, dropped when the volume is gone', () => {
  const d1 = UniqueVolumeName('fake.disk/d1');
  const history: NewEvent[] = [
    engineStarted(),
    sourcesReady,
    ...diskObjects('d1'),
    podUpserted('uid-a', [claim('d1'), emptyDir()]),
  ];
  mounted(history, 'd1', 'uid-a');
  const world = foldAll(seqd(history));
  // The disk and the emptyDir: one record each, holding all the world keeps of them.
  assert.equal(world.volumes.size, 2);
  const record = world.volumes.get(d1)!;
  assert.equal(world.dsw.get(d1), record, 'the desired-state entry is the record');
  assert.equal(world.attachments.get(d1), record.attachment);
  assert.equal(world.mounts.get(d1), record.mounts);
  assert.equal(world.causes.get(d1), record.cause);
  assert.equal(world.attachments.get(d1)!.value, 'attached.deviceMounted');
  assert.deepEqual(sizes(world), counted(world));
  assert.deepEqual([...world.attachments.keys()], [d1]);

  // The pod goes: still attached and mounted (nothing unmounted yet), no longer desired.
  history.push(removed('uid-a'));
  const undesired = foldAll(seqd(history));
  assert.equal(undesired.dsw.get(d1), undefined);
  assert.equal(undesired.dsw.has(d1), false);
  assert.ok(undesired.attachments.has(d1));
  assert.equal(undesired.volumes.get(d1)!.reportedInUse, false);
  assert.deepEqual(sizes(undesired), counted(undesired));

  // Unmounted, device unmounted, detached: the record goes, its cause with it.
  const volume = 'fake.disk/d1';
  history.push(
    ...operation(history.length + 1, { op: 'unmount', volume, pod: 'uid-a' }, [
      { call: 'tearDown' },
    ]),
  );
  history.push(
    ...operation(history.length + 1, { op: 'unmountDevice', volume }, [{ call: 'unmountDevice' }]),
  );
  history.push(...operation(history.length + 1, { op: 'detach', volume }, [{ call: 'detach' }]));
  const gone = foldAll(seqd(history));
  assert.equal(gone.volumes.has(d1), false);
  assert.equal(gone.causes.get(d1), undefined);
  assert.deepEqual(sizes(gone), counted(gone));
});

test('volumes: a pod record keeps no reference list when its volumes say what it read', () => {
  const history: NewEvent[] = [
    engineStarted(),
    sourcesReady,
    ...diskObjects('d1'),
    podUpserted('uid-a', [claim('d1')]),
    // Its claim does not exist: the references name it, the volumes cannot.
    podUpserted('uid-b', [claim('missing')]),
  ];
  const world = foldAll(seqd(history));
  const a = world.pods.get(UniquePodName('uid-a'))!;
  const b = world.pods.get(UniquePodName('uid-b'))!;
  assert.equal(a.references, null);
  assert.deepEqual(b.references, ['PersistentVolumeClaim', 'claim-missing']);
  // Both are indexed all the same, and a change of either object reaches its pod.
  const claims = world.podsByObject.get('PersistentVolumeClaim')!.get('default')!;
  assert.equal(claims.get('claim-d1'), 'uid-a');
  assert.equal(claims.get('claim-missing'), 'uid-b');
  assert.equal(world.podsByObject.get('PersistentVolume')!.get('')!.get('pv-d1'), 'uid-a');
  const late = foldAll(seqd([...history, ...diskObjects('missing')]));
  const resolved = late.pods.get(UniquePodName('uid-b'))!;
  assert.equal(resolved.errors.size, 0, 'the claim came: the pod resolved again');
  assert.equal(resolved.references, null);
  // The pods go: their entries go from the index (no empty maps left either).
  const after = foldAll(seqd([...history, removed('uid-a'), removed('uid-b')]));
  assert.equal(after.podsByObject.size, 0);
});

test('volumes: a pod reading a claim twice and ConfigMaps keeps no list either, and leaves no index', () => {
  const configObject = (name: string): NewEvent =>
    ({
      type: 'ObjectUpserted',
      tsMs: 0,
      object: {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, namespace: 'default' },
        contentHash: `sha256:${name}`,
      },
    }) as NewEvent;
  const history: NewEvent[] = [
    engineStarted(),
    sourcesReady,
    ...diskObjects('d1'),
    configObject('settings'),
    podUpserted('uid-a', [
      claim('d1', 'data'),
      claim('d1', 'again'),
      configMap('settings'),
      configMap('settings'),
    ]),
  ];
  const world = foldAll(seqd(history));
  const a = world.pods.get(UniquePodName('uid-a'))!;
  assert.equal(a.errors.size, 1, 'the second volume named settings is refused');
  assert.equal(a.references, null);
  assert.equal(world.podsByObject.get('ConfigMap')!.get('default')!.get('settings'), 'uid-a');
  assert.equal(
    world.podsByObject.get('PersistentVolumeClaim')!.get('default')!.get('claim-d1'),
    'uid-a',
  );
  // Resolved again at an engine start: the same objects, the index as it was.
  history.push(engineStarted());
  const restarted = foldAll(seqd(history));
  assert.equal(restarted.pods.get(UniquePodName('uid-a'))!.references, null);
  assert.equal(restarted.podsByObject.get('PersistentVolume')!.get('')!.get('pv-d1'), 'uid-a');
  history.push(removed('uid-a'));
  assert.equal(foldAll(seqd(history)).podsByObject.size, 0);
});

test('volumes: settled mounts of one volume name share one context', () => {
  const history: NewEvent[] = [
    engineStarted(),
    sourcesReady,
    ...diskObjects('d1'),
    ...diskObjects('d2'),
    ...diskObjects('d3'),
    podUpserted('uid-a', [claim('d1')]),
    podUpserted('uid-b', [claim('d2')]),
    podUpserted('uid-c', [claim('d3', 'other')]),
  ];
  mounted(history, 'd1', 'uid-a');
  mounted(history, 'd2', 'uid-b');
  mounted(history, 'd3', 'uid-c');
  const world = foldAll(seqd(history));
  const context = (handle: string) =>
    (world.mounts.get(UniqueVolumeName(`fake.disk/${handle}`)) as { context: object }).context;
  assert.equal(context('d1'), context('d2'), 'the same object');
  assert.deepEqual(context('d1'), {
    outerVolumeSpecName: 'data',
    volumeGidValue: '',
    remountRequired: false,
    mountFrom: null,
  });
  assert.notEqual(context('d3'), context('d1'));
  assert.deepEqual([...world.mountContexts.keys()].sort(), ['data', 'other']);
});
