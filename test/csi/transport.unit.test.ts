/**
 * The gRPC transport alone, against real servers on unix sockets: its one channel still
 * gives every failure the code docs/csi.md classifies (a deadline that passes is
 * DEADLINE_EXCEEDED, a socket with no driver UNAVAILABLE, both `uncertain`, without
 * grpc-js's "Resolution note"), and a driver restarted on the same socket is used again
 * within a few seconds; the registry asks a restarted driver again before the next RPC, and records its answers again only when
 * they changed (the RPC planned with the old answers then does not go).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pino from 'pino';
import type { Handler } from '../../src/csi/driver/common.js';
import { serveCsiDriver } from '../../src/csi/driver/server.js';
import { withoutResolutionNote } from '../../src/csi/grpc-text.js';
import { CsiDriverRegistry } from '../../src/csi/registry.js';
import { describeEtcdError } from '../../src/cluster/client.js';
import { CsiRpcError, errorClassOf, GrpcTransport } from '../../src/csi/transport.js';
import { PluginManager } from '../../src/plugins/manager.js';
import { VolumeManager } from '../../src/agent/volume-manager.js';
import type { VoleEvent } from '../../src/events/index.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-csi-transport-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const logger = pino({ level: 'silent' });

async function failure(promise: Promise<unknown>): Promise<CsiRpcError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof CsiRpcError, `a CsiRpcError, not ${String(error)}`);
    return error;
  }
  assert.fail('the call succeeded');
}

test('transport: each service answers on the one channel; a passed deadline is DEADLINE_EXCEEDED, uncertain', async () => {
  const socket = join(dir, 'slow.sock');
  const never = new Promise<object>(() => {});
  const handlers: Record<string, Handler> = {
    GetPluginInfo: async () => ({ name: 'slow.example.com', vendor_version: '1' }),
    ControllerPublishVolume: async () => ({ publish_context: { devicePath: '/dev/x' } }),
    NodeStageVolume: () => never,
  };
  const served = await serveCsiDriver({
    name: 'slow.example.com',
    endpoint: `unix://${socket}`,
    handlers,
    logger,
  });
  const transport = new GrpcTransport(`unix://${socket}`);
  try {
    const info = await transport.call<{ name: string }>('GetPluginInfo', {}, { deadlineMs: 5_000 });
    assert.equal(info.name, 'slow.example.com');
    const published = await transport.call<{ publish_context: Record<string, string> }>(
      'ControllerPublishVolume',
      { volume_id: 'v', node_id: 'n' },
      { deadlineMs: 5_000 },
    );
    assert.deepEqual(published.publish_context, { devicePath: '/dev/x' });
    const startMs = performance.now();
    const error = await failure(
      transport.call('NodeStageVolume', { volume_id: 'v' }, { deadlineMs: 200 }),
    );
    assert.equal(error.code, 'DEADLINE_EXCEEDED');
    assert.equal(errorClassOf(error.code), 'uncertain');
    assert.ok(performance.now() - startMs < 2_000, 'the deadline ends the call');
    const unknown = await failure(
      transport.call('NodeUnstageVolume', { volume_id: 'v' }, { deadlineMs: 5_000 }),
    );
    assert.equal(unknown.code, 'UNIMPLEMENTED');
    assert.equal(errorClassOf(unknown.code), 'final');
  } finally {
    transport.close();
    served.close();
  }
});

test("grpc-js's trailing resolution note is cut, empty or not; other text is kept", () => {
  const cut = 'No connection established. Last error: connect ENOENT /run/x.sock';
  assert.equal(withoutResolutionNote(`${cut}. Resolution note: `), cut);
  assert.equal(withoutResolutionNote(`${cut}. Resolution note: no addresses for dns:x`), cut);
  assert.equal(withoutResolutionNote(cut), cut);
  assert.equal(
    describeEtcdError(
      new Error(`14 UNAVAILABLE: ${cut}. Resolution note: `),
      'http://127.0.0.1:1',
    ).includes('Resolution'),
    false,
  );
});

test('transport: no driver on the socket is UNAVAILABLE (uncertain); a driver started there is used', async () => {
  const socket = join(dir, 'later.sock');
  const transport = new GrpcTransport(`unix://${socket}`);
  const handlers: Record<string, Handler> = { NodePublishVolume: async () => ({}) };
  try {
    const error = await failure(
      transport.call('NodePublishVolume', { volume_id: 'v' }, { deadlineMs: 5_000 }),
    );
    assert.equal(error.code, 'UNAVAILABLE');
    assert.equal(errorClassOf(error.code), 'uncertain');
    // grpc-js's (empty) "Resolution note: " is not part of what vole records.
    assert.match(error.message, /ENOENT/);
    assert.doesNotMatch(error.message, /Resolution note/);
    assert.doesNotMatch(error.message, /[.:]\s*$/);
    for (const round of [1, 2]) {
      const served = await serveCsiDriver({
        name: 'later.example.com',
        endpoint: `unix://${socket}`,
        handlers,
        logger,
      });
      try {
        const deadlineAtMs = performance.now() + 5_000;
        let answered = false;
        while (!answered && performance.now() < deadlineAtMs) {
          answered = await transport
            .call('NodePublishVolume', { volume_id: 'v' }, { deadlineMs: 1_000 })
            .then(
              () => true,
              () => new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 100)),
            );
        }
        assert.ok(answered, `round ${round}: the driver on the socket answers within 5 s`);
      } finally {
        served.close();
      }
    }
  } finally {
    transport.close();
  }
});

test('registry: a restarted driver is asked again before the next RPC; other answers are registered anew and that RPC waits for a new plan', async () => {
  const name = 'restarting.example.com';
  const socket = join(dir, 'restarting.sock');
  const asked = { count: 0 };
  const version = (vendorVersion: string): Record<string, Handler> => ({
    GetPluginInfo: async () => {
      asked.count++;
      return { name, vendor_version: vendorVersion };
    },
    NodeGetInfo: async () => ({ node_id: 'node-1', max_volumes_per_node: '0' }),
    NodeGetCapabilities: async () => ({ capabilities: [] }),
    GetPluginCapabilities: async () => ({ capabilities: [] }),
    NodePublishVolume: async () => ({}),
  });
  const serve = (vendorVersion: string) =>
    serveCsiDriver({
      name,
      endpoint: `unix://${socket}`,
      handlers: version(vendorVersion),
      logger,
    });
  const plugins = new PluginManager();
  const registry = new CsiDriverRegistry({ root: join(dir, 'root'), plugins, logger });
  const vm = VolumeManager.create({
    node: 'node-1',
    plugins,
    controllerAttachDetach: false,
    logger,
  });
  const events: VoleEvent[] = [];
  vm.subscribe((event) => void events.push(event));
  let served = await serve('1');
  const pod = (uid: string) => ({
    metadata: { name: uid, namespace: 'default', uid },
    spec: { volumes: [{ name: 'scratch', csi: { driver: name, volumeHandle: 'eph' } }] },
  });
  const registrations = () => events.filter((e) => e.type === 'CsiDriverRegistered');
  try {
    await registry.add(`unix://${socket}`, 'flag', name);
    vm.start();
    registry.setRecorder((event) => vm.inputs.recordCsiDriver(event)); // as `vole run` does
    vm.inputs.markSourcesReady();
    vm.inputs.addPod(pod('uid-1'));
    await vm.waitForAttachAndMount('uid-1', { timeoutMs: 10_000 });
    assert.equal(asked.count, 1);

    served.close();
    served = await serve('1'); // the same driver again
    vm.inputs.addPod(pod('uid-2'));
    await vm.waitForAttachAndMount('uid-2', { timeoutMs: 10_000 });
    assert.equal(asked.count, 2, 'asked again before the first RPC to the new process');
    assert.equal(registrations().length, 1, 'the same answers are not recorded again');

    served.close();
    served = await serve('2'); // another version
    vm.inputs.addPod(pod('uid-3'));
    await vm.waitForAttachAndMount('uid-3', { timeoutMs: 10_000 });
    assert.deepEqual(
      registrations().map((e) => e.type === 'CsiDriverRegistered' && e.vendorVersion),
      ['1', '2'],
    );
    const held = events.find((e) => e.type === 'CallFailed');
    assert.ok(held?.type === 'CallFailed', 'the RPC planned with the old answers did not go');
    assert.equal(held.rpc, undefined, 'no RPC is logged for it');
    assert.equal(held.error.kind, 'final');
    assert.match(held.error.message, /restarted with other answers/);
  } finally {
    vm.stop();
    registry.close();
    served.close();
  }
});
