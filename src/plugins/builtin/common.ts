/** What the built-in plugins share: the pod volume directory, safe removal, fsGroup. */
import { lstat, mkdir, rm, rmdir, unlink } from 'node:fs/promises';
import { setVolumeOwnership } from '../../host/ownership.js';
import { dirname, join, relative, sep } from 'node:path';
import { HostError } from '../../host/errors.js';
import { mountsUnder, readMountTable } from '../../host/mountinfo.js';
import { ensureUnmounted } from '../../host/mount.js';
import { assertInside, podVolumeDir } from '../../host/paths.js';
import type { ResolvedVolume } from '../../operations/volume-spec.js';
import type { FeatureGates } from '../../sources/feature-gates.js';

export interface BuiltinOptions {
  /** vole's root directory (default /var/lib/vole). */
  readonly root: string;
  /**
   * The root whose `disks/` holds the disk plugin's images (default: root). Cluster-mode
   * processes on one machine — a controller and several node agents — share it, as nodes
   * share a SAN, while each keeps its own root for mounts.
   */
  readonly disksRoot?: string;
  /**
   * Directories no hostPath may reach, after symlinks, at mount time: besides the root,
   * the directory of the agent's log (a pod must never read other pods' volumes or the log).
   */
  readonly forbiddenHostPaths?: readonly string[];
  /** The feature gates the plugins honour (default: Kubernetes' defaults, alpha ones off). */
  readonly featureGates?: FeatureGates;
}

/** The mode of a pod's directory and its `volumes/` and `plugins/` (makePodDataDirs). */
const podDataDirMode = 0o750;

export function volumeDir(root: string, spec: ResolvedVolume, podUid: string): string {
  return podVolumeDir(root, podUid, spec.traits.pluginName, spec.innerVolumeSpecName);
}

/**
 * Makes the pod's volume directory, refusing one that a symlink leads out of the root. The
 * pod's own directories come first, as the kubelet's makePodDataDirs makes them
 * (pkg/kubelet/kubelet_pods.go): `pods/<uid>`, its `volumes/` and `plugins/`, each 0750,
 * so no other user of the node lists a pod's volumes; below them the volume's own mode.
 */
export async function makeVolumeDir(root: string, dir: string, mode = 0o750): Promise<void> {
  assertInside(root, dir);
  const [top, uid] = relative(root, dir).split(sep);
  if (top === 'pods' && uid !== undefined && uid !== '') {
    const pod = join(root, 'pods', uid);
    for (const d of [join(pod, 'volumes'), join(pod, 'plugins')])
      await mkdir(d, { recursive: true, mode: podDataDirMode });
    assertInside(root, dir);
  }
  await mkdir(dir, { recursive: true, mode });
  assertInside(root, dir);
}

/**
 * Unmounts the pod's volume directory and removes it. Never removes a directory that still
 * has a mount below it (a user's `rm -rf` of a pod dir has wiped mounted data before).
 */
export async function removeVolumeDir(
  root: string,
  dir: string,
  opts: { recursive: boolean },
): Promise<void> {
  assertInside(root, dir);
  await ensureUnmounted(dir);
  const below = mountsUnder(await readMountTable(), dir);
  if (below.length > 0) {
    throw new HostError(
      'uncertain',
      `${dir} still has mounts below it (${below.map((m) => m.mountPoint).join(', ')}); not removing it`,
    );
  }
  const exists = await lstat(dir).catch(() => undefined);
  if (exists === undefined) return pruneEmptyParents(root, dir);
  if (opts.recursive) await rm(dir, { recursive: true, force: true });
  else if (!exists.isDirectory())
    await unlink(dir); // the bind target of a file hostPath
  else
    await rmdir(dir).catch(async (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOTEMPTY')
        throw new HostError(
          'uncertain',
          `${dir} is not empty after unmounting; left in place for inspection`,
        );
      throw error;
    });
  await pruneEmptyParents(root, dir);
}

/**
 * Removes the now-empty parents of a removed volume directory, up to (not including)
 * `<root>/pods` or `<root>/plugins`, so a torn-down pod leaves no stray directories.
 */
async function pruneEmptyParents(root: string, dir: string): Promise<void> {
  const stops = new Set([join(root, 'pods'), join(root, 'plugins'), root]);
  for (
    let parent = dirname(dir);
    !stops.has(parent) && parent.startsWith(root);
    parent = dirname(parent)
  ) {
    try {
      // The pod's own directories (makeVolumeDir's volumes/ and plugins/, and a Block
      // volume's volumeDevices/) go with its last volume, as the pod dir does; one that is
      // not empty stays, and so does the pod dir.
      if (dirname(parent) === join(root, 'pods'))
        for (const d of ['plugins', 'volumes', 'volumeDevices'])
          await rmdir(join(parent, d)).catch(() => undefined);
      await rmdir(parent);
    } catch {
      return; // not empty (another volume of the pod), or already gone
    }
  }
}

/** Anything of the volume at this path (a mount, a directory, a file)? */
export async function present(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => undefined)) !== undefined;
}

/**
 * SetVolumeOwnership for a volume users write (emptyDir, a disk): group fsGroup, modes ORed
 * with 0660, directories with 02770, so an emptyDir's 0777 becomes 2777 (src/host/ownership.ts).
 */
export async function applyFsGroup(dir: string, fsGroup: number | null): Promise<void> {
  if (fsGroup === null) return;
  await setVolumeOwnership(dir, fsGroup, { readOnly: false });
}
