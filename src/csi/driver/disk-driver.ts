/**
 * `disk.csi.vole.dev`: the loop disk (src/host/loop-disk.ts) as a CSI driver, strict about
 * the spec's order and idempotency rules (docs/csi.md). Its Controller service provisions image
 * files under the state dir (controller.ts), its Node service stages and publishes them
 * (node.ts); every volume is on this node, whose topology segment is
 * `topology.disk.csi.vole.dev/node: <node id>`.
 */
import { stat, writeFile } from 'node:fs/promises';
import { engineVersion } from '../../engine/engine.js';
import { diskCsiDriverName, diskTopologyKey, type DriverContext, type Handler } from './common.js';
import { controllerHandlers } from './controller.js';
import { notFound } from './errors.js';
import { nodeHandlers } from './node.js';
import type { DiskDriverOptions } from './options.js';
import { checkVolumeId, DriverState } from './state.js';

/** Every RPC of the three services, by name. */
export function diskDriverHandlers(opts: DiskDriverOptions): Record<string, Handler> {
  const state = new DriverState(opts.stateDir);
  let queue: Promise<unknown> = Promise.resolve();
  const ctx: DriverContext = {
    opts,
    state,
    segments: { [diskTopologyKey]: opts.nodeId },
    async imageOf(id, rpc) {
      const image = state.image(checkVolumeId(id, rpc));
      if (!(await present(image))) throw notFound(`${rpc}: volume ${id} does not exist`);
      return image;
    },
    async hold(rpc) {
      if (opts.holdIn !== rpc) return;
      await writeFile(`${opts.stateDir}/held-${rpc}`, `${process.pid}\n`);
      await new Promise<never>(() => {});
    },
    serially(work) {
      const next = queue.then(work, work);
      queue = next.catch(() => undefined);
      return next;
    },
  };
  return { ...identityHandlers(), ...controllerHandlers(ctx), ...nodeHandlers(ctx) };
}

async function present(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined)) !== undefined;
}

function identityHandlers(): Record<string, Handler> {
  return {
    GetPluginInfo: async () => ({
      name: diskCsiDriverName,
      vendor_version: engineVersion,
      manifest: {},
    }),
    GetPluginCapabilities: async () => ({
      capabilities: [
        { service: { type: 'CONTROLLER_SERVICE' } },
        { service: { type: 'VOLUME_ACCESSIBILITY_CONSTRAINTS' } },
        { volume_expansion: { type: 'ONLINE' } },
      ],
    }),
    Probe: async () => ({ ready: { value: true } }),
  };
}

export { diskCsiDriverName, diskTopologyKey, type DiskDriverOptions };
