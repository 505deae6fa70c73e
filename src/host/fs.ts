/**
 * Filesystems on devices and image files: the kubelet's safe format-and-mount (format only
 * a blank device), sparse images that grow and never shrink, filesystem growth, sizes.
 */
import { mkdir, open, stat, statfs, truncate } from 'node:fs/promises';
import { dirname, isAbsolute } from 'node:path';
import { HostError } from './errors.js';
import { failed, run, runOk } from './exec.js';
import { fsCommandTimeoutMs } from './limits.js';
import { ensureMounted } from './mount.js';
import { isMountPoint } from './mountinfo.js';

export type FsType = 'ext4' | 'xfs';

/** What blkid finds on a device. */
export type DeviceFormat =
  | { readonly kind: 'blank' }
  | { readonly kind: 'filesystem'; readonly fsType: string }
  | { readonly kind: 'partitionTable'; readonly ptType: string }
  /** Several signatures that contradict each other (blkid exit 8), or one without a type. */
  | { readonly kind: 'unknownSignature' };

/**
 * Probes the device with `blkid -p` (low-level, no cache). Exit 2 means no signature at all:
 * blank — but blkid also exits 2, silently, for a path that does not exist, so the device
 * (or image file) must exist first (`transient` otherwise: it may not be attached yet).
 * Unlike the kubelet, a signature without a TYPE is not taken for blank.
 */
export async function probeDevice(device: string): Promise<DeviceFormat> {
  const node = await stat(device).catch(() => undefined);
  if (node === undefined || !(node.isBlockDevice() || node.isFile())) {
    throw new HostError(
      'transient',
      `${device} is not a block device or image file; attach the volume before probing it`,
    );
  }
  const args = ['-p', '-o', 'export', '-s', 'TYPE', '-s', 'PTTYPE', '--', device];
  const result = await run('blkid', args);
  if (result.code === 2) return { kind: 'blank' };
  if (result.code === 8) return { kind: 'unknownSignature' };
  if (result.code !== 0)
    throw failed('blkid', args, result, { kind: 'transient', fix: `check that ${device} exists` });
  const lines = result.stdout.split('\n');
  const value = (key: string) =>
    lines.find((line) => line.startsWith(`${key}=`))?.slice(key.length + 1);
  const ptType = value('PTTYPE');
  if (ptType !== undefined) return { kind: 'partitionTable', ptType };
  const fsType = value('TYPE');
  return fsType === undefined ? { kind: 'unknownSignature' } : { kind: 'filesystem', fsType };
}

/** Whether the device holds no signature at all (no filesystem, no partition table). */
export async function isBlank(device: string): Promise<boolean> {
  return (await probeDevice(device)).kind === 'blank';
}

function describeFormat(format: DeviceFormat): string {
  switch (format.kind) {
    case 'blank':
      return 'nothing';
    case 'filesystem':
      return `a ${format.fsType} filesystem`;
    case 'partitionTable':
      return `a ${format.ptType} partition table`;
    case 'unknownSignature':
      return 'a signature blkid cannot name';
  }
}

const mkfsArgs: Record<FsType, (device: string) => string[]> = {
  // -F: mke2fs asks before formatting a whole device; -m0: no blocks reserved for root,
  // which a volume has no use for (as the kubelet formats).
  ext4: (device) => ['-F', '-q', '-m0', '--', device],
  xfs: (device) => ['-q', '--', device],
};

/**
 * Makes a filesystem on a blank device. Refuses (`final`) a device holding anything, so a
 * wrong device path can never destroy data; a failed mkfs is `uncertain` (it may have
 * written part of the filesystem).
 */
export async function mkfs(device: string, fsType: FsType): Promise<void> {
  const format = await probeDevice(device);
  if (format.kind !== 'blank') {
    throw new HostError(
      'final',
      `refusing to format ${device}: it holds ${describeFormat(format)}; vole formats only ` +
        'blank devices — wipe it by hand (wipefs -a) if its data is really not needed',
    );
  }
  const args = mkfsArgs[fsType](device);
  const result = await run(`mkfs.${fsType}`, args, { timeoutMs: fsCommandTimeoutMs });
  if (result.code === 0) return;
  if (/must be larger than/.test(result.stderr)) {
    throw failed(`mkfs.${fsType}`, args, result, {
      kind: 'final',
      fix: 'make the volume bigger (xfs needs 300 MiB), or use ext4',
    });
  }
  throw failed(`mkfs.${fsType}`, args, result, {
    kind: 'uncertain',
    fix: `check ${device} with blkid -p before retrying`,
  });
}

/**
 * The kubelet's safe format-and-mount: formats the device only when it is blank, refuses
 * one holding another filesystem or a partition table (`final`), makes the target directory
 * and mounts (ensureMounted, so a repeat after a crash is a no-op).
 */
