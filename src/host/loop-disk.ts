/**
 * A loop disk: a sparse image file attached to a loop device, formatted and mounted, grown
 * online. Shared by the built-in `disk.vole.dev` plugin and the `disk.csi.vole.dev` CSI
 * driver (`vole csi-driver`), so both do exactly the same things to the host. Every step
 * is idempotent: the one to repeat after a crash.
 */
import { stat, writeFile, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { HostError } from './errors.js';
import { ensureImage, formatAndMount, type FsType, resizeFs } from './fs.js';
import { attachLoop, detachLoopForImage, findLoopForImage, resizeLoop } from './loop.js';
import { bindMount, isMountPoint } from './mount.js';

/** Creates the image when missing (sparse, `sizeBytes`), grows it when smaller, attaches it. */
export async function attachDisk(image: string, sizeBytes: number): Promise<string> {
  await ensureImage(image, sizeBytes);
  return (await attachLoop(image)).device;
}

/** The loop device over the image; `transient` while there is none yet. */
export async function loopOfDisk(image: string, who: string): Promise<string> {
  const device = await findLoopForImage(image);
  if (device === undefined)
    throw new HostError('transient', `${who}: ${image} is not attached to a loop device yet`);
  return device;
}

export async function isDiskAttached(image: string): Promise<boolean> {
  return (await findLoopForImage(image)) !== undefined;
}

export async function detachDisk(image: string): Promise<void> {
  await detachLoopForImage(image);
}

/** Formats the device when blank and mounts it at `target` (a no-op when mounted). */
export async function mountDisk(opts: {
  device: string;
  target: string;
  fsType: FsType;
  options?: readonly string[];
}): Promise<void> {
  await mkdir(opts.target, { recursive: true });
  if (await isMountPoint(opts.target)) return; // idempotent: mounted before a crash
  await formatAndMount(opts);
}

/**
 * Grows the image to `newSizeBytes`, the loop device with it, and the filesystem mounted
 * at `mountPath` (online; none for a Block volume). ext4 online growth needs
 * CAP_SYS_RESOURCE: its refusal is a `final` error saying so (resizeFs).
 */
export async function growDisk(opts: {
  image: string;
  device: string;
  newSizeBytes: number;
  mountPath: string;
  fsType: FsType;
}): Promise<void> {
  const { grown } = await ensureImage(opts.image, opts.newSizeBytes);
  if (grown || (await stat(opts.image)).size === opts.newSizeBytes) await resizeLoop(opts.device);
  if (opts.mountPath !== '')
    await resizeFs({ device: opts.device, mountPath: opts.mountPath, fsType: opts.fsType });
}

/** Binds a device node onto a file at `path` (made when missing): a Block volume's target. */
export async function bindDeviceFile(device: string, path: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o750 });
  if ((await stat(path).catch(() => undefined)) === undefined) await writeFile(path, '');
  if (!(await isMountPoint(path))) await bindMount(device, path);
}
