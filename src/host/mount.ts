/**
 * mount(8) and umount(8), and their idempotent forms. Every failure is a HostError whose
 * kind comes from the command's stderr (classifyMountFailure).
 */
import { readFileSync } from 'node:fs';
import { release } from 'node:os';
import { isAbsolute } from 'node:path';
import { HostError, classifyMountFailure } from './errors.js';
import { failed, run } from './exec.js';
import {
  bindSourceOf,
  blockDeviceNumber,
  findMountAt,
  isMountPoint,
  readMountTable,
  resolvedPath,
  type MountEntry,
} from './mountinfo.js';
import { stackedMountsMax } from './limits.js';

export { isMountPoint } from './mountinfo.js';

export interface MountRequest {
  /** A device (`/dev/loop3`), a directory for a bind mount, or a name such as `tmpfs`. */
  readonly source: string;
  /** An absolute path to an existing directory (or file, for a bind of a file). */
  readonly target: string;
  /** `-t`; omitted for bind mounts. */
  readonly fsType?: string;
  /** `-o`, e.g. `['ro', 'noexec']`; for a bind mount they are applied by a remount. */
  readonly options?: readonly string[];
  readonly bind?: boolean;
}

function requireAbsolute(what: string, path: string): void {
  if (!isAbsolute(path)) {
    throw new HostError(
      'final',
      `${what} "${path}" is not an absolute path; pass an absolute path`,
    );
  }
}

async function runMount(args: readonly string[]): Promise<void> {
  const result = await run('mount', args);
  if (result.code !== 0) throw failed('mount', args, result, classifyMountFailure(result.stderr));
}

/**
 * Mounts `source` at `target`. A bind mount with options is a bind followed by a remount
 * (the kernel ignores options such as `ro` on the bind itself); if that remount fails the
 * bind is undone, so a read-only request never leaves a writable mount behind. Not
 * idempotent: a second call stacks a second mount (use ensureMounted).
 */
export async function mount(req: MountRequest): Promise<void> {
  requireAbsolute('mount target', req.target);
  const options = req.options ?? [];
  if (req.bind !== true) {
    const type = req.fsType === undefined ? [] : ['-t', req.fsType];
    const opts = options.length === 0 ? [] : ['-o', options.join(',')];
    await runMount([...type, ...opts, '--', req.source, req.target]);
    return;
  }
  requireAbsolute('bind mount source', req.source);
  if (req.fsType !== undefined) {
    throw new HostError(
      'final',
      `a bind mount of ${req.source} takes no fsType (got ${req.fsType}); drop fsType or bind`,
    );
  }
  await runMount(['--bind', '--', req.source, req.target]);
  if (options.length === 0) return;
  try {
    await runMount(['-o', ['remount', 'bind', ...options].join(','), '--', req.target]);
  } catch (error) {
    await umount(req.target).catch(() => undefined); // the original error says what went wrong
    throw error;
  }
}

/** Unmounts the topmost mount at `target`; `lazy` (-l) detaches it now, cleans up when unused. */
export async function umount(
  target: string,
  opts: { readonly lazy?: boolean } = {},
): Promise<void> {
  requireAbsolute('umount target', target);
  const args = [...(opts.lazy === true ? ['-l'] : []), '--', target];
  const result = await run('umount', args);
  if (result.code !== 0) throw failed('umount', args, result, classifyMountFailure(result.stderr));
}

/** A bind mount of `source` at `target`; a read-only one is remounted `ro` (see mount). */
export async function bindMount(
  source: string,
  target: string,
  opts: { readonly readOnly?: boolean } = {},
): Promise<void> {
  await mount({ source, target, bind: true, options: opts.readOnly === true ? ['ro'] : [] });
}

let noswap: boolean | undefined;

/**
 * Whether tmpfs takes `noswap` here (IsTmpfsNoswapOptionSupported,
 * pkg/kubelet/util/swap/swap_util.go): Linux 6.4 or later, and not inside a user namespace,
 * where the kernel refuses it to an unprivileged mount. Read once: neither changes.
 */
export function tmpfsNoswapSupported(): boolean {
  noswap ??= kernelHasNoswap(release()) && !inUserNamespace();
  return noswap;
}

