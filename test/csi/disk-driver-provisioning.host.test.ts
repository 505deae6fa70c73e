/**
 * `disk.csi.vole.dev` provisions by the spec's rules, over real gRPC: per-node topology
 * (NodeGetInfo's segment, requisite topologies honoured, the volume's accessible_topology
 * answered through the whole csi.proto), the `--capacity` budget (GetCapacity, OUT_OF_RANGE
 * beyond it, for CreateVolume and ControllerExpandVolume), ListVolumes pages and its
 * ABORTED token, ValidateVolumeCapabilities (INVALID_ARGUMENT, NOT_FOUND, confirmed only for
 * what it gives), NodeExpandVolume without capacity_range (NOT_FOUND first for an unknown
 * volume; a Block volume's device grown to what the controller made), xfs volumes raised
 * to the size mkfs.xfs needs, and its records surviving a restart of the driver.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { diskDriverHandlers, diskTopologyKey } from '../../src/csi/driver/disk-driver.js';
import { serveCsiDriver } from '../../src/csi/driver/server.js';
import type { CsiRpc } from '../../src/csi/proto.js';
import { CsiRpcError, GrpcTransport } from '../../src/csi/transport.js';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';
import { assertNothingLeft, type Sandbox, sandboxIn } from './support.js';

const skip = hostTestSkipReason();
const { base } = skip === false ? hostSandbox('csi-provision') : { base: '' };
const MiB = 2 ** 20;

const mount = (mode = 'SINGLE_NODE_WRITER') => ({
  mount: { fs_type: 'ext4', mount_flags: [] },
  access_mode: { mode },
});
const block = () => ({ block: {}, access_mode: { mode: 'SINGLE_NODE_WRITER' } });
const here = { segments: { [diskTopologyKey]: 'node-1' } };

/** The driver served in-process on the sandbox socket, and a client of it. */
async function driver(s: Sandbox, limits: { capacityBytes?: number; maxVolumesPerNode?: number }) {
  const served = await serveCsiDriver({
    name: 'disk.csi.vole.dev',
    endpoint: `unix://${s.socket}`,
    handlers: diskDriverHandlers({
      nodeId: 'node-1',
      stateDir: s.state,
      ...limits,
    }),
    logger: pino({ level: 'silent' }),
  });
  const t = new GrpcTransport(`unix://${s.socket}`);
  const call = <T = Record<string, unknown>>(rpc: CsiRpc, request: object) =>
    t.call<T>(rpc, request, { deadlineMs: 60_000 });
  const code = (rpc: CsiRpc, request: object) =>
    call(rpc, request).then(
      () => 'OK',
      (error: unknown) => (error instanceof CsiRpcError ? error.code : String(error)),
    );
  return { call, code, close: () => (t.close(), served.close()) };
}

type Volume = {
  volume_id: string;
  capacity_bytes: string;
  accessible_topology: { segments: Record<string, string> }[];
};
const create = (name: string, bytes: number, extra: object = {}) => ({
  name,
  capacity_range: { required_bytes: String(bytes) },
  volume_capabilities: [mount()],
  ...extra,
});

