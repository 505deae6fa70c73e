/**
 * The Kubernetes-mode writer of Node status.volumesAttached (src/kube/volumes-attached.ts).
 * A detach refused as in use ends without a call and puts its volume back in the node's
 * report; the Node must list it again as that end is folded, as the node's kubelet mounts
 * only what status.volumesAttached lists (Kubernetes: GenerateDetachVolumeFunc's
 * AddVolumeToReportAsAttached, then the node status updater).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RealClock } from '../../src/clock.js';
import type { KubeHttp } from '../../src/kube/http.js';
import type { ApiObject } from '../../src/kube/informer.js';
import { VolumesAttachedWriter } from '../../src/kube/volumes-attached.js';
import { detachRefusedAsInUse, settle } from '../support/detach-refused.js';

/** The API server's Node node-1 as the writer's merge patches leave it. */
class NodeStatusApi {
  readonly patches: string[] = [];
  node: ApiObject = { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-1' }, status: {} };

  async patch(path: string, body: { status: { volumesAttached: { name: string }[] } }) {
    assert.equal(path, '/api/v1/nodes/node-1/status');
    this.patches.push(JSON.stringify(body.status.volumesAttached.map((v) => v.name)));
    this.node = { ...this.node, status: { ...body.status } };
    return this.node;
  }
}

test('a detach refused as in use: the Node lists its volume again as the detach ends', async () => {
  const api = new NodeStatusApi();
  const said: string[] = [];
  let writer: VolumesAttachedWriter | undefined;
  const { cm, journal } = await detachRefusedAsInUse({
    // The node's report naming the volume again is read fresh by the detach only: no Node
    // update follows the refusal, so only the detach's end can mark the node to write.
    worldHearsInUse: false,
    nodeInUseCheck: async () => true,
    started: async (cm) => {
      writer = new VolumesAttachedWriter({
        http: api as unknown as KubeHttp,
        cm,
        fence: () => Promise.resolve(),
        clock: new RealClock(),
        say: (line) => said.push(line),
        observedNode: (name) => (name === 'node-1' ? api.node : undefined),
      });
      writer.start();
    },
  });
  await settle();
  assert.deepEqual(
    journal.map((c) => c.call),
    ['attach'],
    'no detach call',
  );
  // Attached, out of the report while its detach was decided, back in as the detach ended.
  assert.deepEqual(api.patches, ['["fake.disk/disk-1"]', '[]', '["fake.disk/disk-1"]']);
  assert.deepEqual(said, []);
  await writer!.stop();
  cm.stop();
});

test('a verified detach: the Node without the volume is written before volumesInUse is read', async () => {
  const api = new NodeStatusApi();
  const order: string[] = [];
  const patch = api.patch.bind(api);
  api.patch = async (path, body) => {
    order.push(`write ${JSON.stringify(body.status.volumesAttached.map((v) => v.name))}`);
    return patch(path, body);
  };
  let writer: VolumesAttachedWriter | undefined;
  let checkedFrom = -1;
  const { cm, journal } = await detachRefusedAsInUse({
    worldHearsInUse: false,
    // The Node's copy the writer compares with already lacks the volume: the write is made
    // all the same, since that copy may be behind the API server.
    nodeInUseCheck: async (node) => {
      api.node = { ...api.node, status: { volumesAttached: [] } };
      checkedFrom = order.length;
      await writer!.publishNode(node);
      order.push('read volumesInUse');
      return true;
    },
    started: async (cm) => {
      writer = new VolumesAttachedWriter({
        http: api as unknown as KubeHttp,
        cm,
        fence: () => Promise.resolve(),
        clock: new RealClock(),
        say: () => undefined,
        observedNode: (name) => (name === 'node-1' ? api.node : undefined),
      });
      writer.start();
    },
  });
  await settle();
  assert.deepEqual(
    journal.map((c) => c.call),
    ['attach'],
    'refused: no detach call',
  );
  assert.ok(checkedFrom > 0, 'the detach read volumesInUse fresh');
  assert.deepEqual(order.slice(checkedFrom, checkedFrom + 2), ['write []', 'read volumesInUse']);
  await writer!.stop();
  cm.stop();
});

test('a verified detach: a Node write refused by the fence fails the read', async () => {
  const api = new NodeStatusApi();
  let failed: unknown;
  let writer: VolumesAttachedWriter | undefined;
  const { cm, journal } = await detachRefusedAsInUse({
    worldHearsInUse: false,
    nodeInUseCheck: async (node) => {
      await writer!.publishNode(node).catch((error: unknown) => (failed = error));
      if (failed !== undefined) throw failed;
      return false;
    },
    started: async (cm) => {
      let leading = true;
      writer = new VolumesAttachedWriter({
        http: api as unknown as KubeHttp,
        cm,
        fence: () => (leading ? Promise.resolve() : Promise.reject(new Error('Lease lost'))),
        clock: new RealClock(),
        say: () => undefined,
        observedNode: (name) => (name === 'node-1' ? api.node : undefined),
      });
      writer.start();
      cm.subscribe((event) => {
        if (event.type === 'OperationStarted' && event.op === 'detach') leading = false;
      });
    },
  });
  await settle();
  assert.match(String(failed), /Lease lost/);
  assert.deepEqual(
    journal.map((c) => c.call),
    ['attach'],
    'no detach call without the write',
  );
  await writer!.stop();
  cm.stop();
});
