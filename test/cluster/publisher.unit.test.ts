/**
 * The leader's volumesAttached publisher (src/cluster/publisher.ts) on the simulated store.
 * A detach refused as in use ends without a call and puts its volume back in the node's
 * report; the publisher writes it back as that end commits, not at its next full pass
 * (10 s on), as the node's agent mounts only what volumesAttached lists.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { VolumesAttachedPublisher } from '../../src/cluster/publisher.js';
import { decodeVolumesAttached } from '../../src/cluster/status.js';
import { detachRefusedAsInUse, settle } from '../support/detach-refused.js';
import { simStore } from '../support/sim-store.js';
import { VirtualClock } from '../../src/clock.js';

test('a detach refused as in use: its volume is published attached again as it ends', async () => {
  const { client, store } = simStore();
  const keys = new ClusterKeys();
  const said: string[] = [];
  const writes: string[] = [];
  store.onChange = (change) => {
    if (change.key === keys.volumesAttached('node-1') && change.kv !== undefined)
      writes.push(JSON.stringify(decodeVolumesAttached(change.kv)?.map((v) => v.name)));
  };
  let publisher: VolumesAttachedPublisher | undefined;
  const { cm, journal } = await detachRefusedAsInUse({
    started: async (cm, sink, clock) => {
      const leadership = { fence: () => [], isLost: false, lose: (why: string) => said.push(why) };
      const log = {
        durable: () => sink.whenDurable() ?? Promise.resolve(),
        get head() {
          return cm.world.seq;
        },
      };
      const say = (line: string) => said.push(line);
      publisher = new VolumesAttachedPublisher(client, keys, leadership, log, cm, say, clock);
      await publisher.start();
    },
  });
  await settle();
  assert.deepEqual(
    journal.map((c) => c.call),
    ['attach'],
    'no detach call',
  );
  // Attached, out of the report while its detach was decided, back in as the detach ended;
  // the clock stood still: no full pass ran.
  assert.deepEqual(writes, ['["fake.disk/disk-1"]', '[]', '["fake.disk/disk-1"]']);
  assert.deepEqual(said, []);
  await publisher!.stop();
  cm.stop();
});

test("a detach reads the node's volumesInUse only once the node's volumesAttached without the volume is stored", async () => {
  const { client, store } = simStore();
  const keys = new ClusterKeys();
  const said: string[] = [];
  const stored = () => {
    const kv = store.get(keys.volumesAttached('node-1'));
    return kv === undefined ? undefined : decodeVolumesAttached(kv)?.map((v) => v.name);
  };
  const seenAtRead: (string[] | undefined)[] = [];
  let publisher: VolumesAttachedPublisher | undefined;
  const { cm, journal } = await detachRefusedAsInUse({
    worldHearsInUse: false, // the node's write has not reached the controller's world
    nodeInUseCheck: async (node) => {
      await publisher!.publishNode(node);
      seenAtRead.push(stored());
      return true; // the node's put landed before this read
    },
    started: async (cm, sink, clock) => {
      const leadership = { fence: () => [], isLost: false, lose: (why: string) => said.push(why) };
      const log = {
        durable: () => sink.whenDurable() ?? Promise.resolve(),
        get head() {
          return cm.world.seq;
        },
      };
      const say = (line: string) => said.push(line);
      publisher = new VolumesAttachedPublisher(client, keys, leadership, log, cm, say, clock);
      await publisher.start();
    },
  });
  await settle();
  assert.deepEqual(seenAtRead, [[]], 'the disk was out of the stored report at the read');
  assert.deepEqual(
    journal.map((c) => c.call),
    ['attach'],
    'refused: no detach call',
  );
  assert.deepEqual(stored(), ['fake.disk/disk-1'], 'put back once refused');
  assert.deepEqual(said, []);
  await publisher!.stop();
  cm.stop();
});

test("a node status write refused by the fence fails the detach's wait and gives the term up", async () => {
  const { client } = simStore();
  const keys = new ClusterKeys();
  const lost: string[] = [];
  const { cm } = await detachRefusedAsInUse();
  // A fence on a key no one wrote at that revision: the write is refused.
  const leadership = {
    fence: () => [{ key: keys.leader, modRevision: 999 }],
    isLost: false,
    lose: (why: string) => lost.push(why),
  };
  const log = { durable: () => Promise.resolve(), head: cm.world.seq };
  const publisher = new VolumesAttachedPublisher(
    client,
    keys,
    leadership,
    log,
    cm,
    () => undefined,
    new VirtualClock(0),
  );
  await assert.rejects(publisher.publishNode('node-1'), /no longer leads/);
  assert.deepEqual(lost, ['a volumesAttached write was refused (fenced)']);
  await publisher.stop();
  cm.stop();
});
