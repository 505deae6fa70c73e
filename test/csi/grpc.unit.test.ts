/**
 * vole's CSI plugin against real gRPC servers on unix sockets (no host changes): a
 * scripted driver answering each status code to NodePublishVolume leaves the pod's mount
 * in the state docs/csi.md gives; the publish_context of ControllerPublishVolume reaches stage
 * and publish and is in the log with every RPC; and the plugin registration directory
 * registers a driver, tells it so, and deregisters it when its socket goes.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pino from 'pino';
import { VolumeManager } from '../../src/agent/volume-manager.js';
import { type CsiRequest, type Handler } from '../../src/csi/driver/common.js';
import { DriverError } from '../../src/csi/driver/errors.js';
import { serveCsiDriver } from '../../src/csi/driver/server.js';
import { noCsiHost } from '../../src/csi/host.js';
import { csiPlugin } from '../../src/csi/plugin.js';
import { CsiDriverRegistry, type DriverEvent } from '../../src/csi/registry.js';
import { GrpcTransport } from '../../src/csi/transport.js';
import { RegistrationWatcher } from '../../src/csi/watcher.js';
import type { VoleEvent } from '../../src/events/index.js';
import { PluginManager } from '../../src/plugins/manager.js';
import { UniquePodName, UniqueVolumeName } from '../../src/ids.js';
import { podEntry } from '../../src/kubelet/by-pod.js';
import { until } from '../support/host.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-csi-grpc-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const logger = pino({ level: 'silent' });
const driver = 'grpc.csi.example.com';
const caps = {
  publishUnpublish: true,
  stageUnstage: true,
  expand: false,
  singleNodeMultiWriter: false,
  maxVolumesPerNode: 0,
};

async function withDriver(
  name: string,
  handlers: Record<string, Handler>,
  body: (vm: VolumeManager, events: VoleEvent[]) => Promise<void>,
): Promise<void> {
  const socket = join(dir, `${name}.sock`);
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
  const events: VoleEvent[] = [];
  vm.subscribe((event) => void events.push(event));
  vm.start();
  vm.inputs.markSourcesReady();
  try {
    await body(vm, events);
  } finally {
    vm.stop();
    transport.close();
    served.close();
  }
}

const inlinePod = (uid: string) => ({
  metadata: { name: uid, namespace: 'default', uid },
  spec: { volumes: [{ name: 'scratch', csi: { driver, volumeHandle: 'eph' } }] },
});

test('gRPC: each status code of NodePublishVolume leaves the mount as docs/csi.md gives', async () => {
  const inProgress = [
    'CANCELLED',
    'DEADLINE_EXCEEDED',
    'UNAVAILABLE',
    'RESOURCE_EXHAUSTED',
    'ABORTED',
  ];
  const codes = [
    ...inProgress,
    'INVALID_ARGUMENT',
    'NOT_FOUND',
    'ALREADY_EXISTS',
    'FAILED_PRECONDITION',
    'INTERNAL',
    'UNKNOWN',
  ];
  for (const code of codes) {
    const handlers: Record<string, Handler> = {
      NodePublishVolume: async () => {
        throw new DriverError(code, `scripted ${code}`);
      },
    };
    await withDriver(`code-${code}`, handlers, async (vm, events) => {
      const uid = `uid-${code.toLowerCase().replaceAll('_', '-')}`;
      vm.inputs.addPod(inlinePod(uid));
      await until(
        () => events.some((e) => e.type === 'CallFailed'),
        `${code}: the failure`,
        10_000,
      );
      const failed = events.find((e) => e.type === 'CallFailed')!;
      assert.ok(failed.type === 'CallFailed');
      assert.deepEqual(
        { method: failed.rpc?.method, code: failed.rpc?.code, kind: failed.error.kind },
        {
          method: '/csi.v1.Node/NodePublishVolume',
          code,
          kind: inProgress.includes(code) ? 'uncertain' : 'final',
        },
      );
      assert.match(failed.error.message, new RegExp(`scripted ${code}`));
      const volume = UniqueVolumeName(`kubernetes.io/csi/${uid}-scratch`);
      const byPod = vm.world.mounts.get(volume);
      const state =
        (byPod === undefined ? undefined : podEntry(byPod, UniquePodName(uid)))?.value ??
        'unmounted';
      assert.equal(state, inProgress.includes(code) ? 'mountUncertain' : 'unmounted', code);
    });
  }
});

test('gRPC: publish_context from ControllerPublishVolume reaches NodeStage and NodePublish, and every RPC is logged', async () => {
  const seen: Record<string, CsiRequest> = {};
  const record =
    (rpc: string, response: object = {}): Handler =>
    async (request) => {
      seen[rpc] = request;
      return response;
    };
  const handlers = {
    ControllerPublishVolume: record('ControllerPublishVolume', {
      publish_context: { devicePath: '/dev/sdz', lun: '3' },
    }),
    NodeStageVolume: record('NodeStageVolume'),
    NodePublishVolume: record('NodePublishVolume'),
  };
  await withDriver('context', handlers, async (vm, events) => {
    vm.inputs.upsertObject({
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: 'pv-ctx' },
      spec: {
        accessModes: ['ReadWriteOncePod'],
        capacity: { storage: '1Gi' },
        mountOptions: ['noatime'],
        csi: { driver, volumeHandle: 'vol-ctx', fsType: 'xfs', volumeAttributes: { tier: 'gold' } },
      },
    });
    vm.inputs.upsertObject({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'ctx', namespace: 'default' },
      spec: {
        volumeName: 'pv-ctx',
        accessModes: ['ReadWriteOncePod'],
        resources: { requests: { storage: '1Gi' } },
      },
    });
    vm.inputs.addPod({
      metadata: { name: 'a', namespace: 'default', uid: 'uid-ctx' },
      spec: { volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'ctx' } }] },
    });
    await vm.waitForAttachAndMount('uid-ctx', { timeoutMs: 10_000 });
    assert.equal(seen.ControllerPublishVolume!.node_id, 'node-1');
    assert.deepEqual(seen.ControllerPublishVolume!.volume_context, { tier: 'gold' });
    for (const rpc of ['NodeStageVolume', 'NodePublishVolume'])
      assert.deepEqual(seen[rpc]!.publish_context, { devicePath: '/dev/sdz', lun: '3' }, rpc);
    const capability = seen.NodeStageVolume!.volume_capability!;
    assert.deepEqual(capability.mount, {
      fs_type: 'xfs',
      mount_flags: ['noatime'],
      volume_mount_group: '',
    });
    assert.equal(capability.access_mode?.mode, 'SINGLE_NODE_WRITER'); // no SINGLE_NODE_MULTI_WRITER
    assert.equal(
      seen.NodePublishVolume!.staging_target_path,
      seen.NodeStageVolume!.staging_target_path,
    );
    assert.match(
      seen.NodePublishVolume!.target_path!,
      /pods\/uid-ctx\/volumes\/kubernetes.io~csi\/data\/mount$/,
    );
    const rpcs = events.flatMap((e) =>
      e.type === 'CallSucceeded' && e.rpc !== undefined ? [e.rpc.method] : [],
    );
    assert.deepEqual(rpcs, [
      '/csi.v1.Controller/ControllerPublishVolume',
      '/csi.v1.Node/NodeStageVolume',
      '/csi.v1.Node/NodePublishVolume',
    ]);
  });
});

test('gRPC: a socket in plugins_registry registers its driver, is told so, and deregisters when it goes', async () => {
  const registrationDir = join(dir, 'plugins_registry');
  const notified: boolean[] = [];
  const served = await serveCsiDriver({
    name: driver,
    endpoint: `unix://${join(dir, 'registered.sock')}`,
    handlers: {
      GetPluginInfo: async () => ({ name: driver, vendor_version: '9' }),
      GetPluginCapabilities: async () => ({ capabilities: [] }),
      NodeGetInfo: async () => ({ node_id: 'n-7', max_volumes_per_node: '4' }),
      NodeGetCapabilities: async () => ({
        capabilities: [{ rpc: { type: 'STAGE_UNSTAGE_VOLUME' } }],
      }),
    },
    registrationDir,
    logger: {
      ...logger,
      info: (fields: { registered?: boolean }) => void notified.push(fields.registered === true),
    } as never,
  });
  const plugins = new PluginManager();
  const registry = new CsiDriverRegistry({ root: dir, plugins, logger });
  const recorded: DriverEvent[] = [];
  registry.setRecorder((event) => void recorded.push(event));
  const watcher = new RegistrationWatcher({ dir: registrationDir, registry, logger });
  try {
    await watcher.start();
    const registered = recorded.find((e) => e.type === 'CsiDriverRegistered');
    assert.ok(registered?.type === 'CsiDriverRegistered');
    assert.equal(registered.nodeId, 'n-7');
    assert.deepEqual(registered.caps.csi, {
      ...caps,
      publishUnpublish: false,
      maxVolumesPerNode: 4,
      createDelete: false,
      controllerExpand: false,
    });
    assert.equal(plugins.find(driver)?.caps.attachable, false);
    await until(() => notified.includes(true), 'NotifyRegistrationStatus', 5_000);
    served.close();
    await watcher.scan();
    assert.equal(recorded.at(-1)?.type, 'CsiDriverDeregistered');
  } finally {
    watcher.stop();
    registry.close();
    served.close();
  }
});
