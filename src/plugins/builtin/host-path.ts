/**
 * kubernetes.io/host-path: checks the path's type as Kubernetes does, then binds it into
 * the pod's volume directory (vole has no container runtime; the bind is the pod's view).
 */
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

/** Returns whether the host path is a file (so the bind target must be a file too). */
async function checkHostPathType(path: string, type: string): Promise<{ isFile: boolean }> {
  if (!path.startsWith('/'))
    throw new HostError('final', `hostPath.path "${path}" must be absolute`);
  const st = await stat(path).catch(() => undefined);
  const fail = (what: string) =>
    new HostError('final', `hostPath type check failed: ${path} ${what}`);
  switch (type) {
    case 'DirectoryOrCreate':
      if (st === undefined) await mkdir(path, { recursive: true, mode: 0o755 });
      else if (!st.isDirectory()) throw fail('is not a directory');
      return { isFile: false };
    case 'Directory':
      if (st?.isDirectory() !== true) throw fail('is not a directory');
      return { isFile: false };
    case 'FileOrCreate':
      if (st === undefined) {
        await mkdir(dirname(path), { recursive: true });
        await (await open(path, 'a', 0o644)).close();
      } else if (!st.isFile()) throw fail('is not a file');
      return { isFile: true };
    case 'File':
      if (st?.isFile() !== true) throw fail('is not a file');
      return { isFile: true };
    case 'Socket':
      if (st?.isSocket() !== true) throw fail('is not a socket');
      return { isFile: true };
    case 'CharDevice':
      if (st?.isCharacterDevice() !== true) throw fail('is not a character device');
      return { isFile: true };
    case 'BlockDevice':
      if (st?.isBlockDevice() !== true) throw fail('is not a block device');
      return { isFile: true };
    case '':
      if (st === undefined) throw fail('does not exist');
      return { isFile: !st.isDirectory() };
    default:
      throw new HostError(
        'final',
        `hostPath type "${type}" is not one of DirectoryOrCreate, Directory, FileOrCreate, File, Socket, CharDevice, BlockDevice`,
      );
  }
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
