/**
 * `disk.csi.vole.dev` keeps the spec's order and idempotency rules (docs/csi.md), over real
 * gRPC against real loop devices: CreateVolume idempotent by name, ALREADY_EXISTS for
 * another capacity; DeleteVolume of an unknown id OK and of a published one refused;
 * NodeStageVolume repeated OK, with another capability ALREADY_EXISTS; NodePublishVolume
 * before NodeStageVolume FAILED_PRECONDITION; ControllerUnpublishVolume of a staged
 * volume refused; unknown volumes NOT_FOUND; unpublish and unstage of nothing OK.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { diskDriverHandlers } from '../../src/csi/driver/disk-driver.js';
import { serveCsiDriver } from '../../src/csi/driver/server.js';
import { CsiRpcError, GrpcTransport } from '../../src/csi/transport.js';
import type { CsiRpc } from '../../src/csi/proto.js';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';
import { assertNothingLeft, sandboxIn } from './support.js';

const skip = hostTestSkipReason();
const { base } = skip === false ? hostSandbox('csi-rules') : { base: '' };

const mount = (fsType: string) => ({
  mount: { fs_type: fsType, mount_flags: [] },
  access_mode: { mode: 'SINGLE_NODE_WRITER' },
});

test(
  "host: vole csi-driver is strict about the spec's order and idempotency rules",
  { skip, timeout: 120_000 },
  async () => {
    const s = sandboxIn(base, 'rules');
    const served = await serveCsiDriver({
      name: 'disk.csi.vole.dev',
      endpoint: `unix://${s.socket}`,
      handlers: diskDriverHandlers({ nodeId: 'node-1', stateDir: s.state }),
      logger: pino({ level: 'silent' }),
    });
    const t = new GrpcTransport(`unix://${s.socket}`);
    const call = <T = Record<string, unknown>>(rpc: CsiRpc, request: object) =>
      t.call<T>(rpc, request, { deadlineMs: 60_000 });
    const code = async (rpc: CsiRpc, request: object) =>
      call(rpc, request).then(
        () => 'OK',
        (error: unknown) => (error instanceof CsiRpcError ? error.code : String(error)),
      );
    const staging = join(s.root, 'staging');
    const target = join(s.root, 'target');
    try {
      const create = {
        name: 'pvc-1',
        capacity_range: { required_bytes: String(32 << 20) },
        volume_capabilities: [mount('ext4')],
      };
      const first = await call<{ volume: { volume_id: string } }>('CreateVolume', create);
      const again = await call<{ volume: { volume_id: string } }>('CreateVolume', create);
      assert.equal(
        again.volume.volume_id,
        first.volume.volume_id,
        'CreateVolume is idempotent by name',
      );
      const bigger = { ...create, capacity_range: { required_bytes: String(64 << 20) } };
      assert.equal(await code('CreateVolume', bigger), 'ALREADY_EXISTS');
      assert.equal(await code('DeleteVolume', { volume_id: 'never-made' }), 'OK');
      const id = first.volume.volume_id;
      const stage = {
        volume_id: id,
        staging_target_path: staging,
        volume_capability: mount('ext4'),
      };
      assert.equal(await code('NodeStageVolume', { ...stage, volume_id: 'unknown' }), 'NOT_FOUND');
      assert.equal(
        await code('NodeStageVolume', stage),
        'FAILED_PRECONDITION',
        'not published yet',
      );
      const publish = {
        volume_id: id,
        staging_target_path: staging,
        target_path: target,
        volume_capability: mount('ext4'),
      };
      assert.equal(
        await code('NodePublishVolume', publish),
        'FAILED_PRECONDITION',
        'publish before stage',
      );
      const controller = { volume_id: id, node_id: 'node-1', volume_capability: mount('ext4') };
      assert.equal(
        await code('ControllerPublishVolume', { ...controller, node_id: 'elsewhere' }),
        'NOT_FOUND',
      );
      await call('ControllerPublishVolume', controller);
      assert.equal(
        await code('DeleteVolume', { volume_id: id }),
        'FAILED_PRECONDITION',
        'still published',
      );
      await call('NodeStageVolume', stage);
      assert.equal(await code('NodeStageVolume', stage), 'OK', 'the same stage again');
      assert.equal(
        await code('NodeStageVolume', { ...stage, volume_capability: mount('xfs') }),
        'ALREADY_EXISTS',
      );
      assert.equal(
        await code('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-1' }),
        'FAILED_PRECONDITION',
      );
      await call('NodePublishVolume', publish);
      assert.equal(await code('NodePublishVolume', publish), 'OK', 'the same publish again');
      const stats = await call<{ usage: { unit: string; total: string }[] }>('NodeGetVolumeStats', {
        volume_id: id,
        volume_path: target,
      });
      assert.ok(Number(stats.usage.find((u) => u.unit === 'BYTES')!.total) > 0);
      for (let i = 0; i < 2; i++) {
        assert.equal(
          await code('NodeUnpublishVolume', { volume_id: id, target_path: target }),
          'OK',
        );
        assert.equal(
          await code('NodeUnstageVolume', { volume_id: id, staging_target_path: staging }),
          'OK',
        );
        assert.equal(
          await code('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-1' }),
          'OK',
        );
      }
      assert.equal(
        await code('NodeUnpublishVolume', { volume_id: 'unknown', target_path: target }),
        'NOT_FOUND',
      );
      assert.equal(await code('DeleteVolume', { volume_id: id }), 'OK');
      assert.equal(await code('ControllerPublishVolume', controller), 'NOT_FOUND', 'deleted');
      assert.equal(await code('Probe', {}), 'OK');
      await assertNothingLeft(s);
    } finally {
      t.close();
      served.close();
    }
  },
);
