/**
 * ControllerPublishVolume / ControllerUnpublishVolume name the target node by the node_id
 * that node's copy of the driver answered NodeGetInfo with (the attach/detach controller's
 * lookup), not by the node_id of the controller's own connection; a node that never
 * registered the driver is refused before any RPC, saying so. A real gRPC server.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pino from 'pino';
import type { CsiRequest, Handler } from '../../src/csi/driver/common.js';
import { serveCsiDriver } from '../../src/csi/driver/server.js';
import { noCsiHost } from '../../src/csi/host.js';
import { csiPlugin } from '../../src/csi/plugin.js';
import { GrpcTransport } from '../../src/csi/transport.js';
import type { CallTarget } from '../../src/plugins/types.js';
import type { ResolvedVolume } from '../../src/operations/volume-spec.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-csi-node-id-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const driver = 'ids.csi.example.com';
const caps = {
  publishUnpublish: true,
  stageUnstage: true,
  expand: false,
  singleNodeMultiWriter: false,
  maxVolumesPerNode: 0,
};

/** The part of a resolved volume the controller calls read. */
const spec = {
  volume: `kubernetes.io/csi/${driver}^vol-1`,
  traits: { accessModes: ['ReadWriteOnce'], volumeMode: 'Filesystem', readOnly: false },
  source: { kind: 'csi', driver, volumeHandle: 'vol-1', fsType: 'ext4', volumeAttributes: {} },
} as unknown as ResolvedVolume;
const target = (node: string): CallTarget => ({
  node,
  pod: null,
  signal: new AbortController().signal,
});

test('CSI: the controller names each node by its own node_id; an unregistered node is refused without an RPC', async () => {
  const seen: CsiRequest[] = [];
  const record: Handler = async (request) => (seen.push(request), {});
  const socket = join(dir, 'driver.sock');
  const served = await serveCsiDriver({
    name: driver,
    endpoint: `unix://${socket}`,
    handlers: { ControllerPublishVolume: record, ControllerUnpublishVolume: record },
    logger: pino({ level: 'silent' }),
  });
  const transport = new GrpcTransport(`unix://${socket}`);
  try {
    const ids: Record<string, string> = { 'node-1': 'disk-host-a', 'node-2': 'disk-host-b' };
    const plugin = csiPlugin(
      { name: driver, transport, caps, nodeId: 'controller-host' },
      {
        root: dir,
        host: noCsiHost,
        nowMs: () => performance.now(),
        nodeIdOf: (d, node) => (d === driver ? ids[node] : undefined),
      },
    );
    await plugin.attacher!.attach(spec, target('node-2'));
    await plugin.attacher!.detach(spec, target('node-1'));
    assert.deepEqual(
      seen.map((r) => r.node_id),
      ['disk-host-b', 'disk-host-a'],
    );
    await assert.rejects(
      plugin.attacher!.attach(spec, target('node-3')),
      /node node-3 has not registered CSI driver ids\.csi\.example\.com/,
    );
    assert.equal(seen.length, 2, 'no RPC for a node without the driver');
  } finally {
    transport.close();
    served.close();
  }
});
