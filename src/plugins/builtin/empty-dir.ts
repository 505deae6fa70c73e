/**
 * kubernetes.io/empty-dir: a directory, or a tmpfs when medium is Memory, of the size the
 * resolution worked out (the least of the node's allocatable memory, the pod's memory
 * limit and sizeLimit).
 */
import { chmod, lstat } from 'node:fs/promises';
import { HostError } from '../../host/errors.js';
import { isMountPoint, tmpfs } from '../../host/mount.js';
import { builtinPluginNames } from '../../desired/resolve.js';
import { caps, type VolumePlugin } from '../types.js';
import {
  applyFsGroup,
  type BuiltinOptions,
  makeVolumeDir,
  present,
  removeVolumeDir,
  volumeDir,
} from './common.js';

/** The mode of an emptyDir's directory: anyone may write, whatever user the container runs as. */
const emptyDirModeBits = 0o777;

/**
 * The kubelet's emptyDir setupDir (pkg/volume/emptydir/empty_dir.go): mkdir with 0777, then,
 * when the process umask took bits away, chmod to 0777 rather than touching the umask of
 * the whole process. A `mode` (EmptyDirVolumeMode on) is set with chmod instead, the
 * sticky bit (01000) included. A tmpfs (medium Memory) is mounted over this directory
 * afterwards, and fsGroup's bits are applied after either.
 */
async function setUpEmptyDir(root: string, dir: string, mode: number | undefined): Promise<void> {
  await makeVolumeDir(root, dir, emptyDirModeBits);
  if (mode !== undefined) return chmod(dir, mode);
  const st = await lstat(dir);
  if ((st.mode & 0o777) !== emptyDirModeBits) await chmod(dir, emptyDirModeBits);
}

export function emptyDirPlugin(opts: BuiltinOptions): VolumePlugin {
  const name = builtinPluginNames.emptyDir;
  return {
    name,
    caps: caps(name),
    pod: {
      podVolumePath: (spec, uid) => volumeDir(opts.root, spec, uid),
      isSetUp: (spec, uid) => present(volumeDir(opts.root, spec, uid)),
      async setUp(spec, setUpOpts, target) {
        if (spec.source.kind !== 'emptyDir')
          throw new HostError('final', `${name} cannot set up a ${spec.source.kind} volume`);
        const dir = volumeDir(opts.root, spec, target.pod!);
        // The kubelet's newMounterInternal reads emptyDir.mode only with the gate on.
        const honoured = opts.featureGates?.EmptyDirVolumeMode === true;
        await setUpEmptyDir(opts.root, dir, honoured ? spec.source.mode : undefined);
        if (spec.source.medium === 'Memory' && !(await isMountPoint(dir))) {
          await tmpfs(dir, { sizeBytes: spec.source.tmpfsBytes });
        }
        await applyFsGroup(dir, setUpOpts.fsGroup);
      },
      async tearDown(spec, target) {
        await removeVolumeDir(opts.root, volumeDir(opts.root, spec, target.pod!), {
          recursive: true,
        });
      },
    },
  };
}
