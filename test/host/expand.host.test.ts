/**
 * Volume expansion for real (behaviour K4.13): a PV's capacity grows while a pod uses it; the
 * disk image, the loop device and the filesystem grow online. XFS grows and df shows it;
 * ext4 cannot grow online here (no CAP_SYS_RESOURCE), and says so clearly.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { statfsSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { VolumeManager } from '../../src/agent/volume-manager.js';
import { UniqueVolumeName } from '../../src/ids.js';
import { builtinPlugins } from '../../src/plugins/builtin/index.js';
import { hostSandbox, hostTestSkipReason, until } from '../support/host.js';

const skip = hostTestSkipReason();
const { base, root } = hostSandbox('expand');

const MiB = 1024 * 1024;

function disk(handle: string, fsType: string, size: string) {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolume' as const,
    metadata: { name: `pv-${handle}` },
    spec: {
      capacity: { storage: size },
      accessModes: ['ReadWriteOnce'],
      csi: { driver: 'disk.vole.dev', volumeHandle: handle, fsType },
    },
  };
}

async function mountedPod(vm: VolumeManager, handle: string, fsType: string, size: string) {
  vm.inputs.upsertObject(disk(handle, fsType, size));
  vm.inputs.upsertObject({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: handle, namespace: 'default' },
    spec: { volumeName: `pv-${handle}` },
    status: { phase: 'Bound', capacity: { storage: size } },
  });
  vm.inputs.addPod({
    metadata: { name: handle, namespace: 'default', uid: `uid-${handle}` },
    spec: { volumes: [{ name: 'data', persistentVolumeClaim: { claimName: handle } }] },
  });
  await vm.waitForAttachAndMount(`uid-${handle}`, { timeoutMs: 60_000 });
  return join(root, `pods/uid-${handle}/volumes/disk.vole.dev/pv-${handle}`);
}

const noXfs = spawnSync('sh', ['-c', 'command -v mkfs.xfs']).status !== 0;

test(
  'host: a mounted XFS volume grows from 300 MiB to 400 MiB while in use, and df shows it',
  { skip: skip || (noXfs && 'mkfs.xfs is not installed') },
  async () => {
    const vm = VolumeManager.create({
      node: 'node-1',
      plugins: builtinPlugins({ root }),
      controllerAttachDetach: false,
    });
    vm.start();
    vm.inputs.markSourcesReady();
    const dir = await mountedPod(vm, 'grow-xfs', 'xfs', '300Mi');
    const before = statfsSync(dir);
    assert.ok(before.blocks * before.bsize < 310 * MiB);
    vm.inputs.upsertObject(disk('grow-xfs', 'xfs', '400Mi'));
    await until(
      () =>
        vm.world.attachments.get(UniqueVolumeName('disk.vole.dev/grow-xfs'))?.context.sizeBytes ===
        400 * MiB,
      'the expansion',
    );
    const after = statfsSync(dir);
    // XFS keeps part of the device for its log: compare the growth, not the absolute size.
    const grownMiB = (after.blocks * after.bsize - before.blocks * before.bsize) / MiB;
    assert.ok(grownMiB > 95 && grownMiB <= 100, `df grew by ${grownMiB} MiB`);
    assert.deepEqual(
      [...vm.status.getMountedVolumesForPod('uid-grow-xfs').keys()],
      ['data'],
      'still mounted',
    );
    await vm.drainAndStop();
  },
);

test(
  'host: growing a mounted ext4 without CAP_SYS_RESOURCE fails with a clear error and keeps the pod mounted',
  { skip },
  async () => {
    const vm = VolumeManager.create({
      node: 'node-1',
      plugins: builtinPlugins({ root }),
      controllerAttachDetach: false,
    });
    vm.start();
    vm.inputs.markSourcesReady();
    await mountedPod(vm, 'grow-ext4', 'ext4', '64Mi');
    vm.inputs.upsertObject(disk('grow-ext4', 'ext4', '128Mi'));
    const volume = UniqueVolumeName('disk.vole.dev/grow-ext4');
    await until(
      () =>
        vm.world.lastErrors.has(volume) ||
        vm.world.attachments.get(volume)?.context.sizeBytes === 128 * MiB,
      'the expansion attempt',
    );
    const grown = vm.world.attachments.get(volume)?.context.sizeBytes === 128 * MiB;
    if (!grown) {
      assert.match(
        vm.world.lastErrors.get(volume)!.message,
        /NodeExpandVolume\.NodeExpandVolume failed: resize2fs [\s\S]*Permission denied[\s\S]*CAP_SYS_RESOURCE[\s\S]*use fsType xfs/,
      );
    }
    assert.deepEqual(
      [...vm.status.getMountedVolumesForPod('uid-grow-ext4').keys()],
      ['data'],
      'still mounted',
    );
    await vm.drainAndStop();
  },
);
