/**
 * Provisioning over real gRPC (a unix socket, no host changes): vole's CSI plugin sends
 * CreateVolume as the external-provisioner does — the name `pvc-<claim uid>`, the request
 * as required_bytes, a capability per access mode with the class's fstype, the parameters
 * without the provisioner's keys, the node's topology as accessibility requirements — and
 * records the PV from the answer (volume_id, capacity, accessible topology as node
 * affinity); a grown claim sends ControllerExpandVolume; a released PV DeleteVolume.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pino from 'pino';
import { VolumeManager } from '../../src/agent/volume-manager.js';
import type { CsiRequest, Handler } from '../../src/csi/driver/common.js';
import { serveCsiDriver } from '../../src/csi/driver/server.js';
import { noCsiHost } from '../../src/csi/host.js';
import { csiPlugin } from '../../src/csi/plugin.js';
import { GrpcTransport } from '../../src/csi/transport.js';
import { persistentVolumes } from '../../src/binding/claims-view.js';
import type { World } from '../../src/kubelet/types.js';
import { until } from '../support/host.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-provision-grpc-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const logger = pino({ level: 'silent' });
const driver = 'prov.csi.example.com';
const caps = {
  publishUnpublish: false,
  stageUnstage: false,
  expand: false,
  singleNodeMultiWriter: false,
  maxVolumesPerNode: 0,
  createDelete: true,
  controllerExpand: true,
  accessibleTopology: { 'topology.example.com/zone': 'z1' },
};

test('provisioning over gRPC: the RPCs as the sidecars send them', async () => {
  const requests: { rpc: string; request: CsiRequest & Record<string, unknown> }[] = [];
  const record =
    (rpc: string, answer: (r: CsiRequest & Record<string, unknown>) => object): Handler =>
    async (request) => {
      requests.push({ rpc, request: request as CsiRequest & Record<string, unknown> });
      return answer(request as CsiRequest & Record<string, unknown>);
    };
  const handlers: Record<string, Handler> = {
    CreateVolume: record('CreateVolume', (r) => ({
      volume: {
        volume_id: `id-${r.name}`,
        capacity_bytes: r.capacity_range?.required_bytes,
        volume_context: { made: 'yes' },
        accessible_topology: [{ segments: { 'topology.example.com/zone': 'z1' } }],
      },
    })),
    ControllerExpandVolume: record('ControllerExpandVolume', (r) => ({
      capacity_bytes: r.capacity_range?.required_bytes,
      node_expansion_required: false,
    })),
    DeleteVolume: record('DeleteVolume', () => ({})),
  };
  const socket = join(dir, 'prov.sock');
  const served = await serveCsiDriver({
    name: driver,
    endpoint: `unix://${socket}`,
    handlers,
    logger,
  });
  const transport = new GrpcTransport(`unix://${socket}`);
  const plugin = csiPlugin(
    { name: driver, transport, caps, nodeId: 'node-1' },
    { root: '/var/lib/vole', host: noCsiHost, nowMs: () => performance.now() },
  );
  const vm = VolumeManager.create({
    node: 'node-1',
    plugins: [plugin],
    controllerAttachDetach: false,
    logger,
  });
  let latest: World | undefined;
  vm.subscribe((_event, w) => void (latest = w));
  vm.start();
  vm.inputs.markSourcesReady();
  const world = () => latest!;
  try {
    vm.inputs.upsertObject({
      kind: 'StorageClass',
      metadata: { name: 'fast' },
      provisioner: driver,
      parameters: { type: 'ssd', 'csi.storage.k8s.io/fstype': 'xfs' },
      allowVolumeExpansion: true,
    });
    const claim = (storage: string) => ({
      kind: 'PersistentVolumeClaim' as const,
      metadata: { name: 'data', namespace: 'default', uid: 'c-1' },
      spec: {
        storageClassName: 'fast',
        accessModes: ['ReadWriteOnce', 'ReadOnlyMany'],
        resources: { requests: { storage } },
      },
    });
    vm.inputs.upsertObject(claim('1Gi'));
    await until(
      () => persistentVolumes(world()).some((pv) => pv.phase === 'Bound'),
      'the PV',
      10_000,
    );
    const create = requests.find((r) => r.rpc === 'CreateVolume')!.request;
    assert.equal(create.name, 'pvc-c-1');
    assert.deepEqual(create.capacity_range, { required_bytes: String(2 ** 30), limit_bytes: '0' });
    assert.deepEqual(create.parameters, { type: 'ssd' });
    const modes = (create.volume_capabilities ?? []).map((c) => [
      c.access_mode?.mode,
      c.mount?.fs_type,
    ]);
    assert.deepEqual(modes, [
      ['SINGLE_NODE_WRITER', 'xfs'],
      ['MULTI_NODE_READER_ONLY', 'xfs'],
    ]);
    const requisite = (
      create['accessibility_requirements'] as { requisite: { segments: object }[] }
    ).requisite;
    assert.deepEqual(
      requisite.map((t) => t.segments),
      [{ 'topology.example.com/zone': 'z1' }],
    );
    const [pv] = persistentVolumes(world());
    assert.deepEqual(
      { name: pv!.name, handle: pv!.volumeHandle, bytes: pv!.capacityBytes, zone: pv!.zone },
      { name: 'pvc-c-1', handle: 'id-pvc-c-1', bytes: 2 ** 30, zone: 'z1' },
    );
    vm.inputs.upsertObject(claim('2Gi'));
    await until(
      () => persistentVolumes(world())[0]?.capacityBytes === 2 ** 31,
      'the expansion',
      10_000,
    );
    const expand = requests.find((r) => r.rpc === 'ControllerExpandVolume')!.request;
    assert.equal(expand.volume_id, 'id-pvc-c-1');
    vm.inputs.removeObject({ kind: 'PersistentVolumeClaim', name: 'data', namespace: 'default' });
    await until(() => persistentVolumes(world()).length === 0, 'the deletion', 10_000);
    assert.equal(requests.find((r) => r.rpc === 'DeleteVolume')!.request.volume_id, 'id-pvc-c-1');
  } finally {
    vm.stop();
    transport.close();
    served.close();
  }
});
