/** kubernetes.io/empty-dir: a directory, or a tmpfs when medium is Memory (honouring sizeLimit). */
import { HostError } from '../../host/exec.js';
import { isMountPoint, tmpfs } from '../../host/mount.js';
import { builtinPluginNames } from '../../world/resolve.js';
import { caps, type VolumePlugin } from '../types.js';
import {
  applyFsGroup,
  type BuiltinOptions,
  makeVolumeDir,
  present,
  removeVolumeDir,
  volumeDir,
} from './common.js';

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
        await makeVolumeDir(opts.root, dir, 0o777);
        if (spec.source.medium === 'Memory' && !(await isMountPoint(dir))) {
          await tmpfs(dir, { sizeBytes: spec.source.sizeLimitBytes });
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
