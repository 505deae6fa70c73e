/**
 * `disk.csi.vole.dev`: the loop disk (src/host/loop-disk.ts) as a CSI driver, strict about
 * the spec's order and idempotency rules (CSI.md): CreateVolume is idempotent by name,
 * DeleteVolume of an unknown id is OK and of a published one refused, NodeStageVolume
 * repeats with the same arguments are OK and with another capability ALREADY_EXISTS,
 * NodePublishVolume before NodeStageVolume is FAILED_PRECONDITION, unpublish and unstage
 * of what is not there are OK. ControllerPublishVolume attaches the image to a loop device
 * (controller and node are one host here) and answers its path as publish_context.
 */
import { rm, stat, writeFile } from 'node:fs/promises';
import { engineVersion } from '../../engine/engine.js';
import { parseQuantityBytes } from '../../events/k8s.js';
import { ensureImage } from '../../host/fs.js';
import { attachDisk, detachDisk, isDiskAttached } from '../../host/loop-disk.js';
import {
  accessTypeOf,
  type CsiRequest,
  diskCsiDriverName,
  type DriverContext,
  type Handler,
} from './common.js';
import { alreadyExists, failedPrecondition, invalid, notFound, required } from './errors.js';
import { nodeHandlers } from './node.js';
import type { DiskDriverOptions } from './options.js';
import { checkVolumeId, DriverState } from './state.js';



/** Every RPC of the three services, by name. */
export function diskDriverHandlers(opts: DiskDriverOptions): Record<string, Handler> {
  const state = new DriverState(opts.stateDir);
  const ctx: DriverContext = {
    opts,
    state,
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
  };
  return { ...identityHandlers(), ...controllerHandlers(ctx), ...nodeHandlers(ctx) };
}

async function present(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined)) !== undefined;
}

function identityHandlers(): Record<string, Handler> {
  return {
    GetPluginInfo: async () => ({ name: diskCsiDriverName, vendor_version: engineVersion, manifest: {} }),
    GetPluginCapabilities: async () => ({
      capabilities: [
        { service: { type: 'CONTROLLER_SERVICE' } },
        { volume_expansion: { type: 'ONLINE' } },
      ],
    }),
    Probe: async () => ({ ready: { value: true } }),
  };
}

function controllerHandlers(ctx: DriverContext): Record<string, Handler> {
  return {
    CreateVolume: (r) => createVolume(ctx, r),
    DeleteVolume: (r) => deleteVolume(ctx, r),
    ControllerPublishVolume: (r) => controllerPublish(ctx, r),
    async ControllerUnpublishVolume(r) {
      const id = checkVolumeId(required(r.volume_id, 'volume_id', 'ControllerUnpublishVolume'), 'ControllerUnpublishVolume');
      const staged = await ctx.state.readStaged(id);
      if (staged !== undefined)
        throw failedPrecondition(
          `ControllerUnpublishVolume: volume ${id} is still staged at ${staged.stagingTargetPath}; ` +
            'NodeUnstageVolume it first',
        );
      await detachDisk(ctx.state.image(id));
      return {};
    },
    ControllerExpandVolume: (r) => controllerExpand(ctx, r),
    ControllerGetCapabilities: async () => ({
      capabilities: ['CREATE_DELETE_VOLUME', 'PUBLISH_UNPUBLISH_VOLUME', 'EXPAND_VOLUME'].map((type) => ({
        rpc: { type },
      })),
    }),
  };
}

