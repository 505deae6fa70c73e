/**
 * The project's csi.proto is the whole of CSI spec v1.12.0: every service and RPC loads,
 * and fields the cut-down file used to drop reach the client through real gRPC as
 * proto-loader decodes them (keepCase names, 64-bit integers as strings, enums by name,
 * oneofs named): NodeGetInfo's accessible_topology, a volume's accessible_topology and
 * content_source, NodeGetVolumeStats' volume_condition, ValidateVolumeCapabilities'
 * confirmed capabilities, ListVolumes' status.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pino from 'pino';
import * as protoLoader from '@grpc/proto-loader';
import type { Handler } from '../../src/csi/driver/common.js';
import { serveCsiDriver } from '../../src/csi/driver/server.js';
import { csiServices } from '../../src/csi/proto.js';
import { GrpcTransport } from '../../src/csi/transport.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-csi-proto-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('csi.proto declares every service and RPC of spec v1.12.0', () => {
  const services = csiServices();
  const rpcs = (name: keyof typeof services) => Object.keys(services[name].service).sort();
  assert.deepEqual(rpcs('Identity'), ['GetPluginCapabilities', 'GetPluginInfo', 'Probe']);
  assert.deepEqual(rpcs('Controller'), [
    'ControllerExpandVolume',
    'ControllerGetCapabilities',
    'ControllerGetVolume',
    'ControllerModifyVolume',
    'ControllerPublishVolume',
    'ControllerUnpublishVolume',
    'CreateSnapshot',
    'CreateVolume',
    'DeleteSnapshot',
    'DeleteVolume',
    'GetCapacity',
    'GetSnapshot',
    'ListSnapshots',
    'ListVolumes',
    'ValidateVolumeCapabilities',
  ]);
  assert.equal(rpcs('Node').length, 8);
  const all = protoLoader.loadSync(join(import.meta.dirname, '../../src/csi/csi.proto'));
  assert.ok('csi.v1.GroupController' in all && 'csi.v1.SnapshotMetadata' in all);
});

test(
  'fields of the whole spec reach the client as the loader decodes them',
  { timeout: 30_000 },
  async () => {
    const topology = { segments: { 'topology.example.com/zone': 'z1' } };
    const volume = {
      volume_id: 'v1',
      capacity_bytes: String(2 ** 40),
      volume_context: { a: 'b' },
      content_source: { volume: { volume_id: 'v0' } },
      accessible_topology: [topology],
    };
    const mount = {
      mount: { fs_type: 'xfs', mount_flags: [] },
      access_mode: { mode: 'SINGLE_NODE_WRITER' },
    };
    const handlers: Record<string, Handler> = {
      NodeGetInfo: async () => ({
        node_id: 'n1',
        max_volumes_per_node: '3',
        accessible_topology: topology,
      }),
      CreateVolume: async () => ({ volume }),
      NodeGetVolumeStats: async () => ({
        usage: [{ unit: 'BYTES', total: '10', available: '4', used: '6' }],
        volume_condition: { abnormal: true, message: 'gone' },
      }),
      ValidateVolumeCapabilities: async (r) => ({
        confirmed: { volume_capabilities: r.volume_capabilities },
      }),
      ListVolumes: async () => ({
        entries: [{ volume, status: { published_node_ids: ['n1'], volume_condition: null } }],
        next_token: '1',
      }),
    };
    const socket = join(dir, 'proto.sock');
    const served = await serveCsiDriver({
      name: 'proto.csi.example.com',
      endpoint: `unix://${socket}`,
      handlers,
      logger: pino({ level: 'silent' }),
    });
    const t = new GrpcTransport(`unix://${socket}`);
    const call = <T>(rpc: Parameters<typeof t.call>[0], request: object) =>
      t.call<T>(rpc, request, { deadlineMs: 10_000 });
    try {
      const info = await call<{ max_volumes_per_node: string; accessible_topology: unknown }>(
        'NodeGetInfo',
        {},
      );
      assert.equal(info.max_volumes_per_node, '3');
      assert.deepEqual(info.accessible_topology, topology);
      const created = await call<{ volume: Record<string, unknown> }>('CreateVolume', {
        name: 'x',
      });
      assert.equal(created.volume.capacity_bytes, String(2 ** 40), 'int64 as a decimal string');
      assert.deepEqual(created.volume.accessible_topology, [topology]);
      const source = created.volume.content_source as {
        type: string;
        volume: { volume_id: string };
      };
      assert.equal(source.type, 'volume', 'oneof named');
      assert.equal(source.volume.volume_id, 'v0');
      const stats = await call<{ usage: { unit: string }[]; volume_condition: unknown }>(
        'NodeGetVolumeStats',
        {},
      );
      assert.equal(stats.usage[0]!.unit, 'BYTES', 'enum by name');
      assert.deepEqual(stats.volume_condition, { abnormal: true, message: 'gone' });
      const valid = await call<{ confirmed: { volume_capabilities: { access_type: string }[] } }>(
        'ValidateVolumeCapabilities',
        { volume_id: 'v1', volume_capabilities: [mount] },
      );
      assert.equal(valid.confirmed.volume_capabilities[0]!.access_type, 'mount');
      const list = await call<{
        entries: { status: { published_node_ids: string[] } }[];
        next_token: string;
      }>('ListVolumes', {});
      assert.deepEqual(list.entries[0]!.status.published_node_ids, ['n1']);
      assert.equal(list.next_token, '1');
    } finally {
      t.close();
      served.close();
    }
  },
);
