import { kubeletCore } from '../../src/engine/cores.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { readFileSync } from 'node:fs';
import { openSqliteLog } from '../../src/agent/sqlite-log.js';
import { VolumeManager } from '../../src/agent/volume-manager.js';
import { snapshotEveryEvents } from '../../src/constants.js';
import { eventCodec } from '../../src/events/index.js';
import { openLog } from '../../src/log/store.js';
import { caps, type VolumePlugin } from '../../src/plugins/types.js';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';
import {
  decodeWorldSnapshot,
  encodeWorldSnapshot,
  worldSnapshotFormat,
} from '../../src/log/world-snapshot.js';
import { foldAll } from '../../src/kubelet/index.js';
import { assertSameWorld } from '../support/world-equal.js';
import { flatSpecCount, flattenSpecs } from '../support/flat-specs.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-snap-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const scenario = parseScenario(
  readFileSync(join(import.meta.dirname, '../scenarios/kubelet-attach-mount.yaml'), 'utf8'),
);

test('snapshot: a world encodes and decodes to an equal world at every seq', async () => {
  const log = openSqliteLog(join(dir, 'a.db'), kubeletCore);
  await simulate(scenario, { log });
  const events = [...log.readAll()];
  for (let seq = 0; seq <= events.length; seq += 7) {
    const world = foldAll(events.slice(0, seq));
    const decoded = decodeWorldSnapshot(encodeWorldSnapshot(world), worldSnapshotFormat);
    assert.ok(decoded);
    assertSameWorld(decoded, world, `seq ${seq}`);
    assertSameWorld(
      foldAll(events.slice(seq), decoded),
      foldAll(events),
      `snapshot at ${seq} + tail`,
    );
  }
  log.sink.close();
});

test('snapshot: a world of the former shape (specs without shared traits) is not read', async () => {
  const log = openSqliteLog(join(dir, 'former.db'), kubeletCore);
  await simulate(scenario, { log });
  const events = [...log.readAll()];
  let flattened = 0;
  for (let seq = 0; seq <= events.length; seq += 3) {
    const world = foldAll(events.slice(0, seq));
    const flat = foldAll(events.slice(0, seq));
    const made = flattenSpecs(flat);
    flattened += made;
    if (made > 0)
      assert.equal(decodeWorldSnapshot(encodeWorldSnapshot(flat), worldSnapshotFormat), undefined);
    // The same world with its specs as the fold holds them is read, its traits shared.
    const decoded = decodeWorldSnapshot(encodeWorldSnapshot(world), worldSnapshotFormat);
    assert.ok(decoded);
    assert.equal(flatSpecCount(decoded), 0);
    for (const [uid, record] of world.pods)
      record.volumes.forEach((spec, i) =>
        assert.equal(decoded.pods.get(uid)?.volumes[i]?.traits, spec.traits, 'shared traits'),
      );
  }
  assert.ok(flattened > events.length / 3, `${flattened} specs made flat`);
  log.sink.close();
});

test('snapshot: one of the previous format (7) is ignored and the log replayed; of this format, read', async () => {
  const path = join(dir, 'previous.db');
  const log = openSqliteLog(path, kubeletCore);
  await simulate(scenario, { log });
  const events = [...log.readAll()];
  const world = foldAll(events);
  const data = encodeWorldSnapshot(world);
  log.store.saveSnapshot({ seq: world.seq, tsMs: 0, format: 7, data });
  log.sink.close();
  const replayed = openSqliteLog(path, kubeletCore);
  assert.equal(replayed.lastSnapshotSeq, world.seq, 'the snapshot is in the log');
  assertSameWorld(replayed.loadWorld(), world, 'replayed from the start');
  assert.equal(replayed.restoredFromSeq, 0, 'the format-7 snapshot was not read');
  replayed.store.saveSnapshot({ seq: world.seq, tsMs: 0, format: worldSnapshotFormat, data });
  replayed.sink.close();
  const restored = openSqliteLog(path, kubeletCore);
  assertSameWorld(restored.loadWorld(), world, 'snapshot + tail');
  assert.equal(restored.restoredFromSeq, world.seq, 'the same bytes, of this format, were read');
  restored.sink.close();
});

