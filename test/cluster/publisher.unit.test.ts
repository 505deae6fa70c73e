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
