/**
 * A CSI driver that is not registered is not called (issue 22 item 4): while its
 * registration socket is gone, or its endpoint socket is, an operation on its volumes
 * fails as one where nothing happened — no CallStarted for an RPC that never went out, the
 * pair left as it was (never uncertain), no csi_operations_seconds sample — with a message
 * naming what is missing. Registered (or started) again, the same pod mounts (tears down).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pino from 'pino';
import { kubeletCore } from '../../src/engine/cores.js';
import { VolumeManager } from '../../src/agent/volume-manager.js';
import type { Handler } from '../../src/csi/driver/common.js';
import { serveCsiDriver, serveRegistration } from '../../src/csi/driver/server.js';
import { CsiDriverRegistry } from '../../src/csi/registry.js';
import { RegistrationWatcher } from '../../src/csi/watcher.js';
import type { EventOf, VoleEvent } from '../../src/events/index.js';
import { UniquePodName, UniqueVolumeName } from '../../src/ids.js';
import { VoleMetrics } from '../../src/metrics/index.js';
import { PluginManager } from '../../src/plugins/manager.js';
import { podEntry } from '../../src/kubelet/by-pod.js';
import { until } from '../support/host.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-csi-unregistered-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const logger = pino({ level: 'silent' });
const driver = 'unregistered.csi.example.com';
const root = join(dir, 'root');
const registrationDir = join(root, 'plugins_registry');
const socketPath = join(dir, 'driver.sock');
const volume = UniqueVolumeName(`kubernetes.io/csi/${driver}^vol-1`);
const pod = UniquePodName('uid-1');

/** A driver with a controller (PUBLISH_UNPUBLISH) that stages; it records each RPC it gets. */
function handlers(received: string[]): Record<string, Handler> {
  const ok =
    (rpc: string, response: object = {}): Handler =>
    async () => {
      received.push(rpc);
      return response;
    };
  return {
    GetPluginInfo: async () => ({ name: driver, vendor_version: '1' }),
    GetPluginCapabilities: async () => ({
      capabilities: [{ service: { type: 'CONTROLLER_SERVICE' } }],
    }),
    ControllerGetCapabilities: async () => ({
      capabilities: [{ rpc: { type: 'PUBLISH_UNPUBLISH_VOLUME' } }],
    }),
    NodeGetInfo: async () => ({ node_id: 'node-1', max_volumes_per_node: '0' }),
    NodeGetCapabilities: async () => ({
      capabilities: [{ rpc: { type: 'STAGE_UNSTAGE_VOLUME' } }],
    }),
    ControllerPublishVolume: ok('ControllerPublishVolume', { publish_context: {} }),
    ControllerUnpublishVolume: ok('ControllerUnpublishVolume'),
    NodeStageVolume: ok('NodeStageVolume'),
    NodeUnstageVolume: ok('NodeUnstageVolume'),
    NodePublishVolume: ok('NodePublishVolume'),
    NodeUnpublishVolume: ok('NodeUnpublishVolume'),
  };
}

function claimAndPod(vm: VolumeManager): void {
  vm.inputs.upsertObject({
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name: 'pv-1' },
    spec: {
      accessModes: ['ReadWriteOnce'],
      capacity: { storage: '1Gi' },
      csi: { driver, volumeHandle: 'vol-1', fsType: 'ext4' },
    },
  });
  vm.inputs.upsertObject({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'claim-1', namespace: 'default' },
    spec: {
      volumeName: 'pv-1',
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: '1Gi' } },
    },
  });
  vm.inputs.addPod({
    metadata: { name: 'a', namespace: 'default', uid: pod },
    spec: { volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'claim-1' } }] },
  });
}

/** The first failed operation of `op` from `fromIndex` on, once it is there. */
async function failedOperation(
  events: VoleEvent[],
  op: string,
  fromIndex: number,
): Promise<{ started: EventOf<'OperationStarted'>; finished: EventOf<'OperationFinished'> }> {
  const find = () => {
    for (const started of events.slice(fromIndex)) {
      if (started.type !== 'OperationStarted' || started.op !== op) continue;
      const finished = events.find(
        (e): e is EventOf<'OperationFinished'> =>
          e.type === 'OperationFinished' && e.opId === started.opId,
      );
      if (finished?.outcome === 'failed') return { started, finished };
    }
    return undefined;
  };
  await until(() => find() !== undefined, `a failed ${op}`, 10_000);
  return find()!;
}

/** The operation made no call of `call` (neither started nor with an outcome). */
function callsOf(events: VoleEvent[], opId: string): string[] {
  return events.flatMap((e) =>
    (e.type === 'CallStarted' || e.type === 'CallFailed' || e.type === 'CallSucceeded') &&
    e.opId === opId
      ? [`${e.type}:${e.call}`]
      : [],
  );
}

