/**
 * CSI plugin registration as the kubelet's node info manager writes it, against an
 * in-memory API: the Node first (nodeid annotation and a label per topology segment), then
 * the CSINode entry with the topology keys; a segment colliding with a label the Node has
 * installs nothing and says why; a driver's going leaves its topology labels.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { RealClock } from '../../src/clock.js';
import { type JsonObject, KubeApiError, type KubeHttp } from '../../src/kube/http.js';
import { controllerAttachedNow, NodeStatusWriter } from '../../src/kube/node-status.js';

class FakeApi {
  node: JsonObject = { metadata: { name: 'node-1', uid: 'uid-1', labels: {} } };
  csiNode: JsonObject = { metadata: { name: 'node-1' }, spec: { drivers: [] } };
  readonly writes: string[] = [];

  get = async (path: string): Promise<JsonObject> =>
    structuredClone(path.includes('csinodes') ? this.csiNode : this.node);

  put = async (path: string, body: unknown): Promise<JsonObject> => {
    this.writes.push(`PUT ${path}`);
    this.csiNode = structuredClone(body as JsonObject);
    return this.csiNode;
  };

  patch = async (path: string, body: unknown): Promise<JsonObject> => {
    this.writes.push(`PATCH ${path}`);
    const metadata = (body as { metadata: JsonObject }).metadata;
    const current = this.node.metadata as JsonObject;
    const labels = { ...(current.labels as object), ...((metadata.labels as object) ?? {}) };
    const annotations = { ...(current.annotations as object), ...(metadata.annotations as object) };
    this.node = { metadata: { ...current, labels, annotations } };
    return this.node;
  };
}

function writer(api: FakeApi, said: string[]) {
  return new NodeStatusWriter({
    http: api as unknown as KubeHttp,
    clock: new RealClock(),
    node: 'node-1',
    controllerAttachDetach: true,
    logger: pino({ level: 'silent' }),
    say: (line) => said.push(line),
  });
}

const driver = { name: 'disk.csi.vole.dev', nodeID: 'id-1', topologyKeys: ['zone'] };

test('node status: the Node is labelled before the CSINode lists the topology keys', async () => {
  const api = new FakeApi();
  const status = writer(api, []);
  status.driverRegistered(driver, { zone: 'id-1' });
  await status.settled();
  assert.deepEqual(api.writes, [
    'PATCH /api/v1/nodes/node-1',
    'PUT /apis/storage.k8s.io/v1/csinodes/node-1',
  ]);
  const metadata = api.node.metadata as {
    labels: Record<string, string>;
    annotations: Record<string, string>;
  };
  assert.equal(metadata.labels['zone'], 'id-1');
  assert.deepEqual(JSON.parse(metadata.annotations['csi.volume.kubernetes.io/nodeid']!), {
    'disk.csi.vole.dev': 'id-1',
  });
  const drivers = (api.csiNode.spec as { drivers: { topologyKeys: string[] }[] }).drivers;
  assert.deepEqual(drivers[0]?.topologyKeys, ['zone']);

  // The driver goes: its entry and annotation key go, the label stays (as the kubelet's).
  status.driverDeregistered(driver.name);
  await status.settled();
  assert.deepEqual((api.csiNode.spec as { drivers: unknown[] }).drivers, []);
  assert.equal((api.node.metadata as { labels: Record<string, string> }).labels['zone'], 'id-1');
});

test('node status: a topology value colliding with a Node label installs nothing', async () => {
  const api = new FakeApi();
  (api.node.metadata as { labels: Record<string, string> }).labels['zone'] = 'elsewhere';
  const said: string[] = [];
  const status = writer(api, said);
  status.driverRegistered(driver, { zone: 'id-1' });
  await status.settled();
  assert.deepEqual(api.writes, [], 'neither the Node nor the CSINode is written');
  assert.match(said.join('\n'), /not installed on the Node: detected topology value collision/);
});

test("node status: a volume is taken as attached from a GET of the Node's volumesAttached", async () => {
  const gets: string[] = [];
  let answer: () => JsonObject = () => ({
    metadata: { name: 'node-1' },
    status: {
      volumesAttached: [{ name: 'csi/disk-1', devicePath: '/dev/vdb' }, { name: 'csi/disk-2' }],
    },
  });
  const http = {
    get: async (path: string) => (gets.push(path), answer()),
  };
  const attachedNow = controllerAttachedNow(http, 'node-1');
  assert.equal(await attachedNow('csi/disk-1'), '/dev/vdb');
  assert.equal(await attachedNow('csi/disk-2'), '', 'listed with no devicePath (CSI)');
  assert.equal(await attachedNow('csi/disk-3'), undefined, 'not listed: not attached');
  assert.deepEqual(gets, ['/api/v1/nodes/node-1', '/api/v1/nodes/node-1', '/api/v1/nodes/node-1']);
  answer = () => {
    throw new KubeApiError(404, 'NotFound', 'nodes "node-1" not found');
  };
  assert.equal(await attachedNow('csi/disk-1'), undefined, 'a Node that is gone lists nothing');
  answer = () => {
    throw new KubeApiError(503, 'ServiceUnavailable', 'GET: 503');
  };
  await assert.rejects(attachedNow('csi/disk-1'), /503/, 'cannot tell: the verify fails, retried');
});
