/**
 * The directory layout under vole's root (like the kubelet's /var/lib/kubelet) and path
 * safety: every name that becomes a path component is checked, and a path that resolves
 * outside the root through a symlink is refused.
 */
import { realpathSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

export const defaultRoot = '/var/lib/vole';
/** Kubernetes object names are at most 253 characters; a path component at most 255 bytes. */
export const nameBytesMax = 253;

export class UnsafeNameError extends Error {
  override name = 'UnsafeNameError';
  constructor(readonly field: string, readonly value: string, rule: string) {
    super(`${field} ${JSON.stringify(value)} ${rule}; use a Kubernetes-style name (letters, digits, '-', '.', '_')`);
  }
}

/** Checks a name that becomes one path component; returns it unchanged when safe. */
export function safeName(field: string, value: string): string {
  if (value === '') throw new UnsafeNameError(field, value, 'must not be empty');
  if (value === '.' || value === '..') throw new UnsafeNameError(field, value, 'must not be "." or ".."');
  if (value.includes('/')) throw new UnsafeNameError(field, value, 'must not contain "/"');
  if (value.includes('\0')) throw new UnsafeNameError(field, value, 'must not contain NUL');
  if (Buffer.byteLength(value) > nameBytesMax) throw new UnsafeNameError(field, value, `must be at most ${nameBytesMax} bytes`);
  return value;
}

/** The kubelet's escaping of plugin names in directories: `kubernetes.io/empty-dir` → `kubernetes.io~empty-dir`. */
export function escapePluginName(plugin: string): string {
  return safeName('plugin name', plugin.replaceAll('/', '~'));
}

export function podDir(root: string, podUid: string): string {
  return join(root, 'pods', safeName('pod uid', podUid));
}

/** `<root>/pods/<podUID>/volumes/<plugin>/<name>`: where a pod's volume is set up. */
export function podVolumeDir(root: string, podUid: string, plugin: string, volumeName: string): string {
  return join(podDir(root, podUid), 'volumes', escapePluginName(plugin), safeName('volume name', volumeName));
}

/** `<root>/pods/<podUID>/volumeDevices/<plugin>/<name>`: a Block volume's device link for the pod. */
export function podVolumeDevicePath(root: string, podUid: string, plugin: string, volumeName: string): string {
  return join(podDir(root, podUid), 'volumeDevices', escapePluginName(plugin), safeName('volume name', volumeName));
}

/** `<root>/plugins/<plugin>/mounts/<volume>`: the node-global device mount (deviceMountPath). */
export function pluginGlobalMountPath(root: string, plugin: string, volume: string): string {
  return join(root, 'plugins', escapePluginName(plugin), 'mounts', safeName('volume handle', volume));
}

/** `<root>/plugins/<plugin>/volumeDevices/<volume>`: a Block volume's global map path. */
export function globalMapPath(root: string, plugin: string, volume: string): string {
  return join(root, 'plugins', escapePluginName(plugin), 'volumeDevices', safeName('volume handle', volume));
}

/** `<root>/disks/<name>.img`: the backing image of a disk volume. */
export function diskImagePath(root: string, name: string): string {
  return join(root, 'disks', `${safeName('volume handle', name)}.img`);
}

/** The deepest existing ancestor's real path, with the rest appended (for paths not yet made). */
function realpathOfExisting(path: string): string {
  let current = resolve(path);
  const rest: string[] = [];
  for (;;) {
    try {
      return join(realpathSync(current), ...rest.reverse());
    } catch {
      const parent = dirname(current);
      if (parent === current) return join(current, ...rest.reverse());
      rest.push(current.slice(parent.length + (parent.endsWith(sep) ? 0 : 1)));
      current = parent;
    }
  }
}

/**
 * Refuses a path that resolves, through symlinks, outside `root` (a pod directory swapped
 * for a link to /etc, say). Returns the resolved path.
 */
export function assertInside(root: string, path: string): string {
  const realRoot = realpathOfExisting(root);
  const real = realpathOfExisting(path);
  const rel = relative(realRoot, real);
  if (rel.startsWith('..') || resolve(realRoot, rel) !== real || rel.startsWith(sep)) {
    throw new UnsafeNameError('path', path, `resolves to ${real}, outside ${realRoot}`);
  }
  return real;
}
