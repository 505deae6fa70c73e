/**
 * The host layer: the one place where vole touches mounts, loop devices and filesystems.
 * Plugins take a `Host` so that tests and simulations can pass a fake and so that every
 * host effect can be observed in one place; `defaultHost` is the real machine.
 */
import * as fs from './fs.js';
import * as loop from './loop.js';
import * as mountCommands from './mount.js';
import * as mountinfo from './mountinfo.js';
import * as paths from './paths.js';
import type { MountEntry } from './mountinfo.js';
import type { LoopDevice } from './loop.js';
import type { MountRequest } from './mount.js';
import type { DeviceFormat, FsType } from './fs.js';

export * from './errors.js';
export * from './fs.js';
export * from './limits.js';
export * from './loop.js';
export * from './mount.js';
export * from './mountinfo.js';
export * from './paths.js';

/** Every effect the host layer has, as one object (see each function for its contract). */
export interface Host {
  // The mount table (mountinfo.ts)
  readMountTable(): Promise<MountEntry[]>;
  isMountPoint(path: string): Promise<boolean>;
  mountRefs(path: string): Promise<string[]>;
  mountsUnder(dir: string): Promise<MountEntry[]>;
  // mount(8) and umount(8) (mount.ts)
  mount(req: MountRequest): Promise<void>;
  umount(target: string, opts?: { readonly lazy?: boolean }): Promise<void>;
  bindMount(source: string, target: string, opts?: { readonly readOnly?: boolean }): Promise<void>;
  tmpfs(target: string, opts?: { readonly sizeBytes?: number | undefined }): Promise<void>;
  ensureMounted(req: MountRequest): Promise<{ readonly kind: 'mounted' | 'alreadyMounted' }>;
  ensureUnmounted(
    target: string,
    opts?: { readonly lazy?: boolean },
  ): Promise<{ readonly unmountCount: number }>;
  // Loop devices (loop.ts)
  attachLoop(imagePath: string): Promise<{ readonly device: string }>;
  detachLoop(device: string): Promise<{ readonly kind: 'detached' | 'alreadyDetached' }>;
  findLoopForImage(imagePath: string): Promise<string | undefined>;
  listLoops(): Promise<LoopDevice[]>;
  resizeLoop(device: string): Promise<void>;
  // Filesystems and images (fs.ts)
  probeDevice(device: string): Promise<DeviceFormat>;
  isBlank(device: string): Promise<boolean>;
  mkfs(device: string, fsType: FsType): Promise<void>;
  formatAndMount(opts: {
    readonly device: string;
    readonly target: string;
    readonly fsType: FsType;
    readonly options?: readonly string[];
  }): Promise<{ readonly formatted: boolean }>;
  ensureImage(
    path: string,
    sizeBytes: number,
  ): Promise<{ readonly created: boolean; readonly grown: boolean }>;
  resizeFs(opts: {
    readonly device: string;
    readonly mountPath?: string;
    readonly fsType: FsType;
  }): Promise<void>;
  fsSizeBytes(mountPath: string): Promise<number>;
  // Path safety that reads the filesystem (paths.ts; the layout functions are pure)
  assertNoSymlinkEscape(root: string, path: string): Promise<string>;
  resolveInside(root: string, relativePath: string): Promise<string>;
}

/** The real host: the functions of this module, bound into one object. */
export const defaultHost: Host = Object.freeze({
  readMountTable: mountinfo.readMountTable,
  isMountPoint: mountinfo.isMountPoint,
  mountRefs: (path: string) => mountinfo.mountRefs(path),
  mountsUnder: (dir: string) => mountinfo.mountsUnder(dir),
  mount: mountCommands.mount,
  umount: mountCommands.umount,
  bindMount: mountCommands.bindMount,
  tmpfs: mountCommands.tmpfs,
  ensureMounted: mountCommands.ensureMounted,
  ensureUnmounted: mountCommands.ensureUnmounted,
  attachLoop: loop.attachLoop,
  detachLoop: loop.detachLoop,
  findLoopForImage: loop.findLoopForImage,
  listLoops: loop.listLoops,
  resizeLoop: loop.resizeLoop,
  probeDevice: fs.probeDevice,
  isBlank: fs.isBlank,
  mkfs: fs.mkfs,
  formatAndMount: fs.formatAndMount,
  ensureImage: fs.ensureImage,
  resizeFs: fs.resizeFs,
  fsSizeBytes: fs.fsSizeBytes,
  assertNoSymlinkEscape: paths.assertNoSymlinkEscape,
  resolveInside: paths.resolveInside,
});