export async function formatAndMount(opts: {
  readonly device: string;
  readonly target: string;
  readonly fsType: FsType;
  readonly options?: readonly string[];
}): Promise<{ readonly formatted: boolean }> {
  const format = await probeDevice(opts.device);
  const fits =
    format.kind === 'blank' || (format.kind === 'filesystem' && format.fsType === opts.fsType);
  if (!fits) {
    throw new HostError(
      'final',
      `${opts.device} holds ${describeFormat(format)}, not ${opts.fsType}; set the volume's ` +
        `fsType to match, or give it a blank device`,
    );
  }
  if (format.kind === 'blank') await mkfs(opts.device, opts.fsType);
  await mkdir(opts.target, { recursive: true });
  await ensureMounted({
    source: opts.device,
    target: opts.target,
    fsType: opts.fsType,
    options: opts.options ?? [],
  });
  return { formatted: format.kind === 'blank' };
}

/**
 * Makes `path` a sparse image file of `sizeBytes`: creates it when missing, grows it when
 * smaller, leaves it when equal. Never shrinks one (`final`: the filesystem on it would be
 * cut off). Creates missing parent directories.
 */
export async function ensureImage(
  path: string,
  sizeBytes: number,
): Promise<{ readonly created: boolean; readonly grown: boolean }> {
  if (!isAbsolute(path))
    throw new HostError(
      'final',
      `disk image path "${path}" is not absolute; pass an absolute path`,
    );
  if (!(Number.isSafeInteger(sizeBytes) && sizeBytes > 0)) {
    throw new HostError(
      'final',
      `disk image size ${sizeBytes} is not a positive whole number of bytes; set the capacity`,
    );
  }
  await mkdir(dirname(path), { recursive: true });
  const existing = await stat(path).catch(() => undefined);
  if (existing === undefined) {
    await (await open(path, 'wx', 0o600)).close(); // 'wx': never clobber a file made meanwhile
    await truncate(path, sizeBytes);
    return { created: true, grown: false };
  }
  if (!existing.isFile())
    throw new HostError(
      'final',
      `disk image ${path} exists but is not a regular file; move it away`,
    );
  if (existing.size > sizeBytes) {
    throw new HostError(
      'final',
      `disk image ${path} is ${existing.size} bytes, more than the requested ${sizeBytes}; ` +
        `volumes never shrink — set the capacity back to at least ${existing.size} bytes`,
    );
  }
  if (existing.size === sizeBytes) return { created: false, grown: false };
  await truncate(path, sizeBytes);
  return { created: false, grown: true };
}

/**
 * Grows the filesystem on `device` to the device's size. With `mountPath` (the mount point)
 * it grows online: xfs_growfs, or resize2fs for ext4 — which needs CAP_SYS_RESOURCE, and
 * its refusal is a `final` error saying so. Without `mountPath` it grows offline, which
 * only ext4 can: e2fsck -f -p, then resize2fs.
 */
export async function resizeFs(opts: {
  readonly device: string;
  readonly mountPath?: string;
  readonly fsType: FsType;
}): Promise<void> {
  const mountPath = opts.mountPath ?? '';
  const online = mountPath !== '';
  if (opts.fsType === 'xfs') {
    if (!online)
      throw new HostError(
        'final',
        `xfs on ${opts.device} grows only while mounted; mount it and pass mountPath`,
      );
    await runOk('xfs_growfs', ['-d', '--', mountPath], {
      kind: 'transient',
      timeoutMs: fsCommandTimeoutMs,
    });
    return;
  }
  if (!online) await checkExt4(opts.device);
  const args = [opts.device];
  const result = await run('resize2fs', args, { timeoutMs: fsCommandTimeoutMs });
  if (result.code === 0) return;
  if (online && /Permission denied|Operation not permitted/.test(result.stderr)) {
    throw failed('resize2fs', args, result, {
      kind: 'final',
      fix:
        'growing a mounted ext4 online needs CAP_SYS_RESOURCE, ' +
        'which this host does not grant vole; ' +
        'use fsType xfs for online growth, or grow the ext4 volume offline (unmounted)',
    });
  }
  throw failed('resize2fs', args, result, {
    kind: 'transient',
    fix: `check ${opts.device} with e2fsck -n`,
  });
}

/** e2fsck -f -p before an offline resize (resize2fs insists on it); exit 0–1 is clean. */
async function checkExt4(device: string): Promise<void> {
  const args = ['-f', '-p', device];
  const result = await run('e2fsck', args, { timeoutMs: fsCommandTimeoutMs });
  if (result.code > 1) {
    throw failed('e2fsck', args, result, {
      kind: 'final',
      fix: `repair ${device} by hand (e2fsck -f) before growing it`,
    });
  }
}

/**
 * The size of the filesystem mounted at `mountPath` (statfs: blocks × block size, what df
 * shows). `final` when nothing is mounted there, since a plain directory would report its
 * parent filesystem instead.
 */
export async function fsSizeBytes(mountPath: string): Promise<number> {
  if (!(await isMountPoint(mountPath))) {
    throw new HostError(
      'final',
      `${mountPath} is not a mount point, so its size would be its parent's; pass the mount point`,
    );
  }
  const s = await statfs(mountPath);
  return s.blocks * s.bsize;
}
