/**
 * Real mounts, as root, in a private mount namespace: a pod with a disk (loop device,
 * ext4), a Memory emptyDir (tmpfs) and a hostPath volume is mounted, written to and
 * removed, and nothing is left on the host.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { VolumeManager } from '../../src/agent/volume-manager.js';
import { listLoops } from '../../src/host/loop.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { tmpfsNoswapSupported } from '../../src/host/mount.js';
import { builtinPlugins } from '../../src/plugins/builtin/index.js';
import { hostSandbox, hostTestSkipReason, until } from '../support/host.js';

const skip = hostTestSkipReason();
const { base, root } = hostSandbox('host');

test(
  'host: a pod with disk, tmpfs emptyDir and hostPath volumes: mounted, used, removed, nothing left',
  { skip },
  async () => {
    const hostDir = join(base, 'host-data');
    const vm = VolumeManager.create({
      node: 'node-1',
      plugins: builtinPlugins({ root }),
      controllerAttachDetach: false,
    });
    vm.start();
    vm.inputs.upsertObject({
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: 'pv-data' },
      spec: {
        capacity: { storage: '64Mi' },
        accessModes: ['ReadWriteOnce'],
        csi: { driver: 'disk.vole.dev', volumeHandle: 'data-1', fsType: 'ext4' },
      },
    });
    vm.inputs.upsertObject({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'data', namespace: 'default' },
      spec: { volumeName: 'pv-data' },
    });
    vm.inputs.addPod({
      metadata: { name: 'web', namespace: 'default', uid: 'uid-web' },
      spec: {
        securityContext: { fsGroup: 2000 },
        resources: { limits: { memory: '24Mi' } },
        volumes: [
          { name: 'data', persistentVolumeClaim: { claimName: 'data' } },
          { name: 'cache', emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } },
          { name: 'ram', emptyDir: { medium: 'Memory' } },
          { name: 'host', hostPath: { path: hostDir, type: 'DirectoryOrCreate' } },
        ],
      },
    });
    vm.inputs.markSourcesReady();
    await vm.waitForAttachAndMount('uid-web', { timeoutMs: 60_000 });

    const podVolumes = join(root, 'pods/uid-web/volumes');
    const dataDir = join(podVolumes, 'disk.vole.dev/pv-data');
    const cacheDir = join(podVolumes, 'kubernetes.io~empty-dir/cache');
    const hostMount = join(podVolumes, 'kubernetes.io~host-path/host');
    const table = await readMountTable();
    const at = (p: string) => table.find((m) => m.mountPoint === p);
    assert.equal(at(dataDir)?.fsType, 'ext4');
    assert.equal(at(cacheDir)?.fsType, 'tmpfs');
    assert.ok(at(cacheDir)!.superOptions.includes('size=16384k'), 'the tmpfs has its size limit');
    // No sizeLimit: the pod's memory limit bounds it, as the kubelet's tmpfs; and its pages
    // never reach swap where the kernel can say so (the kernel shows noswap among the options).
    const ram = at(join(podVolumes, 'kubernetes.io~empty-dir/ram'));
    assert.ok(ram?.superOptions.includes('size=24576k'), `the pod's limit: ${ram?.superOptions}`);
    assert.equal(ram!.superOptions.includes('noswap'), tmpfsNoswapSupported());
    assert.ok(at(hostMount), 'hostPath bound into the pod');
    assert.ok(at(join(root, 'plugins/disk.vole.dev/mounts/data-1')), 'the global device mount');

    writeFileSync(join(dataDir, 'hello.txt'), 'persisted');
    writeFileSync(join(hostMount, 'seen-by-host.txt'), 'through the bind');
    assert.equal(readFileSync(join(hostDir, 'seen-by-host.txt'), 'utf8'), 'through the bind');

    vm.inputs.removePod('uid-web');
    await until(
      () => vm.world.attachments.size === 0 && vm.world.running.size === 0,
      'teardown and detach',
    );
    assert.deepEqual(
      mountsUnder(await readMountTable(), base).map((m) => m.mountPoint),
      [],
      'no mounts left',
    );
    assert.deepEqual(
      (await listLoops()).filter((l) => l.backFile.startsWith(base)),
      [],
      'no loop devices left',
    );
    assert.deepEqual(readdirSync(join(root, 'pods')), [], 'no pod directories left');
    assert.equal(
      existsSync(join(root, 'plugins/disk.vole.dev')),
      false,
      'no global mount directories left',
    );
    assert.ok(existsSync(join(root, 'disks/data-1.img')), 'the disk image (the data) stays');
    await vm.drainAndStop();
  },
);
