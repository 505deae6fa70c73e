/** The built-in plugins that act on the host, under one root directory. */
import { defaultRoot } from '../../host/paths.js';
import type { VolumePlugin } from '../types.js';
import { ObjectContents } from '../../sources/contents.js';
import { type BuiltinOptions } from './common.js';
import { contentPlugins, type ServiceAccountTokens } from './content.js';
import { diskPlugin } from './disk.js';
import { emptyDirPlugin } from './empty-dir.js';
import { hostPathPlugin, localVolumePlugin } from './host-path.js';

export function builtinPlugins(
  opts: Partial<BuiltinOptions> & { contents?: ObjectContents; tokens?: ServiceAccountTokens } = {},
): VolumePlugin[] {
  const o: BuiltinOptions = {
    root: opts.root ?? defaultRoot,
    ...(opts.forbiddenHostPaths === undefined
      ? {}
      : { forbiddenHostPaths: opts.forbiddenHostPaths }),
    ...(opts.disksRoot === undefined ? {} : { disksRoot: opts.disksRoot }),
    ...(opts.featureGates === undefined ? {} : { featureGates: opts.featureGates }),
  };
  return [
    emptyDirPlugin(o),
    hostPathPlugin(o),
    localVolumePlugin(o),
    diskPlugin(o),
    ...contentPlugins({
      ...o,
      contents: opts.contents ?? new ObjectContents(),
      ...(opts.tokens === undefined ? {} : { tokens: opts.tokens }),
    }),
  ];
}
