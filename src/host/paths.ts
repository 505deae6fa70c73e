/**
 * The directory layout under vole's root (like the kubelet's /var/lib/kubelet) and path
 * safety: every name that becomes a path component goes through safeName, and a path that
 * resolves outside the root through a symlink is refused. The layout functions are pure;
 * the symlink checks read the filesystem.
 *
 * The checks are made before acting, so a symlink swapped in between check and use is not
 * caught (the kubelet's openat-based SafeOpen closes that gap; vole's root is written only
 * by vole and root).
 */
import { mkdirSync, realpathSync } from 'node:fs';
import { realpath } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { messageValueCharsMax, nameBytesMax } from './limits.js';

export const defaultRoot = '/var/lib/vole';

/** Where CSI drivers' node-driver-registrars put their registration sockets. */
export const pluginsRegistryDirName = 'plugins_registry';

/**
 * The directories an agent makes at start, as the kubelet's setupDataDirs does (each 0750):
 * the root, `plugins/` and `plugins_registry/`. A node-driver-registrar started with the
 * node binds its socket in `plugins_registry/` and exits ("bind: no such file or
 * directory") when the directory is not there yet.
 */
export function makeDataDirs(root: string): void {
  for (const dir of [root, join(root, 'plugins'), join(root, pluginsRegistryDirName)])
    mkdirSync(dir, { recursive: true, mode: 0o750 });
}

/** A hostile value quoted in a message: JSON-escaped and cut to a readable length. */
function quote(value: string): string {
  const cut =
    value.length > messageValueCharsMax ? `${value.slice(0, messageValueCharsMax)}…` : value;
  return JSON.stringify(cut);
}

export class UnsafeNameError extends Error {
  override name = 'UnsafeNameError';
  /**
   * @param field what the name is, in words (`pod uid`)
   * @param rule what it broke (`must not contain "/"`)
   * @param fix what to do instead
   */
  constructor(
    readonly field: string,
    readonly value: string,
    readonly rule: string,
    fix = "use a Kubernetes-style name (lower-case letters, digits, '-', '.')",
  ) {
    super(`${field} ${quote(value)} ${rule}; ${fix}`);
  }
}

/** A path that leads, through `..` or a symlink, outside the root it must stay in. */
export class PathEscapeError extends Error {
  override name = 'PathEscapeError';
  constructor(
    readonly root: string,
    readonly path: string,
    readonly resolved: string,
  ) {
    super(
      `${quote(path)} resolves to ${quote(resolved)}, outside ${quote(root)}; ` +
        'remove the symlink that leads out of the root (vole never follows one)',
    );
  }
}

/**
 * Returns `value` when it is safe as one path component, else throws UnsafeNameError naming
 * `field` and the rule: not empty, not `.` or `..`, no `/`, no NUL, at most 253 bytes.
 */
export function safeName(field: string, value: string): string {
  if (value === '') throw new UnsafeNameError(field, value, 'must not be empty');
  if (value === '.' || value === '..')
    throw new UnsafeNameError(field, value, 'must not be "." or ".."');
  if (value.includes('/')) throw new UnsafeNameError(field, value, 'must not contain "/"');
  if (value.includes('\0')) throw new UnsafeNameError(field, value, 'must not contain NUL');
  if (Buffer.byteLength(value, 'utf8') > nameBytesMax) {
    throw new UnsafeNameError(field, value, `must be at most ${nameBytesMax} bytes`);
  }
  return value;
}

/**
 * The kubelet's escaping of a plugin name into one directory name (EscapeQualifiedName):
 * `kubernetes.io/empty-dir` → `kubernetes.io~empty-dir`.
 */
export function escapePluginName(plugin: string): string {
  return safeName('plugin name', plugin.replaceAll('/', '~'));
}

function requireAbsoluteRoot(root: string): string {
  if (!isAbsolute(root))
    throw new UnsafeNameError('root', root, 'must be an absolute path', 'pass an absolute path');
  return root;
}

/** `<root>/pods/<podUid>`. */
export function podDir(root: string, podUid: string): string {
  return join(requireAbsoluteRoot(root), 'pods', safeName('pod uid', podUid));
}

/** `<root>/pods/<podUid>/volumes/<escaped plugin>/<volumeName>`: where a pod's volume is set up. */
export function podVolumeDir(
  root: string,
  podUid: string,
  plugin: string,
  volumeName: string,
): string {
  return join(
    podDir(root, podUid),
    'volumes',
    escapePluginName(plugin),
    safeName('volume name', volumeName),
  );
}