const rpcSamples = async (metrics: VoleMetrics, method: string) =>
  (await metrics.text())
    .split('\n')
    .filter(
      (line) => line.startsWith('csi_operations_seconds_count') && line.includes(`/${method}"`),
    );

test('a driver whose registration is gone, or whose socket is gone, is not called: a plain failure, pair untouched, no RPC metric', async () => {
  const received: string[] = [];
  let served = await serveCsiDriver({
    name: driver,
    endpoint: `unix://${socketPath}`,
    handlers: handlers(received),
    logger,
  });
  const register = () => serveRegistration({ name: driver, socketPath, registrationDir, logger });
  let registrar: Awaited<ReturnType<typeof register>> | undefined = await register();
  const unregister = () => {
    registrar?.server.forceShutdown();
    if (registrar !== undefined) rmSync(registrar.path, { force: true });
    registrar = undefined;
  };
  const plugins = new PluginManager();
  const registry = new CsiDriverRegistry({ root, plugins, logger });
  const watcher = new RegistrationWatcher({ dir: registrationDir, registry, logger });
  const vm = VolumeManager.create({
    node: 'node-1',
    plugins,
    controllerAttachDetach: false,
    logger,
  });
  const metrics = new VoleMetrics({
    source: { reader: kubeletCore.reader, world: () => vm.world },
  });
  const events: VoleEvent[] = [];
  vm.subscribe((event, world) => {
    events.push(event);
    metrics.observe(event, world);
  });
  try {
    await watcher.start();
    vm.start();
    registry.setRecorder((event) => vm.inputs.recordCsiDriver(event)); // as `vole run` does
    vm.inputs.markSourcesReady();
    assert.ok(
      events.some((e) => e.type === 'CsiDriverRegistered'),
      'registered through plugins_registry',
    );

    // The registrar stops: the driver is deregistered; its attach is not sent.
    unregister();
    await watcher.scan();
    assert.equal(events.at(-1)?.type, 'CsiDriverDeregistered');
    claimAndPod(vm);
    const attach = await failedOperation(events, 'attach', 0);
    assert.deepEqual(
      callsOf(events, attach.started.opId),
      [],
      'no call recorded for an RPC never sent',
    );
    assert.equal(received.length, 0, 'the driver got nothing');
    assert.equal(attach.finished.error?.kind, 'final');
    assert.match(
      attach.finished.error?.message ?? '',
      new RegExp(
        `^AttachVolume.Attach failed: CSI driver ${driver} is not registered: no socket in ${registrationDir}/ registers it`,
      ),
    );
    assert.doesNotMatch(attach.finished.error?.message ?? '', /Resolution note/);
    assert.equal(
      vm.world.attachments.get(volume)?.value ?? 'detached',
      'detached',
      'not attachUncertain',
    );
    assert.deepEqual(await rpcSamples(metrics, 'ControllerPublishVolume'), [], 'no RPC sample');

    // Registered again: the same pod mounts.
    registrar = await register();
    await watcher.scan();
    await vm.waitForAttachAndMount(pod, { timeoutMs: 15_000 });
    assert.deepEqual(received, ['ControllerPublishVolume', 'NodeStageVolume', 'NodePublishVolume']);
    assert.equal((await rpcSamples(metrics, 'ControllerPublishVolume')).length, 1);

    // The driver stops (its endpoint socket goes), still registered: its teardown is not sent.
    served.close();
    const before = events.length;
    vm.inputs.removePod(pod);
    const tearDown = await failedOperation(events, 'unmount', before);
    assert.deepEqual(callsOf(events, tearDown.started.opId), []);
    assert.match(
      tearDown.finished.error?.message ?? '',
      new RegExp(
        `^UnmountVolume.TearDown failed: CSI driver ${driver}'s endpoint socket ${socketPath} is gone`,
      ),
    );
    const mount = podEntry(vm.world.mounts.get(volume), pod);
    assert.equal(mount?.value, 'mounted', 'still mounted, not mountUncertain');
    assert.deepEqual(await rpcSamples(metrics, 'NodeUnpublishVolume'), []);

    // Started again: the teardown goes through, back to the detach.
    served = await serveCsiDriver({
      name: driver,
      endpoint: `unix://${socketPath}`,
      handlers: handlers(received),
      logger,
    });
    await until(() => received.includes('ControllerUnpublishVolume'), 'the detach', 15_000);
    assert.deepEqual(received.slice(3), [
      'NodeUnpublishVolume',
      'NodeUnstageVolume',
      'ControllerUnpublishVolume',
    ]);
    const uncertain = events.filter((e) => e.type === 'CallFailed' && e.error.kind === 'uncertain');
    assert.deepEqual(uncertain, [], 'nothing was ever uncertain');
  } finally {
    vm.stop();
    watcher.stop();
    registry.close();
    unregister();
    served.close();
  }
});
