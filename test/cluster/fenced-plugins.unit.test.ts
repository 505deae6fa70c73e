/** The controller's plugins in cluster mode: no attach or detach before the log is durable. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FencedPluginManager } from '../../src/cluster/fenced-plugins.js';
import { RealClock } from '../../src/clock.js';
import { type FakeCallRecord, FakePlugin } from '../../src/plugins/fake.js';
import { caps } from '../../src/plugins/types.js';
import type { ResolvedVolume } from '../../src/operations/volume-spec.js';

test('a plugin registered after start (a CSI driver registering itself) waits for the durable log too', async () => {
  const journal: FakeCallRecord[] = [];
  let open: () => void = () => undefined;
  let gates = 0;
  const manager = new FencedPluginManager(() => {
    gates++;
    return new Promise<void>((resolve) => (open = resolve));
  });
  manager.upsert(
    new FakePlugin({
      caps: caps('late.csi', { attachable: true }),
      clock: new RealClock(),
      journal,
    }),
  );
  const spec = {
    volume: 'late.csi/v',
    traits: { pluginName: 'late.csi' },
    source: { kind: 'csi', volumeHandle: 'v' },
  } as unknown as ResolvedVolume;
  const target = { node: 'node-1', pod: null, signal: new AbortController().signal };
  const attaching = manager.find('late.csi')!.attacher!.attach(spec, target);
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(gates, 1);
  assert.equal(journal.length, 0, 'no call before the log is durable');
  open();
  await attaching;
  assert.deepEqual(
    journal.map((c) => c.call),
    ['attach'],
  );
});

test('a call whose log never becomes durable (the replica was deposed) never reaches the plugin', async () => {
  const journal: FakeCallRecord[] = [];
  const manager = new FencedPluginManager(
    () => Promise.reject(new Error('fenced')),
    [new FakePlugin({ caps: caps('disk', { attachable: true }), clock: new RealClock(), journal })],
  );
  const spec = {
    volume: 'disk/v',
    traits: { pluginName: 'disk' },
    source: { kind: 'csi', volumeHandle: 'v' },
  } as unknown as ResolvedVolume;
  const target = { node: 'node-1', pod: null, signal: new AbortController().signal };
  await assert.rejects(manager.find('disk')!.attacher!.detach(spec, target), /fenced/);
  assert.equal(journal.length, 0);
});
