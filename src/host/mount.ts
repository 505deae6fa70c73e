/** mount(8) and umount(8), idempotent forms included. */
import { mountAt, readMountTable } from './mountinfo.js';
import { runOk } from './exec.js';

export async function isMountPoint(path: string): Promise<boolean> {
  return mountAt(await readMountTable(), path) !== undefined;
}

export async function mount(opts: { source: string; target: string; fsType?: string; options?: readonly string[] }): Promise<void> {
  const args = [...(opts.fsType ? ['-t', opts.fsType] : []), ...(opts.options?.length ? ['-o', opts.options.join(',')] : []), opts.source, opts.target];
  await runOk('mount', args, { kind: 'uncertain' });
}

/** A bind mount; a read-only one needs a second, remounting call. */
export async function bindMount(source: string, target: string, opts: { readOnly?: boolean } = {}): Promise<void> {
  await runOk('mount', ['--bind', source, target], { kind: 'uncertain' });
  if (opts.readOnly === true) await runOk('mount', ['-o', 'remount,bind,ro', target], { kind: 'uncertain' });
}

export async function tmpfs(target: string, opts: { sizeBytes?: number } = {}): Promise<void> {
  const options = opts.sizeBytes !== undefined && opts.sizeBytes > 0 ? [`size=${opts.sizeBytes}`] : [];
  await mount({ source: 'tmpfs', target, fsType: 'tmpfs', options });
}

/** Unmounts every mount stacked at `target`; a no-op when nothing is mounted there. */
export async function ensureUnmounted(target: string): Promise<void> {
  for (let i = 0; i < 16 && (await isMountPoint(target)); i++) {
    await runOk('umount', [target], { kind: 'uncertain' });
  }
}
