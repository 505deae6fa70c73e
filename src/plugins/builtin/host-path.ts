/**
 * kubernetes.io/host-path: checks the path's type as Kubernetes does, then binds it into
 * the pod's volume directory (vole has no container runtime; the bind is the pod's view).
 */
import type { Stats } from 'node:fs';
import { lstat, mkdir, open, realpath, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { HostError } from '../../host/errors.js';
import { bindMount, isMountPoint } from '../../host/mount.js';
import { isInside } from '../../host/paths.js';
import { builtinPluginNames } from '../../desired/resolve.js';
import { caps, type VolumePlugin } from '../types.js';
import {
  type BuiltinOptions,
  makeVolumeDir,
  present,
  removeVolumeDir,
  volumeDir,
} from './common.js';

/** hostutil's names of what a path is (pkg/volume/util/hostutil/hostutil.go, FileType). */
type FileType = 'Directory' | 'File' | 'Socket' | 'CharDevice' | 'BlockDevice';

/** hostutil's getFileType: what is at `path` (stat follows symlinks), or its error's words. */
async function fileType(path: string): Promise<{ type: FileType } | { error: string }> {
  let st: Stats;
  try {
    st = await stat(path);
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    if (e.code === 'ENOENT') return { error: `path "${path}" does not exist` };
    return { error: pathError('stat', path, e) };
  }
  if (st.isDirectory()) return { type: 'Directory' };
  if (st.isFile()) return { type: 'File' };
  if (st.isSocket()) return { type: 'Socket' };
  if (st.isCharacterDevice()) return { type: 'CharDevice' };
  if (st.isBlockDevice()) return { type: 'BlockDevice' };
  return { error: 'only recognise file, directory, socket, block device and character device' };
}

/** A failed system call as Go's *PathError prints it: `open /p: no such file or directory`. */
function pathError(op: string, path: string, error: NodeJS.ErrnoException): string {
  return `${op} ${path}: ${error.message.replace(/^[A-Z]+: ([^,]+),.*$/s, '$1')}`;
}

/** What each checked type must be, in the kubelet's words of its message. */
const expected: Record<string, [FileType, string]> = {
  DirectoryOrCreate: ['Directory', 'directory'],
  Directory: ['Directory', 'directory'],
  FileOrCreate: ['File', 'file'],
  File: ['File', 'file'],
  Socket: ['Socket', 'socket file'],
  CharDevice: ['CharDevice', 'character device'],
  BlockDevice: ['BlockDevice', 'block device'],
};

/**
 * The kubelet's checkTypeInternal and typeMatchedOrError (pkg/volume/hostpath/host_path.go),
 * messages word for word: DirectoryOrCreate makes the directory 0755 with its parents;
 * FileOrCreate makes the file 0644, but not its directory (the pod fails while that is
 * missing, as Kubernetes documents). An unset type is not checked: the kubelet leaves the
 * path to the container runtime, and vole binds it only if it exists. Whether the host
 * path is a file (the bind target must be one too).
 */
export async function checkHostPathType(path: string, type: string): Promise<{ isFile: boolean }> {
  if (!path.startsWith('/'))
    throw new HostError('final', `hostPath.path "${path}" must be absolute`);
  const found = await fileType(path);
  if (type === '') {
    if ('error' in found) throw new HostError('final', `hostPath ${path}: ${found.error}`);
    return { isFile: found.type !== 'Directory' };
  }
  const want = expected[type];
  if (want === undefined)
    throw new HostError(
      'final',
      `hostPath type "${type}" is not one of ${Object.keys(expected).join(', ')}`,
    );
  if ('error' in found && (type === 'DirectoryOrCreate' || type === 'FileOrCreate')) {
    if (type === 'DirectoryOrCreate') await mkdir(path, { recursive: true, mode: 0o755 });
    else {
      const made = await open(path, 'a', 0o644).catch((e: NodeJS.ErrnoException) => e);
      if (made instanceof Error) throw new HostError('final', pathError('open', path, made));
      await made.close();
    }
    return { isFile: type === 'FileOrCreate' };
  }
  if ('error' in found)
    throw new HostError(
      'final',
      `hostPath type check failed, ${path} is not a ${want[1]}, unable to determine its type: ${found.error}`,
    );
  if (found.type !== want[0])
    throw new HostError(
      'final',
      `hostPath type check failed: ${path} is not a ${want[1]}, it's a ${found.type}`,
    );
  return { isFile: found.type !== 'Directory' };
}

/**
 * Refuses a host path that resolves, through symlinks and now (at mount time), into vole's
 * root or the directory of its log — or that holds one of them: a pod must never reach
 * other pods' volumes or the log.
 */
async function refuseAgentPaths(path: string, opts: BuiltinOptions): Promise<void> {
  if (path.split('/').includes('..'))
    throw new HostError('final', `hostPath.path "${path}" must not contain '..'`);
  const real = await realpath(path);
  for (const dir of [opts.root, ...(opts.forbiddenHostPaths ?? [])]) {
    const forbidden = await realpath(dir).catch(() => resolve(dir));
    const inside = isInside(forbidden, real);
    if (!inside && !isInside(real, forbidden)) continue;
    throw new HostError(
      'final',
      `hostPath ${path} resolves to ${real}, which ${inside ? 'is inside' : 'holds'} vole's own ` +
        `directory ${forbidden} (pods' volumes, the log); refused: use a path outside it`,
    );
  }
}

export function hostPathPlugin(
  opts: BuiltinOptions,
  pluginName: string = builtinPluginNames.hostPath,
): VolumePlugin {
  return {
    name: pluginName,
    caps: caps(pluginName),
    pod: {
      podVolumePath: (spec, uid) => volumeDir(opts.root, spec, uid),
      isSetUp: (spec, uid) => present(volumeDir(opts.root, spec, uid)),
      async setUp(spec, _setUpOpts, target) {
        const source = spec.source;
        if (source.kind !== 'hostPath' && source.kind !== 'local')
          throw new HostError('final', `${pluginName} cannot set up a ${source.kind} volume`);
        const { isFile } = await checkHostPathType(
          source.path,
          source.kind === 'hostPath' ? source.type : 'Directory',
        );
        await refuseAgentPaths(source.path, opts);
        const dir = volumeDir(opts.root, spec, target.pod!);
        if (isFile) {
          await makeVolumeDir(opts.root, dirname(dir));
          if ((await lstat(dir).catch(() => undefined)) === undefined)
            await (await open(dir, 'a', 0o644)).close();
        } else {
          await makeVolumeDir(opts.root, dir);
        }
        if (!(await isMountPoint(dir)))
          await bindMount(source.path, dir, { readOnly: spec.traits.readOnly });
      },
      async tearDown(spec, target) {
        await removeVolumeDir(opts.root, volumeDir(opts.root, spec, target.pod!), {
          recursive: false,
        });
      },
    },
  };
}

/** kubernetes.io/local-volume: a local PV's directory bound into the pod. */
export function localVolumePlugin(opts: BuiltinOptions): VolumePlugin {
  return hostPathPlugin(opts, builtinPluginNames.local);
}
