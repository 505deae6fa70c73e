/** A Block volume for real: a pod writes raw bytes to its device path; they are on the disk. */
import assert from 'node:assert/strict';
import { closeSync, existsSync, openSync, readdirSync, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { VolumeManager } from '../../src/agent/volume-manager.js';
import { listLoops } from '../../src/host/loop.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { builtinPlugins } from '../../src/plugins/builtin/index.js';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';

const skip = hostTestSkipReason();
const { base, root } = hostSandbox('block');

test(
  'host: a pod writes to a raw Block volume; unmapped and detached, the bytes stay on the disk',
  { skip },
  async () => {
    const vm = VolumeManager.create({
      node: 'node-1',
      plugins: builtinPlugins({ root }),
      controllerAttachDetach: false,
    });
    vm.start();
    vm.inputs.upsertObject({
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: 'pv-raw' },
      spec: {
        capacity: { storage: '16Mi' },
        accessModes: ['ReadWriteOnce'],
        volumeMode: 'Block',
        csi: { driver: 'disk.vole.dev', volumeHandle: 'raw-1' },
      },
    });
    vm.inputs.upsertObject({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'raw', namespace: 'default' },
      spec: { volumeName: 'pv-raw', volumeMode: 'Block' },
    });
    vm.inputs.addPod({
      metadata: { name: 'db', namespace: 'default', uid: 'uid-db' },
      spec: {
        containers: [{ name: 'db', volumeDevices: [{ name: 'raw', devicePath: '/dev/xvda' }] }],
        volumes: [{ name: 'raw', persistentVolumeClaim: { claimName: 'raw' } }],
      },
    });
    vm.inputs.markSourcesReady();
    await vm.waitForAttachAndMount('uid-db', { timeoutMs: 60_000 });
    const devicePath = join(root, 'pods/uid-db/volumeDevices/disk.vole.dev/pv-raw');
    const fd = openSync(devicePath, 'r+');
    const message = Buffer.from('vole block volume: raw bytes at offset 1 MiB');
    writeSync(fd, message, 0, message.length, 1024 * 1024);
    closeSync(fd);
    assert.ok(
      existsSync(join(root, 'plugins/disk.vole.dev/volumeDevices/raw-1/dev')),
      'the global map path links the device',
    );

    vm.inputs.removePod('uid-db');
    const deadline = Date.now() + 30_000;
    while (vm.world.attachments.size > 0 || vm.world.running.size > 0) {
      assert.ok(Date.now() < deadline, 'teardown in time');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    assert.deepEqual(mountsUnder(await readMountTable(), base), [], 'no mounts left');
    assert.deepEqual(
      (await listLoops()).filter((l) => l.backFile.startsWith(base)),
      [],
      'no loop device left',
    );
    assert.deepEqual(readdirSync(join(root, 'pods')), []);
    const image = openSync(join(root, 'disks/raw-1.img'), 'r');
    const back = Buffer.alloc(message.length);
    readSync(image, back, 0, back.length, 1024 * 1024);
    closeSync(image);
    assert.equal(back.toString(), message.toString(), 'the bytes are on the disk image');
    await vm.drainAndStop();
  },
);
