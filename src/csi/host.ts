/**
 * The little the kubelet itself does on the host around CSI calls: make a target's parent
 * directory, remove what is left after an unpublish or unstage, bind a published block
 * device into the pod, and read mount references. A simulation uses `noCsiHost`.
 */
import { readdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { mountRefs, readMountTable } from '../host/mountinfo.js';
import { bindMount, isMountPoint } from '../host/mount.js';
import { makeVolumeDir, present, removeVolumeDir } from '../plugins/builtin/common.js';

export interface CsiHostOps {
  makeDir(dir: string): Promise<void>;
  /** Removes an (unmounted) directory or file and its empty parents; absent is fine. */
  removeDir(path: string): Promise<void>;
  bindDevice(source: string, target: string): Promise<void>;
  unbindDevice(target: string): Promise<void>;
  mountRefs(path: string): Promise<string[]>;
  listDir(dir: string): Promise<string[]>;
}

export function realCsiHost(root: string): CsiHostOps {
  return {
    makeDir: (dir) => makeVolumeDir(root, dir),
    removeDir: (path) => removeVolumeDir(root, path, { recursive: false }),
    async bindDevice(source, target) {
      await makeVolumeDir(root, dirname(target));
      if (!(await present(target))) await writeFile(target, '');
      if (!(await isMountPoint(target))) await bindMount(source, target);
    },
    unbindDevice: (target) => removeVolumeDir(root, target, { recursive: false }),
    mountRefs: async (path) => mountRefs(await readMountTable(), path),
    listDir: async (dir) => (await readdir(dir).catch(() => [])).map((name) => join(dir, name)),
  };
}

/** Touches nothing: the simulator's drivers are scripted. */
export const noCsiHost: CsiHostOps = {
  makeDir: async () => {},
  removeDir: async () => {},
  bindDevice: async () => {},
  unbindDevice: async () => {},
  mountRefs: async () => [],
  listDir: async () => [],
};