test(
  'host: vole csi-driver provisions on its node within --capacity, lists, validates, ' +
    'and keeps it across a restart',
  { skip, timeout: 120_000 },
  async () => {
    const s = sandboxIn(base, 'provision');
    let d = await driver(s, { capacityBytes: 100 * MiB });
    try {
      const plugin = await d.call<{ capabilities: { service?: { type: string } }[] }>(
        'GetPluginCapabilities',
        {},
      );
      assert.ok(
        plugin.capabilities.some((c) => c.service?.type === 'VOLUME_ACCESSIBILITY_CONSTRAINTS'),
      );
      const controller = await d.call<{ capabilities: { rpc: { type: string } }[] }>(
        'ControllerGetCapabilities',
        {},
      );
      assert.deepEqual(controller.capabilities.map((c) => c.rpc.type).sort(), [
        'CREATE_DELETE_VOLUME',
        'EXPAND_VOLUME',
        'GET_CAPACITY',
        'LIST_VOLUMES',
        'LIST_VOLUMES_PUBLISHED_NODES',
        'PUBLISH_UNPUBLISH_VOLUME',
      ]);
      const info = await d.call<{ accessible_topology: { segments: Record<string, string> } }>(
        'NodeGetInfo',
        {},
      );
      assert.deepEqual(info.accessible_topology, here, 'NodeGetInfo answers the node segment');

      const elsewhere = {
        requisite: [{ segments: { [diskTopologyKey]: 'node-2' } }],
        preferred: [],
      };
      assert.equal(
        await d.code(
          'CreateVolume',
          create('pvc-a', 40 * MiB, { accessibility_requirements: elsewhere }),
        ),
        'RESOURCE_EXHAUSTED',
      );
      const requisite = { requisite: [elsewhere.requisite[0], here], preferred: [here] };
      const a = (
        await d.call<{ volume: Volume }>(
          'CreateVolume',
          create('pvc-a', 40 * MiB, { accessibility_requirements: requisite }),
        )
      ).volume;
      assert.deepEqual(
        a.accessible_topology,
        [here],
        "the volume's accessible topology is this node",
      );
      assert.equal(a.capacity_bytes, String(40 * MiB));
      const capacity = () =>
        d
          .call<{ available_capacity: string }>('GetCapacity', {})
          .then((c) => Number(c.available_capacity));
      assert.equal(await capacity(), 60 * MiB);
      const other = await d.call<{ available_capacity: string }>('GetCapacity', {
        accessible_topology: elsewhere.requisite[0],
      });
      assert.equal(other.available_capacity, '0', 'no capacity on another node');
      assert.equal(await d.code('CreateVolume', create('pvc-b', 61 * MiB)), 'OUT_OF_RANGE');
      assert.equal(await d.code('CreateVolume', create('pvc-a', 50 * MiB)), 'ALREADY_EXISTS');
      assert.equal(
        await d.code('CreateVolume', {
          ...create('pvc-m', MiB),
          volume_capabilities: [mount('MULTI_NODE_MULTI_WRITER')],
        }),
        'INVALID_ARGUMENT',
      );
      await d.call('CreateVolume', create('pvc-b', 20 * MiB));
      await d.call('CreateVolume', create('pvc-c', 20 * MiB));
      assert.equal(await capacity(), 20 * MiB);
      assert.equal(
        await d.code('ControllerExpandVolume', {
          volume_id: 'pvc-a',
          capacity_range: { required_bytes: String(61 * MiB) },
        }),
        'OUT_OF_RANGE',
      );
      const grown = await d.call<{ capacity_bytes: string; node_expansion_required: boolean }>(
        'ControllerExpandVolume',
        {
          volume_id: 'pvc-a',
          capacity_range: { required_bytes: String(50 * MiB) },
          volume_capability: mount(),
        },
      );
      assert.deepEqual(
        grown,
        { capacity_bytes: String(50 * MiB), node_expansion_required: true },
        'a filesystem grows on the node too',
      );
      assert.equal(await capacity(), 10 * MiB);

      type Page = { entries: { volume: Volume }[]; next_token: string };
      const first = await d.call<Page>('ListVolumes', { max_entries: 2 });
      assert.deepEqual(
        first.entries.map((e) => e.volume.volume_id),
        ['pvc-a', 'pvc-b'],
      );
      assert.equal(first.entries[0]!.volume.capacity_bytes, String(50 * MiB));
      const second = await d.call<Page>('ListVolumes', {
        max_entries: 2,
        starting_token: first.next_token,
      });
      assert.deepEqual(
        second.entries.map((e) => e.volume.volume_id),
        ['pvc-c'],
      );
      assert.equal(second.next_token, '', 'the last page has no next token');
      assert.equal(await d.code('ListVolumes', { starting_token: 'not-a-token' }), 'ABORTED');
      assert.equal(await d.code('ListVolumes', { max_entries: -1 }), 'INVALID_ARGUMENT');

      assert.equal(
        await d.code('ValidateVolumeCapabilities', { volume_capabilities: [mount()] }),
        'INVALID_ARGUMENT',
      );
      assert.equal(
        await d.code('ValidateVolumeCapabilities', { volume_id: 'pvc-a' }),
        'INVALID_ARGUMENT',
      );
      assert.equal(
        await d.code('ValidateVolumeCapabilities', {
          volume_id: 'nope',
          volume_capabilities: [mount()],
        }),
        'NOT_FOUND',
      );
      type Validated = { confirmed: { volume_capabilities: unknown[] } | null; message: string };
      const ok = await d.call<Validated>('ValidateVolumeCapabilities', {
        volume_id: 'pvc-a',
        volume_capabilities: [mount(), block()],
      });
      assert.equal(ok.confirmed?.volume_capabilities.length, 2, 'both confirmed');
      const no = await d.call<Validated>('ValidateVolumeCapabilities', {
        volume_id: 'pvc-a',
        volume_capabilities: [mount('MULTI_NODE_READER_ONLY')],
      });
      assert.equal(no.confirmed, null, 'a multi-node mode is not confirmed');
      assert.match(no.message, /MULTI_NODE_READER_ONLY is not supported/);

      d.close();
      d = await driver(s, { capacityBytes: 100 * MiB });
      const again = (await d.call<{ volume: Volume }>('CreateVolume', create('pvc-a', 40 * MiB)))
        .volume;
      assert.deepEqual(
        [again.volume_id, again.capacity_bytes],
        ['pvc-a', String(50 * MiB)],
        'the same volume after a restart',
      );
      assert.equal(await capacity(), 10 * MiB, 'the budget survives a restart');
      for (const id of ['pvc-a', 'pvc-b', 'pvc-c', 'pvc-a'])
        assert.equal(await d.code('DeleteVolume', { volume_id: id }), 'OK');
      assert.equal(await capacity(), 100 * MiB);
      assert.deepEqual((await d.call<Page>('ListVolumes', {})).entries, []);
    } finally {
      d.close();
    }
  },
);

