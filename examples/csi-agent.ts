/**
 * The CSI example of docs/library.md: an agent that mounts a pod's CSI volume through
 * `vole/csi`. Given a driver's endpoint (`vole csi-driver --endpoint unix:///…/csi.sock`
 * serves one), it asks the driver what it is, attaches, stages and publishes the disk PV's
 * volume for a pod, writes a file through the mount, and tears it all down. Given `fake`,
 * it drives `vole/testing`'s scripted driver instead, which mounts nothing (no root needed).
 *
 *   npx tsx examples/csi-agent.ts ENDPOINT|fake ROOT
 *
 * test/package/consumer.*.test.ts run it from the packed package, test/docs.unit.test.ts
 * from the sources.
 */
// #region csi-library
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PluginManager, RealClock, VolumeManager } from 'vole';
import { CsiDriverRegistry, csiPlugin, noCsiHost } from 'vole/csi';
import { FakeCsiDriver } from 'vole/testing';

const [endpoint = 'fake', root = '/var/lib/vole'] = process.argv.slice(2);
const plugins = new PluginManager();
const registry = new CsiDriverRegistry({ root, plugins }); // serves each driver it is given
let driver = 'disk.csi.vole.dev';
if (endpoint === 'fake') {
  const caps = { publishUnpublish: true, stageUnstage: true, expand: false };
  const transport = new FakeCsiDriver({ name: driver, clock: new RealClock(), journal: [] });
  const handle = { name: driver, transport, nodeId: 'node-1' };
  const csi = { ...caps, singleNodeMultiWriter: false, maxVolumesPerNode: 0 };
  plugins.register(csiPlugin({ ...handle, caps: csi }, { root, host: noCsiHost, nowMs: Date.now }));
} else {
  driver = (await registry.add(endpoint, 'flag')).name; // NodeGetInfo, capabilities
}

const vm = VolumeManager.create({ node: 'node-1', plugins, controllerAttachDetach: false });
vm.start();
registry.setRecorder((event) => vm.inputs.recordCsiDriver(event)); // the log knows the driver
vm.inputs.upsertObject({
  kind: 'PersistentVolume',
  metadata: { name: 'pv-data' },
  spec: {
    capacity: { storage: '64Mi' },
    accessModes: ['ReadWriteOnce'],
    csi: { driver, volumeHandle: 'data', fsType: 'ext4', volumeAttributes: { size: '64Mi' } },
  },
});
vm.inputs.upsertObject({
  kind: 'PersistentVolumeClaim',
  metadata: { name: 'data', namespace: 'default' },
  spec: { volumeName: 'pv-data', accessModes: ['ReadWriteOnce'] },
  status: { phase: 'Bound', capacity: { storage: '64Mi' } },
});
vm.inputs.addPod({
  metadata: { name: 'web', namespace: 'default', uid: 'uid-web' },
  spec: {
    containers: [{ name: 'c', volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
    volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }],
  },
});
vm.inputs.markSourcesReady();
await vm.waitForAttachAndMount('uid-web', { timeoutMs: 60_000 });
console.log('mounted:', [...vm.status.getMountedVolumesForPod('uid-web').keys()]);

const target = join(root, 'pods/uid-web/volumes/kubernetes.io~csi/data/mount');
if (existsSync(target)) {
  writeFileSync(join(target, 'hello.txt'), 'written through vole/csi\n');
  console.log('read back:', readFileSync(join(target, 'hello.txt'), 'utf8').trim());
}

vm.inputs.removePod('uid-web');
await vm.waitForUnmount('uid-web', { timeoutMs: 60_000 });
// Unstaged and detached too: the node no longer has the volume in use.
await vm.waitUntil(() => vm.status.getVolumesInUse().length === 0, { what: 'the detach' });
console.log('in use:', vm.status.getVolumesInUse()); // []
await vm.drainAndStop();
registry.close();
// #endregion csi-library
