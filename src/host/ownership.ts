/**
 * The kubelet's SetVolumeOwnership (pkg/volume/volume_linux.go, changeFilePermission): every
 * entry under a volume's directory, the directory itself included, gets group fsGroup (its
 * owner kept; a symlink's own group through lchown). Every entry but a symlink gets its mode
 * ORed with read for owner and group (0440) on a read-only volume, read-write (0660) on
 * another, and a directory also with x (0110) and the setgid bit, so what is made in it later
 * (the atomic writer's `..data` and user links) takes the group too. A symlink's mode is
 * left alone: chmod would change its target's.
 */
import { chmod, lchown, lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { HostError } from './errors.js';

/** Entries changed at most by one pass (a limit on everything). */
const ownershipEntriesMax = 100_000;

export async function setVolumeOwnership(
  dir: string,
  fsGroup: number,
  opts: { readOnly: boolean },
): Promise<void> {
  const fileMask = opts.readOnly ? 0o440 : 0o660;
  let count = 0;
  const walk = async (path: string): Promise<void> => {
    if (++count > ownershipEntriesMax)
      throw new HostError('final', `fsGroup: more than ${ownershipEntriesMax} files under ${dir}`);
    const st = await lstat(path);
    await lchown(path, st.uid, fsGroup);
    if (st.isSymbolicLink()) return;
    const mask = st.isDirectory() ? fileMask | 0o110 | 0o2000 : fileMask;
    await chmod(path, (st.mode & 0o7777) | mask);
    if (st.isDirectory()) for (const name of await readdir(path)) await walk(join(path, name));
  };
  await walk(dir);
}