test('snapshot: loading uses the latest snapshot plus the tail, and ignores an unknown format', async () => {
  const path = join(dir, 'b.db');
  const log = openSqliteLog(path, kubeletCore);
  await simulate(scenario, { log });
  const events = [...log.readAll()];
  log.saveSnapshot(foldAll(events.slice(0, 20)));
  log.sink.close();
  const reopened = openSqliteLog(path, kubeletCore);
  assert.equal(reopened.lastSnapshotSeq, 20);
  assertSameWorld(reopened.loadWorld(), foldAll(events), 'snapshot + tail = full fold');
  reopened.store.saveSnapshot({ seq: 30, tsMs: 0, format: 999, data: 'garbage' });
  reopened.sink.close();
  const third = openSqliteLog(path, kubeletCore);
  assertSameWorld(third.loadWorld(), foldAll(events), 'an unusable snapshot is skipped');
  assert.equal(decodeWorldSnapshot(Buffer.from('{not v8'), worldSnapshotFormat), undefined);
  third.sink.close();
});

test('snapshot: the node agent writes one once snapshotEveryEvents events have passed', async () => {
  const path = join(dir, 'agent.db');
  const plugin: VolumePlugin = {
    name: 'scratch.example.com',
    caps: caps('scratch.example.com'),
    pod: {
      podVolumePath: (spec, podUid) => `/nonexistent/${podUid}/${spec.innerVolumeSpecName}`,
      setUp: async () => {},
      tearDown: async () => {},
    },
  };
  const vm = VolumeManager.open({
    db: path,
    durability: 'normal',
    node: 'node-1',
    controllerAttachDetach: false,
    plugins: [plugin],
  });
  let lastSeq = 0;
  vm.subscribe((event) => void (lastSeq = event.seq));
  vm.start();
  vm.inputs.markSourcesReady();
  // Pods in batches of 200 until the log is 1.3 intervals long: past it once, not twice.
  for (let i = 0; lastSeq < snapshotEveryEvents * 1.3;) {
    const batch = Array.from({ length: 200 }, () => `uid-${i++}`);
    for (const uid of batch) {
      vm.inputs.addPod({
        metadata: { name: uid, namespace: 'default', uid },
        spec: { volumes: [{ name: 'cache', csi: { driver: 'scratch.example.com' } }] },
      });
    }
    for (const uid of batch) await vm.waitForAttachAndMount(uid);
  }
  await vm.drainAndStop();
  const store = openLog(path, { codec: eventCodec, mode: 'readonly' });
  try {
    const head = store.head().seq;
    assert.ok(head < snapshotEveryEvents * 2, `the log passed the interval once (${head} events)`);
    assert.equal(store.latestSnapshot({ atOrBeforeSeq: snapshotEveryEvents - 1 }), undefined);
    const first = store.latestSnapshot({ atOrBeforeSeq: head });
    assert.ok(first !== undefined, 'a snapshot was written');
    // Written between ticks, after a flush: at the first tick at or past the interval.
    assert.ok(
      first.seq >= snapshotEveryEvents && first.seq < snapshotEveryEvents * 1.1,
      `the snapshot is at seq ${first.seq}`,
    );
  } finally {
    store.close();
  }
});

test('snapshot: a kubelet snapshot of another format, or of a former shape under this one, is not read', async () => {
  const log = openSqliteLog(join(dir, 'old-format.db'), kubeletCore);
  await simulate(scenario, { log });
  const world = foldAll([...log.readAll()]);
  log.sink.close();
  assert.equal(worldSnapshotFormat, 8);
  const decoded = decodeWorldSnapshot(encodeWorldSnapshot(world), 8);
  assert.ok(decoded);
  // The objects come back as the world's store, every one under its key.
  assert.equal(decoded.objects.size, world.objects.size);
  assert.ok(world.objects.size > 0);
  for (const [key, object] of world.objects) assert.deepEqual(decoded.objects.get(key), object);
  // The views over the volume records are made again and read the same.
  assert.equal(decoded.volumes.size, world.volumes.size);
  for (const view of ['dsw', 'attachments', 'mounts', 'causes'] as const) {
    assert.equal(decoded[view].size, world[view].size, view);
    assert.deepEqual([...decoded[view].entries()], [...world[view].entries()], view);
  }
  for (const format of [7, 6, 5, 4, 2])
    assert.equal(decodeWorldSnapshot(encodeWorldSnapshot(world), format), undefined);
  // Worlds of former shapes under this format's number do not decode either: objects in a
  // plain Map, pods indexed under built keys, four maps by volume, no operator requests.
  const format4 = { ...world, objects: new Map(world.objects) } as unknown as typeof world;
  const keyed = new Map([['PersistentVolumeClaim/default/claim-x', 'p']]);
  const format5 = { ...world, podsByObject: keyed } as unknown as typeof world;
  const { volumes: _volumes, ...format6 } = world;
  const { operator: _operator, ...noOperator } = world;
  for (const former of [format4, format5, format6, noOperator])
    assert.equal(decodeWorldSnapshot(encodeWorldSnapshot(former as typeof world), 8), undefined);
});
