/**
 * disk.vole.dev: an attachable, device-mountable "disk" backed by image files.
 *
 *   attach        image <root>/disks/<handle>.img (sparse, PV capacity; grown, never shrunk)
 *                 + a loop device over it → devicePath /dev/loopN
 *   waitForAttach the loop device over that image is there
 *   mountDevice   format if blank (ext4 or xfs) + mount at the global path
 *                 <root>/plugins/disk.vole.dev/mounts/<handle>
 *   setUp         bind the global path into the pod's volume directory (+ fsGroup)
 *   tearDown, unmountDevice, detach undo them; deviceMountRefs come from the mount table.
 *
 * Like shared storage, the disk knows which node holds it (`<image>.attached-to`, written
 * on attach, removed on detach) and refuses to attach a ReadWriteOnce disk to a second
 * node while the first still holds it: the storage side of RWO exclusivity, on which the
 * controller relies when an attachment elsewhere is uncertain (spec §3.4).
 *
 * Manifest contract: a PersistentVolume with csi {driver: disk.vole.dev, volumeHandle,
 * fsType: ext4|xfs} and capacity.storage.
 */
import { readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { HostError } from '../../host/exec.js';
import { ensureImage, formatAndMount, type FsType, resizeFs } from '../../host/fs.js';
import { attachLoop, detachLoopForImage, findLoopForImage, resizeLoop } from '../../host/loop.js';
import { mountRefs, readMountTable } from '../../host/mountinfo.js';
import { bindMount, ensureUnmounted, isMountPoint } from '../../host/mount.js';
import {
  diskImagePath,
  globalMapPath,
  pluginGlobalMountPath,
  podVolumeDevicePath,
} from '../../host/paths.js';
import type { ResolvedVolume } from '../../world/types.js';
import { type BlockMapperOps, caps, type VolumePlugin } from '../types.js';
import {
  applyFsGroup,
  type BuiltinOptions,
  makeVolumeDir,
  present,
  removeVolumeDir,
  volumeDir,
} from './common.js';

export const diskDriver = 'disk.vole.dev';

function handle(spec: ResolvedVolume): string {
  if (spec.source.kind !== 'csi' || spec.source.volumeHandle === '') {
    throw new HostError(
      'final',
      `${diskDriver}: volume ${spec.volume} has no csi.volumeHandle; set one (it names the disk image)`,
    );
  }
  return spec.source.volumeHandle;
}

function fsTypeOf(spec: ResolvedVolume): FsType {
  const fsType = spec.source.kind === 'csi' ? spec.source.fsType || 'ext4' : 'ext4';
  if (fsType !== 'ext4' && fsType !== 'xfs') {
    throw new HostError(
      'final',
      `${diskDriver}: fsType "${fsType}" is not supported; use ext4 or xfs`,
    );
  }
  return fsType;
}

const holderFile = (imagePath: string) => `${imagePath}.attached-to`;

/** A ReadWriteOnce disk still attached (a loop device exists) for another node is refused. */
async function refuseSecondNode(spec: ResolvedVolume, imagePath: string, node: string): Promise<void> {
  if (spec.multiAttachAllowed) return;
  const holder = await readFile(holderFile(imagePath), 'utf8').catch(() => undefined);
  if (holder === undefined || holder === node) return;
  if ((await findLoopForImage(imagePath)) === undefined) return; // detached behind our back
  throw new HostError(
    'transient',
    `${diskDriver}: ${basename(imagePath)} is attached to node ${holder}; a ReadWriteOnce disk is attached to one node at a time (detach it from ${holder} first)`,
  );
}

export function diskPlugin(opts: BuiltinOptions): VolumePlugin {
  const image = (spec: ResolvedVolume) => diskImagePath(opts.disksRoot ?? opts.root, handle(spec));
  const globalPath = (spec: ResolvedVolume) =>
    pluginGlobalMountPath(opts.root, diskDriver, handle(spec));
  const loopOf = async (spec: ResolvedVolume) => {
    const device = await findLoopForImage(image(spec));
    if (device === undefined)
      throw new HostError(
        'transient',
        `${diskDriver}: ${image(spec)} is not attached to a loop device yet`,
      );
    return device;
  };
  return {
    name: diskDriver,
    caps: caps(diskDriver, {
      attachable: true,
      deviceMountable: true,
      blockMappable: true,
      nodeExpandable: true,
      requiresFSResize: true,
    }),
    blockMapper: blockMapper(opts, loopOf),
    attacher: {
      async attach(spec, target) {
        if (spec.sizeBytes <= 0) {
          throw new HostError(
            'final',
            `${diskDriver}: PersistentVolume of ${spec.volume} needs spec.capacity.storage (e.g. 64Mi)`,
          );
        }
        await refuseSecondNode(spec, image(spec), target.node);
        await ensureImage(image(spec), spec.sizeBytes);
        const { device } = await attachLoop(image(spec));
        await writeFile(holderFile(image(spec)), target.node);
        return device;
      },
      waitForAttach: (spec) => loopOf(spec),
      async volumesAreAttached(specs) {
        const result = new Map<string, boolean>();
        for (const spec of specs)
          result.set(spec.volume, (await findLoopForImage(image(spec))) !== undefined);
        return result;
      },
      async detach(spec) {
        await detachLoopForImage(image(spec));
        await rm(holderFile(image(spec)), { force: true });
      },
      isAttached: async (spec) => (await findLoopForImage(image(spec))) !== undefined,
    },
    deviceMounter: {
      deviceMountPath: (spec) => globalPath(spec),
      async mountDevice(spec, devicePath, deviceMountPath) {
        const device = devicePath || (await loopOf(spec));
        await makeVolumeDir(opts.root, deviceMountPath);
        if (await isMountPoint(deviceMountPath)) return; // idempotent: mounted before a crash
        await formatAndMount({ device, target: deviceMountPath, fsType: fsTypeOf(spec) });
      },
      async unmountDevice(_spec, deviceMountPath) {
        await removeVolumeDir(opts.root, deviceMountPath, { recursive: false });
      },
      isDeviceMounted: (_spec, deviceMountPath) => present(deviceMountPath),
      async deviceMountRefs(deviceMountPath) {
        return mountRefs(await readMountTable(), deviceMountPath);
      },
    },
    expander: {
      async nodeExpand(spec, expandOpts) {
        const { grown } = await ensureImage(image(spec), expandOpts.newSizeBytes);
        const device = await loopOf(spec);
        if (grown || (await stat(image(spec))).size === expandOpts.newSizeBytes)
          await resizeLoop(device);
        if (expandOpts.deviceMountPath !== '')
          await resizeFs({ device, mountPath: expandOpts.deviceMountPath, fsType: fsTypeOf(spec) });
        return expandOpts.newSizeBytes;
      },
    },
    pod: {
      podVolumePath: (spec, uid) => volumeDir(opts.root, spec, uid),
      isSetUp: (spec, uid) => present(volumeDir(opts.root, spec, uid)),
      async setUp(spec, setUpOpts, target) {
        const dir = volumeDir(opts.root, spec, target.pod!);
        await makeVolumeDir(opts.root, dir);
        const global = setUpOpts.deviceMountPath || globalPath(spec);
        if (!(await isMountPoint(global)))
          throw new HostError(
            'transient',
            `${diskDriver}: ${global} is not mounted; the device must be mounted first`,
          );
        if (!(await isMountPoint(dir))) await bindMount(global, dir, { readOnly: spec.readOnly });
        if (!spec.readOnly) await applyFsGroup(dir, setUpOpts.fsGroup);
      },
      async tearDown(spec, target) {
        const dir = volumeDir(opts.root, spec, target.pod!);
        await ensureUnmounted(dir);
        await removeVolumeDir(opts.root, dir, { recursive: false });
      },
    },
  };
}

/**
 * Block mode: the global map path is a directory holding a `dev` link to the loop device
 * (for people and tools); each pod gets the device node bound onto a file at its device
 * path (`<root>/pods/<uid>/volumeDevices/disk.vole.dev/<pv>`), which the pod reads and
 * writes as a raw block device.
 */
function blockMapper(
  opts: BuiltinOptions,
  loopOf: (spec: ResolvedVolume) => Promise<string>,
): BlockMapperOps {
  const globalMapPathOf = (spec: ResolvedVolume) =>
    globalMapPath(opts.root, diskDriver, handle(spec));
  const podPath = (spec: ResolvedVolume, uid: string) =>
    podVolumeDevicePath(opts.root, uid, diskDriver, spec.innerVolumeSpecName);
  return {
    globalMapPath: globalMapPathOf,
    podDevicePath: podPath,
    async setUpDevice(spec, devicePath, globalMapPath) {
      const device = devicePath || (await loopOf(spec));
      await makeVolumeDir(opts.root, globalMapPath);
      const link = join(globalMapPath, 'dev');
      await rm(link, { force: true });
      await symlink(device, link);
    },
    async mapPodDevice(spec, devicePath, _globalMapPath, target) {
      const device = devicePath || (await loopOf(spec));
      const path = podPath(spec, target.pod!);
      await makeVolumeDir(opts.root, dirname(path));
      if (!(await present(path))) await writeFile(path, '');
      if (!(await isMountPoint(path))) await bindMount(device, path);
    },
    async unmapPodDevice(spec, target) {
      const path = podPath(spec, target.pod!);
      await ensureUnmounted(path);
      await removeVolumeDir(opts.root, path, { recursive: false });
    },
    async tearDownDevice(_spec, globalMapPath) {
      await rm(join(globalMapPath, 'dev'), { force: true });
      await removeVolumeDir(opts.root, globalMapPath, { recursive: false });
    },
    async deviceMapRefs(spec) {
      // Pods' device paths are bind mounts of the device node (root `/loopN` on devtmpfs).
      const device = await findLoopForImage(diskImagePath(opts.root, handle(spec)));
      if (device === undefined) return [];
      const root = `/${basename(device)}`;
      return (await readMountTable())
        .filter((m) => m.root === root && m.mountPoint.startsWith(join(opts.root, 'pods')))
        .map((m) => m.mountPoint);
    },
  };
}