/** `uname -r`'s major.minor against 6.4; an unreadable release: no. */
export function kernelHasNoswap(kernelRelease: string): boolean {
  const m = /^(\d+)\.(\d+)/.exec(kernelRelease);
  if (m === null) return false;
  const [major, minor] = [Number(m[1]), Number(m[2])];
  return major > 6 || (major === 6 && minor >= 4);
}

/** The initial user namespace maps every id to itself: `0 0 4294967295` (moby's userns). */
function inUserNamespace(): boolean {
  try {
    const map = readFileSync('/proc/self/uid_map', 'utf8').trim().split(/\s+/);
    return !(map[0] === '0' && map[1] === '0' && map[2] === '4294967295');
  } catch {
    return false;
  }
}

/**
 * A tmpfs at `target`, limited to `sizeBytes` when given (else the kernel's half of RAM),
 * with `noswap` where the kernel has it, as the kubelet's generateTmpfsMountOptions: a
 * memory-backed volume's data never reaches the swap device.
 */
export async function tmpfs(
  target: string,
  opts: { readonly sizeBytes?: number | undefined } = {},
): Promise<void> {
  const size = opts.sizeBytes;
  if (size !== undefined && !(Number.isSafeInteger(size) && size > 0)) {
    throw new HostError(
      'final',
      `tmpfs size ${size} is not a positive whole number of bytes; pass one, or omit it`,
    );
  }
  await mount({
    source: 'tmpfs',
    target,
    fsType: 'tmpfs',
    options: [
      ...(size === undefined ? [] : [`size=${size}`]),
      ...(tmpfsNoswapSupported() ? ['noswap'] : []),
    ],
  });
}

/** Whether the mount `at` already is what `req` asks for. */
async function showsSource(
  table: readonly MountEntry[],
  at: MountEntry,
  req: MountRequest,
): Promise<boolean> {
  if (req.bind === true) {
    const wanted = bindSourceOf(table, await resolvedPath(req.source));
    return wanted !== undefined && wanted.majorMinor === at.majorMinor && wanted.root === at.root;
  }
  const device = await blockDeviceNumber(req.source);
  if (device !== undefined) return device === at.majorMinor;
  return at.source === req.source && (req.fsType === undefined || req.fsType === at.fsType);
}

/**
 * Mounts unless `target` already is a mount point of that source (the same device, the same
 * directory for a bind, or the same name and type for tmpfs and the like) — the call to
 * repeat after a crash. A target mounted from something else is a `final` error: vole never
 * stacks a mount over another one. Options of an existing mount are not compared.
 */
export async function ensureMounted(
  req: MountRequest,
): Promise<{ readonly kind: 'mounted' | 'alreadyMounted' }> {
  requireAbsolute('mount target', req.target);
  const table = await readMountTable();
  const at = findMountAt(table, await resolvedPath(req.target));
  if (at === undefined) {
    await mount(req);
    return { kind: 'mounted' };
  }
  if (await showsSource(table, at, req)) return { kind: 'alreadyMounted' };
  throw new HostError(
    'final',
    `${req.target} is already a mount point of ${at.source} ` +
      `(${at.fsType}${at.root === '/' ? '' : ` ${at.root}`}), ` +
      `not of ${req.source}; unmount it first if it is stale`,
  );
}

/**
 * Unmounts every mount stacked at `target`; a no-op (unmountCount 0) when nothing is
 * mounted there or the path does not exist. Mounts below `target` are not touched.
 */
export async function ensureUnmounted(
  target: string,
  opts: { readonly lazy?: boolean } = {},
): Promise<{ readonly unmountCount: number }> {
  requireAbsolute('umount target', target);
  let unmountCount = 0;
  while (await isMountPoint(target)) {
    if (unmountCount === stackedMountsMax) {
      throw new HostError(
        'uncertain',
        `${target} is still mounted after ${stackedMountsMax} unmounts; ` +
          'something keeps mounting it — find it (findmnt) before vole retries',
      );
    }
    try {
      await umount(await resolvedPath(target), opts);
    } catch (error) {
      // Someone else unmounted it between our look and our umount: that is what we wanted.
      if (error instanceof HostError && !(await isMountPoint(target))) break;
      throw error;
    }
    unmountCount += 1;
  }
  return { unmountCount };
}
