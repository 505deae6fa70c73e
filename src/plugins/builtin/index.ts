/** The built-in plugins that act on the host, under one root directory. */
import { defaultRoot } from '../../host/paths.js';
import type { VolumePlugin } from '../types.js';
import { type BuiltinOptions } from './common.js';
import { diskPlugin } from './disk.js';
import { emptyDirPlugin } from './empty-dir.js';
import { hostPathPlugin, localVolumePlugin } from './host-path.js';

export function builtinPlugins(opts: Partial<BuiltinOptions> = {}): VolumePlugin[] {
  const o: BuiltinOptions = {
    root: opts.root ?? defaultRoot,
    ...(opts.disksRoot === undefined ? {} : { disksRoot: opts.disksRoot }),
  };
  return [emptyDirPlugin(o), hostPathPlugin(o), localVolumePlugin(o), diskPlugin(o)];
}

export { diskDriver } from './disk.js';