test(
  'host: NodeExpandVolume needs no capacity_range: NOT_FOUND for an unknown volume, ' +
    "a Block device grown to the controller's size",
  { skip, timeout: 120_000 },
  async () => {
    const s = sandboxIn(base, 'expand');
    const d = await driver(s, { maxVolumesPerNode: 1 });
    const staging = join(s.root, 'staging');
    const target = join(s.root, 'target', 'device');
    try {
      assert.equal(await d.code('NodeExpandVolume', { volume_path: target }), 'INVALID_ARGUMENT');
      assert.equal(
        await d.code('NodeExpandVolume', { volume_id: 'unknown' }),
        'NOT_FOUND',
        'NOT_FOUND before the missing volume_path',
      );
      const id = (
        await d.call<{ volume: Volume }>('CreateVolume', {
          ...create('pvc-blk', 32 * MiB),
          volume_capabilities: [block()],
        })
      ).volume.volume_id;
      await d.call('ControllerPublishVolume', {
        volume_id: id,
        node_id: 'node-1',
        volume_capability: block(),
      });
      await d.call('NodeStageVolume', {
        volume_id: id,
        staging_target_path: staging,
        volume_capability: block(),
      });
      await d.call('NodePublishVolume', {
        volume_id: id,
        staging_target_path: staging,
        target_path: target,
        volume_capability: block(),
      });
      const xfs = {
        mount: { fs_type: 'xfs', mount_flags: [] },
        access_mode: { mode: 'SINGLE_NODE_WRITER' },
      };
      const small = { ...create('pvc-xfs', 100 * MiB), volume_capabilities: [xfs] };
      const bounded = {
        ...small,
        capacity_range: { required_bytes: String(100 * MiB), limit_bytes: String(200 * MiB) },
      };
      assert.equal(await d.code('CreateVolume', bounded), 'OUT_OF_RANGE', 'xfs cannot fit 200Mi');
      const raised = (await d.call<{ volume: Volume }>('CreateVolume', small)).volume;
      assert.equal(raised.capacity_bytes, String(300 * MiB), 'raised to what mkfs.xfs needs');
      await d.call('DeleteVolume', { volume_id: raised.volume_id });
      const other = (await d.call<{ volume: Volume }>('CreateVolume', create('pvc-2', MiB))).volume;
      const publishOther = {
        volume_id: other.volume_id,
        node_id: 'node-1',
        volume_capability: block(),
      };
      assert.equal(
        await d.code('ControllerPublishVolume', publishOther),
        'RESOURCE_EXHAUSTED',
        'max_volumes_per_node 1',
      );
      type Entry = { volume: Volume; status: { published_node_ids: string[] } };
      const listed = await d.call<{ entries: Entry[] }>('ListVolumes', {});
      assert.deepEqual(
        listed.entries.map((e) => [e.volume.volume_id, e.status.published_node_ids]),
        [
          ['pvc-2', []],
          ['pvc-blk', ['node-1']],
        ],
      );
      type Stats = {
        usage: { unit: string; total: string }[];
        volume_condition: { abnormal: boolean };
      };
      const statsOf = () =>
        d.call<Stats>('NodeGetVolumeStats', { volume_id: id, volume_path: target });
      const grown = await d.call<{ node_expansion_required: boolean }>('ControllerExpandVolume', {
        volume_id: id,
        capacity_range: { required_bytes: String(48 * MiB) },
        volume_capability: block(),
      });
      assert.equal(
        grown.node_expansion_required,
        true,
        'an attached loop device must be told on the node',
      );
      assert.equal((await statsOf()).usage[0]!.total, String(32 * MiB), 'not yet on the node');
      const expanded = await d.call<{ capacity_bytes: string }>('NodeExpandVolume', {
        volume_id: id,
        volume_path: target,
      });
      assert.equal(expanded.capacity_bytes, String(48 * MiB));
      const size = spawnSync('blockdev', ['--getsize64', target], {
        encoding: 'utf8',
      }).stdout.trim();
      assert.equal(size, String(48 * MiB), 'the published device is the new size');
      const stats = await statsOf();
      assert.deepEqual(
        stats.usage.map((u) => [u.unit, u.total]),
        [['BYTES', String(48 * MiB)]],
      );
      assert.equal(stats.volume_condition.abnormal, false);
      await d.call('NodeUnpublishVolume', { volume_id: id, target_path: target });
      await d.call('NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
      await d.call('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-1' });
      await d.call('DeleteVolume', { volume_id: id });
      await d.call('DeleteVolume', { volume_id: other.volume_id });
      await assertNothingLeft(s, [target]);
    } finally {
      d.close();
    }
  },
);