/** `<root>/pods/<podUid>/volumeDevices/<escaped plugin>/<volumeName>`: a pod's Block device. */
export function podVolumeDevicePath(
  root: string,
  podUid: string,
  plugin: string,
  volumeName: string,
): string {
  return join(
    podDir(root, podUid),
    'volumeDevices',
    escapePluginName(plugin),
    safeName('volume name', volumeName),
  );
}

/**
 * `<root>/plugins/<escaped plugin>/mounts/<volume>`: the node-global device mount
 * (deviceMountPath). The plugin name is escaped here too, unlike the kubelet's nested
 * `plugins/kubernetes.io/…`, so that it is one checked path component.
 */
export function pluginGlobalMountPath(root: string, plugin: string, volume: string): string {
  return join(
    requireAbsoluteRoot(root),
    'plugins',
    escapePluginName(plugin),
    'mounts',
    safeName('volume handle', volume),
  );
}

/** `<root>/plugins/<escaped plugin>/volumeDevices/<volume>`: a Block volume's global map path. */
export function globalMapPath(root: string, plugin: string, volume: string): string {
  return join(
    requireAbsoluteRoot(root),
    'plugins',
    escapePluginName(plugin),
    'volumeDevices',
    safeName('volume handle', volume),
  );
}

/** `<root>/disks/<name>.img`: the backing image of a disk volume. */
export function diskImagePath(root: string, name: string): string {
  return join(requireAbsoluteRoot(root), 'disks', `${safeName('volume handle', name)}.img`);
}

/**
 * Whether `path` is `root` or below it, both already resolved (pure). Compares whole
 * components: `/a/bc` is not inside `/a/b`.
 */
export function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

/** Refuses `..` components: after a symlink, the kernel and resolve() read them differently. */
function requireNoDotDot(path: string): void {
  if (path.split(sep).includes('..'))
    throw new UnsafeNameError(
      'path',
      path,
      'must not contain ".." components',
      'pass a normalised path',
    );
}

/** The real path of the deepest existing ancestor, with the not-yet-existing rest appended. */
async function realpathOfExisting(path: string): Promise<string> {
  const rest: string[] = [];
  for (let current = path; ; current = dirname(current)) {
    const real = await realpath(current).catch(() => undefined);
    if (real !== undefined) return join(real, ...rest.reverse());
    if (dirname(current) === current) return path;
    rest.push(basename(current));
  }
}

/**
 * The synchronous form, through realpath(3) (`.native`): Node's own realpathSync walks the
 * path in JavaScript, one lstat a component, and a pod's volume directory is ten deep.
 */
function realpathOfExistingSync(path: string): string {
  const rest: string[] = [];
  for (let current = path; ; current = dirname(current)) {
    let real: string | undefined;
    try {
      real = realpathSync.native(current);
    } catch {
      real = undefined;
    }
    if (real !== undefined) return join(real, ...rest.reverse());
    if (dirname(current) === current) return path;
    rest.push(basename(current));
  }
}

/**
 * Resolves `path` (absolute, no `..`) through symlinks — the parts that exist — and returns
 * the result; throws PathEscapeError when it lies outside the resolved `root`. A path not
 * yet created is checked through its deepest existing ancestor.
 */
export async function assertNoSymlinkEscape(root: string, path: string): Promise<string> {
  requireAbsoluteRoot(root);
  if (!isAbsolute(path))
    throw new UnsafeNameError('path', path, 'must be absolute', 'pass an absolute path');
  requireNoDotDot(path);
  const realRoot = await realpathOfExisting(resolve(root));
  const real = await realpathOfExisting(resolve(path));
  if (!isInside(realRoot, real)) throw new PathEscapeError(realRoot, path, real);
  return real;
}

/** `root`/`relativePath` (relative, no `..`), resolved and checked by assertNoSymlinkEscape. */
export async function resolveInside(root: string, relativePath: string): Promise<string> {
  if (isAbsolute(relativePath))
    throw new UnsafeNameError(
      'relative path',
      relativePath,
      'must be relative',
      'pass a path relative to the root',
    );
  requireNoDotDot(relativePath);
  return assertNoSymlinkEscape(root, join(requireAbsoluteRoot(root), relativePath));
}

/** The synchronous form of assertNoSymlinkEscape, for callers that cannot await. */
export function assertInside(root: string, path: string): string {
  requireAbsoluteRoot(root);
  if (!isAbsolute(path))
    throw new UnsafeNameError('path', path, 'must be absolute', 'pass an absolute path');
  requireNoDotDot(path);
  const realRoot = realpathOfExistingSync(resolve(root));
  const real = realpathOfExistingSync(resolve(path));
  if (!isInside(realRoot, real)) throw new PathEscapeError(realRoot, path, real);
  return real;
}
