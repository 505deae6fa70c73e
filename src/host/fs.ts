/** Filesystems on devices and image files: safe format-and-mount, growth, sizes. */
import { mkdir, open, stat, statfs } from 'node:fs/promises';
import { dirname } from 'node:path';
import { HostError, run, runOk } from './exec.js';
import { mount } from './mount.js';

export type FsType = 'ext4' | 'xfs';

/** blkid -p exits 2 when it finds no signature: the device is blank. */
export async function isBlank(device: string): Promise<boolean> {
  const r = await run('blkid', ['-p', device]);
  if (r.code === 2) return true;
  if (r.code === 0) return false;
  throw new HostError('transient', `blkid -p ${device} failed (exit ${r.code}): ${r.stderr.trim()}`);
}

export async function mkfs(device: string, fsType: FsType): Promise<void> {
  const args = fsType === 'xfs' ? ['-q', device] : ['-q', '-F', device];
  await runOk(`mkfs.${fsType}`, args, { kind: 'uncertain', timeoutMs: 120_000 });
}

/**
 * Kubernetes' safe format-and-mount: format only a blank device (never one that holds a
 * filesystem), then mount it. A device holding another filesystem type is an error.
 */
export async function formatAndMount(opts: { device: string; target: string; fsType: FsType; options?: readonly string[] }): Promise<void> {
  if (await isBlank(opts.device)) await mkfs(opts.device, opts.fsType);
  await mkdir(opts.target, { recursive: true });
  await mount({ source: opts.device, target: opts.target, fsType: opts.fsType, ...(opts.options ? { options: opts.options } : {}) });
}

/** Creates a sparse image of `sizeBytes`, or grows it; never shrinks one (an error). */
export async function ensureImage(path: string, sizeBytes: number): Promise<{ grown: boolean }> {
  await mkdir(dirname(path), { recursive: true });
  const existing = await stat(path).catch(() => undefined);
  if (existing !== undefined && existing.size > sizeBytes) {
    throw new HostError('final', `image ${path} is ${existing.size} bytes, larger than the requested ${sizeBytes}; volumes never shrink`);
  }
  if (existing !== undefined && existing.size === sizeBytes) return { grown: false };
  const handle = await open(path, existing === undefined ? 'w' : 'r+');
  try {
    await handle.truncate(sizeBytes);
  } finally {
    await handle.close();
  }
  return { grown: existing !== undefined };
}

/** Grows a mounted filesystem to its device (online). */
export async function resizeFs(opts: { device: string; mountPath: string; fsType: FsType }): Promise<void> {
  if (opts.fsType === 'xfs') {
    await runOk('xfs_growfs', [opts.mountPath], { kind: 'transient' });
    return;
  }
  const r = await run('resize2fs', [opts.device]);
  if (r.code === 0) return;
  if (/Permission denied|Operation not permitted/.test(r.stderr)) {
    throw new HostError('final', `resize2fs ${opts.device}: ${r.stderr.trim()} — growing a mounted ext4 needs CAP_SYS_RESOURCE, which this host does not grant; use fsType xfs for online growth, or grow the volume while it is unmounted`, 'resize2fs', r.stderr);
  }
  throw new HostError('transient', `resize2fs ${opts.device} failed (exit ${r.code}): ${r.stderr.trim()}`, 'resize2fs', r.stderr);
}

export async function fsSizeBytes(mountPath: string): Promise<number> {
  const s = await statfs(mountPath);
  return s.blocks * s.bsize;
}