/** CreateVolume: idempotent by name; the same name with an incompatible capacity is ALREADY_EXISTS. */
async function createVolume(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const name = required(r.name, 'name', 'CreateVolume');
  if ((r.volume_capabilities ?? []).length === 0) throw invalid('CreateVolume: volume_capabilities is required');
  for (const capability of r.volume_capabilities!) accessTypeOf(capability, 'CreateVolume');
  const id = checkVolumeId(name, 'CreateVolume');
  const requiredBytes = Number(r.capacity_range?.required_bytes ?? 0);
  const limitBytes = Number(r.capacity_range?.limit_bytes ?? 0);
  const capacityBytes = requiredBytes > 0 ? requiredBytes : limitBytes > 0 ? limitBytes : 64 << 20;
  const existing = await ctx.state.readVolume(id);
  if (existing !== undefined) {
    const fits =
      existing.capacityBytes >= requiredBytes && (limitBytes === 0 || existing.capacityBytes <= limitBytes);
    if (!fits)
      throw alreadyExists(
        `CreateVolume: volume ${name} exists with ${existing.capacityBytes} bytes, which does not fit ` +
          `the requested range; use another name or the same capacity`,
      );
    return { volume: volumeOf(id, existing.capacityBytes) };
  }
  await ensureImage(ctx.state.image(id), capacityBytes);
  await ctx.state.writeVolume(id, { name, capacityBytes });
  return { volume: volumeOf(id, capacityBytes) };
}

function volumeOf(id: string, capacityBytes: number): object {
  return { volume_id: id, capacity_bytes: String(capacityBytes), volume_context: { size: String(capacityBytes) } };
}

/** DeleteVolume: an unknown id is OK; a volume still attached (published) is refused. */
async function deleteVolume(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const id = checkVolumeId(required(r.volume_id, 'volume_id', 'DeleteVolume'), 'DeleteVolume');
  const image = ctx.state.image(id);
  if (await isDiskAttached(image))
    throw failedPrecondition(`DeleteVolume: volume ${id} is still published; ControllerUnpublishVolume it first`);
  await rm(image, { force: true });
  await ctx.state.removeVolume(id);
  return {};
}

/**
 * ControllerPublishVolume: the image on a loop device of this node. A static volume the
 * driver did not create is made from `volume_context.size` (CSI.md).
 */
async function controllerPublish(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const rpc = 'ControllerPublishVolume';
  const id = checkVolumeId(required(r.volume_id, 'volume_id', rpc), rpc);
  const nodeId = required(r.node_id, 'node_id', rpc);
  accessTypeOf(r.volume_capability, rpc);
  if (nodeId !== ctx.opts.nodeId)
    throw notFound(`${rpc}: node ${nodeId} is not known to this driver (it serves node ${ctx.opts.nodeId})`);
  const image = ctx.state.image(id);
  let sizeBytes = (await ctx.state.readVolume(id))?.capacityBytes;
  if (sizeBytes === undefined && !(await present(image))) {
    sizeBytes = parseQuantityBytes(r.volume_context?.size);
    if (sizeBytes === undefined || sizeBytes <= 0)
      throw notFound(
        `${rpc}: volume ${id} does not exist; create it (CreateVolume) or give its size in the ` +
          'PV\'s csi.volumeAttributes.size (e.g. 64Mi)',
      );
  }
  const current = (await stat(image).catch(() => undefined))?.size ?? 0;
  const device = await attachDisk(image, Math.max(current, sizeBytes ?? 0));
  return { publish_context: { devicePath: device } };
}

async function controllerExpand(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const rpc = 'ControllerExpandVolume';
  const id = checkVolumeId(required(r.volume_id, 'volume_id', rpc), rpc);
  const image = await ctx.imageOf(id, rpc);
  const requiredBytes = Number(r.capacity_range?.required_bytes ?? 0);
  if (!(requiredBytes > 0)) throw invalid(`${rpc}: capacity_range.required_bytes is required`);
  await ensureImage(image, requiredBytes);
  const record = await ctx.state.readVolume(id);
  if (record !== undefined) await ctx.state.writeVolume(id, { ...record, capacityBytes: requiredBytes });
  return { capacity_bytes: String(requiredBytes), node_expansion_required: true };
}


export { diskCsiDriverName, type DiskDriverOptions };
