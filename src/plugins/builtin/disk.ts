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
 * controller relies when an attachment elsewhere is uncertain (behaviour C3.4).
 *
 * Manifest contract: a PersistentVolume with csi {driver: disk.vole.dev, volumeHandle,
 * fsType: ext4|xfs} and capacity.storage.
 */
import { readFile, rm, symlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { replaceFile } from '../../host/atomic-writer.js';
import { HostError } from '../../host/errors.js';
import type { FsType } from '../../host/fs.js';
import { findLoopForImage } from '../../host/loop.js';
import {
  attachDisk,
  bindDeviceFile,
  detachDisk,
  growDisk,
  isDiskAttached,
  loopOfDisk,
  mountDisk,
} from '../../host/loop-disk.js';
import { mountRefs, readMountTable } from '../../host/mountinfo.js';
import { bindMount, ensureUnmounted, isMountPoint } from '../../host/mount.js';
import {
  diskImagePath,
  globalMapPath,
  pluginGlobalMountPath,
  podVolumeDevicePath,
} from '../../host/paths.js';
import type { ResolvedVolume } from '../../operations/volume-spec.js';
import {
  type AttacherOps,
  type BlockMapperOps,
  caps,
  type DeviceMounterOps,
  type PodVolumeOps,
  type VolumePlugin,
} from '../types.js';
import {
  applyFsGroup,
  type BuiltinOptions,
  makeVolumeDir,
  present,
  removeVolumeDir,
  volumeDir,
} from './common.js';

const diskDriver = 'disk.vole.dev';

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
async function refuseSecondNode(
  spec: ResolvedVolume,
  imagePath: string,
  node: string,
): Promise<void> {
  if (spec.traits.multiAttachAllowed) return;
  const holder = await readFile(holderFile(imagePath), 'utf8').catch(() => undefined);
  // Empty: left by an older version's write cut off by a crash (now replaceFile):
  // no other node is named, and the attach writes it again.
  if (holder === undefined || holder === '' || holder === node) return;
  if ((await findLoopForImage(imagePath)) === undefined) return; // detached behind our back
  throw new HostError(
    'transient',
    `${diskDriver}: ${basename(imagePath)} is attached to node ${holder}; a ReadWriteOnce disk is attached to one node at a time (detach it from ${holder} first)`,
  );
}

export function diskPlugin(opts: BuiltinOptions): VolumePlugin {
  const paths: DiskPaths = {
    image: (spec) => diskImagePath(opts.disksRoot ?? opts.root, handle(spec)),
    globalPath: (spec) => pluginGlobalMountPath(opts.root, diskDriver, handle(spec)),
  };
  const loopOf = (spec: ResolvedVolume) => loopOfDisk(paths.image(spec), diskDriver);
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
    attacher: attacher(paths),
    deviceMounter: deviceMounter(opts, paths, loopOf),
    expander: {
      async nodeExpand(spec, expandOpts) {
        await growDisk({
          image: paths.image(spec),
          device: await loopOf(spec),
          newSizeBytes: expandOpts.newSizeBytes,
          mountPath: expandOpts.deviceMountPath,
          fsType: fsTypeOf(spec),
        });
        return expandOpts.newSizeBytes;
      },
    },
    pod: podOps(opts, paths),
  };
}

interface DiskPaths {
  image(spec: ResolvedVolume): string;
  globalPath(spec: ResolvedVolume): string;
}

/** attach: the image (created sparse at the PV's capacity) on a loop device. */
function attacher(paths: DiskPaths): AttacherOps {
  return {
    async attach(spec, target) {
      if (spec.traits.sizeBytes <= 0) {
        throw new HostError(
          'final',
          `${diskDriver}: PersistentVolume of ${spec.volume} needs spec.capacity.storage (e.g. 64Mi)`,
        );
      }
      await refuseSecondNode(spec, paths.image(spec), target.node);
      const device = await attachDisk(paths.image(spec), spec.traits.sizeBytes);
      // Whole or not at all: an empty file would name no node (refuseSecondNode).
      await replaceFile(holderFile(paths.image(spec)), target.node);
      return device;
    },
    waitForAttach: (spec) => loopOfDisk(paths.image(spec), diskDriver),
    async volumesAreAttached(specs) {
      const result = new Map<string, boolean>();
      for (const spec of specs) result.set(spec.volume, await isDiskAttached(paths.image(spec)));
      return result;
    },
    async detach(spec) {
      await detachDisk(paths.image(spec));
      await rm(holderFile(paths.image(spec)), { force: true });
    },
    isAttached: (spec) => isDiskAttached(paths.image(spec)),
  };
}

/** mountDevice: format if blank and mount at the global path. */
function deviceMounter(
  opts: BuiltinOptions,
  paths: DiskPaths,
  loopOf: (spec: ResolvedVolume) => Promise<string>,
): DeviceMounterOps {
  return {
    deviceMountPath: (spec) => paths.globalPath(spec),
    async mountDevice(spec, devicePath, deviceMountPath) {
      const device = devicePath || (await loopOf(spec));
      await makeVolumeDir(opts.root, deviceMountPath);
      await mountDisk({ device, target: deviceMountPath, fsType: fsTypeOf(spec) });
    },
    async unmountDevice(_spec, deviceMountPath) {
      await removeVolumeDir(opts.root, deviceMountPath, { recursive: false });
    },
    isDeviceMounted: (_spec, deviceMountPath) => present(deviceMountPath),
    async deviceMountRefs(deviceMountPath) {
      return mountRefs(await readMountTable(), deviceMountPath);
    },
  };
}

/** setUp: bind the global path into the pod's volume directory (+ fsGroup). */
function podOps(opts: BuiltinOptions, paths: DiskPaths): PodVolumeOps {
  return {
    podVolumePath: (spec, uid) => volumeDir(opts.root, spec, uid),
    isSetUp: (spec, uid) => present(volumeDir(opts.root, spec, uid)),
    async setUp(spec, setUpOpts, target) {
      const dir = volumeDir(opts.root, spec, target.pod!);
      await makeVolumeDir(opts.root, dir);
      const global = setUpOpts.deviceMountPath || paths.globalPath(spec);
      if (!(await isMountPoint(global)))
        throw new HostError(
          'transient',
          `${diskDriver}: ${global} is not mounted; the device must be mounted first`,
        );
      if (!(await isMountPoint(dir)))
        await bindMount(global, dir, { readOnly: spec.traits.readOnly });
      if (!spec.traits.readOnly) await applyFsGroup(dir, setUpOpts.fsGroup);
    },
    async tearDown(spec, target) {
      const dir = volumeDir(opts.root, spec, target.pod!);
      await ensureUnmounted(dir);
      await removeVolumeDir(opts.root, dir, { recursive: false });
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
      await bindDeviceFile(device, path);
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
