/**
 * behaviour C5: the handshake end to end, one controller and two
 * node agents in one process. A node mounts only after the controller reports the volume
 * attached and the node reported it in use; the controller never detaches a volume a
 * node still reports in use (no force here).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Cluster } from '../../src/sim/in-process-cluster.js';
import { VirtualClock } from '../../src/clock.js';
import { FakePlugin, type FakeCallRecord } from '../../src/plugins/fake.js';
import { PluginManager } from '../../src/plugins/manager.js';
import { caps } from '../../src/plugins/types.js';
import { UniqueVolumeName } from '../../src/ids.js';
import { allAttachments } from '../../src/controller/types.js';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

function cluster() {
  const clock = new VirtualClock(0);
  const journal: FakeCallRecord[] = [];
  const plugins = () =>
    new PluginManager([
      new FakePlugin({ caps: caps('fake.disk', { attachable: true }), clock, journal }),
    ]);
  const c = new Cluster({
    nodes: ['node-1', 'node-2'],
    clock,
    controllerPlugins: plugins(),
    nodePlugins: plugins,
  });
  return { c, journal, clock };
}

async function settle(c: Cluster) {
  let quiet = 0;
  for (let i = 0; i < 10_000 && quiet < 3; i++) {
    const before = [
      c.controller.world.seq,
      ...[...c.agents.values()].map((a) => a.world.seq),
    ].join();
    await turn();
    const after = [
      c.controller.world.seq,
      ...[...c.agents.values()].map((a) => a.world.seq),
    ].join();
    quiet = before === after ? quiet + 1 : 0;
  }
}

const pv = {
  apiVersion: 'v1',
  kind: 'PersistentVolume' as const,
  metadata: { name: 'pv-1' },
  spec: { accessModes: ['ReadWriteOnce'], csi: { driver: 'fake.disk', volumeHandle: 'disk-1' } },
};
const pvc = {
  apiVersion: 'v1',
  kind: 'PersistentVolumeClaim' as const,
  metadata: { name: 'claim-1', namespace: 'default' },
  spec: { volumeName: 'pv-1' },
};
const pod = (name: string, node: string) => ({
  metadata: { name, namespace: 'default', uid: `uid-${name}` },
  spec: {
    nodeName: node,
    volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'claim-1' } }],
  },
});

/** Each of `expected` occurs in `calls`, in this order (a missing one fails, not passes). */
function assertInOrder(calls: readonly string[], expected: readonly string[]): void {
  const at = expected.map((call) => calls.indexOf(call));
  assert.ok(!at.includes(-1), `${expected.join(' < ')} all happen: ${calls.join(' ')}`);
  assert.deepEqual(
    at,
    [...at].sort((a, b) => a - b),
    `${expected.join(' < ')}: ${calls.join(' ')}`,
  );
}

test('cluster: attach by the controller, mount by the node, then unmount, then detach — never crossed', async () => {
  const { c, journal } = cluster();
  const vol = UniqueVolumeName('fake.disk/disk-1');
  const violations: string[] = [];
  c.controller.subscribe((event) => {
    if (event.type !== 'OperationStarted' || event.op !== 'detach') return;
    const agent = c.agents.get(event.node ?? '')!;
    if (
      agent.world.attachments.get(vol)?.value.startsWith('attached.device') &&
      agent.world.attachments.get(vol)?.value !== 'attached.deviceUnmounted'
    ) {
      violations.push(
        `detach of ${vol} from ${event.node} while the node has its device ${agent.world.attachments.get(vol)?.value}`,
      );
    }
    if (agent.status.getVolumesInUse().includes(vol))
      violations.push(`detach of ${vol} while ${event.node} reports it in use`);
  });
  c.start();
  c.upsertObject(pv);
  c.upsertObject(pvc);
  c.addPod(pod('a', 'node-1'));
  await settle(c);
  const agent = c.agents.get('node-1')!;
  assert.deepEqual([...agent.status.getMountedVolumesForPod('uid-a').keys()], ['data']);
  const order = journal.map((j) => `${j.call}@${j.node}`);
  assert.deepEqual(order, [
    'attach@node-1',
    'waitForAttach@node-1',
    'mountDevice@node-1',
    'setUp@node-1',
  ]);

  c.removePod(pod('a', 'node-1'));
  await settle(c);
  assert.deepEqual(journal.map((j) => `${j.call}@${j.node}`).slice(4), [
    'tearDown@node-1',
    'unmountDevice@node-1',
    'detach@node-1',
  ]);
  assert.equal([...allAttachments(c.controller.world)].length, 0);
  assert.deepEqual(violations, []);
  c.stop();
});

test('cluster: a pod moved to another node waits for the detach, then mounts there', async () => {
  const { c, journal } = cluster();
  c.start();
  c.upsertObject(pv);
  c.upsertObject(pvc);
  c.addPod(pod('a', 'node-1'));
  await settle(c);
  c.removePod(pod('a', 'node-1'));
  c.addPod(pod('b', 'node-2'));
  await settle(c);
  assert.deepEqual(
    [...c.agents.get('node-2')!.status.getMountedVolumesForPod('uid-b').keys()],
    ['data'],
  );
  const calls = journal.map((j) => `${j.call}@${j.node}`);
  assertInOrder(calls, ['unmountDevice@node-1', 'detach@node-1', 'attach@node-2']);
  c.stop();
});
