/**
 * The disk driver's Controller service: volumes are image files under the state dir on this
 * node. CreateVolume is idempotent by name (ALREADY_EXISTS for the same name with a capacity
 * outside the requested range), honours the requested topology (the node's own segment) and
 * the `--capacity` budget (OUT_OF_RANGE beyond it); DeleteVolume of an unknown id is OK and
 * of a published one refused; ControllerPublishVolume attaches the image to a loop device
 * (controller and node are one host here) and answers its path as publish_context.
 */
import { rm, stat } from 'node:fs/promises';
import { dirname, sep } from 'node:path';
import { parseQuantityBytes } from '../../events/k8s.js';
import { ensureImage } from '../../host/fs.js';
import { attachDisk, detachDisk, isDiskAttached } from '../../host/loop-disk.js';
import { listLoops } from '../../host/loop.js';
import {
  accessTypeOf,
  checkCapabilities,
  type CsiRequest,
  diskCsiDriverName,
  type DriverContext,
  type Handler,
  unsupportedReason,
} from './common.js';
import {
  DriverError,
  alreadyExists,
  failedPrecondition,
  invalid,
  notFound,
  required,
} from './errors.js';
import { checkVolumeId, type VolumeRecord, volumeIdOf } from './state.js';
import { placeVolume, segmentsMatch } from './topology.js';

/** A CreateVolume without a capacity range gets this much. */
const defaultVolumeBytes = 64 * 2 ** 20;

/** mkfs.xfs refuses smaller devices (xfsprogs 5.19 and later). */
const xfsVolumeBytesMin = 300 * 2 ** 20;

/**
 * The size of a new volume: required_bytes, else the default within limit_bytes; raised to
 * the minimum a requested xfs filesystem needs when the range allows (OUT_OF_RANGE if not).
 */
function newVolumeBytes(r: CsiRequest, range: { requiredBytes: number; limitBytes: number }) {
  const { requiredBytes, limitBytes } = range;
  const wantedBytes =
    requiredBytes > 0
      ? requiredBytes
      : limitBytes > 0
        ? Math.min(limitBytes, defaultVolumeBytes)
        : defaultVolumeBytes;
  const xfs = (r.volume_capabilities ?? []).some((c) => c.mount?.fs_type === 'xfs');
  if (!xfs || wantedBytes >= xfsVolumeBytesMin) return wantedBytes;
  if (limitBytes > 0 && limitBytes < xfsVolumeBytesMin)
    throw outOfRange(
      `CreateVolume: xfs needs at least ${xfsVolumeBytesMin} bytes, ` +
        `above limit_bytes ${limitBytes}; allow more or use ext4`,
    );
  return xfsVolumeBytesMin;
}

export function controllerHandlers(ctx: DriverContext): Record<string, Handler> {
  const publish = ctx.opts.nodeAttach === true ? [] : ['PUBLISH_UNPUBLISH_VOLUME'];
  const published = ctx.opts.nodeAttach === true ? [] : ['LIST_VOLUMES_PUBLISHED_NODES'];
  const capabilities = [
    'CREATE_DELETE_VOLUME',
    ...publish,
    'LIST_VOLUMES',
    ...published,
    'EXPAND_VOLUME',
  ];
  if (ctx.opts.capacityBytes !== undefined) capabilities.push('GET_CAPACITY');
  return {
    CreateVolume: (r) => createVolume(ctx, r),
    DeleteVolume: (r) => deleteVolume(ctx, r),
    ControllerPublishVolume: (r) => controllerPublish(ctx, r),
    ControllerUnpublishVolume: (r) => controllerUnpublish(ctx, r),
    ValidateVolumeCapabilities: (r) => validateCapabilities(ctx, r),
    ListVolumes: (r) => listVolumes(ctx, r),
    ...(ctx.opts.capacityBytes === undefined
      ? {}
      : { GetCapacity: (r: CsiRequest) => getCapacity(ctx, r) }),
    ControllerExpandVolume: (r) => controllerExpand(ctx, r),
    ControllerGetCapabilities: async () => ({
      capabilities: capabilities.map((type) => ({ rpc: { type } })),
    }),
  };
}

const outOfRange = (message: string) => new DriverError('OUT_OF_RANGE', message);

/** required_bytes and limit_bytes (0: not set); INVALID_ARGUMENT when they contradict. */
function rangeOf(r: CsiRequest, rpc: string): { requiredBytes: number; limitBytes: number } {
  const requiredBytes = Number(r.capacity_range?.required_bytes ?? 0);
  const limitBytes = Number(r.capacity_range?.limit_bytes ?? 0);
  if (!(requiredBytes >= 0 && limitBytes >= 0))
    throw invalid(`${rpc}: capacity_range must not be negative`);
  if (limitBytes > 0 && requiredBytes > limitBytes)
    throw invalid(
      `${rpc}: capacity_range.required_bytes ${requiredBytes} is above limit_bytes ${limitBytes}`,
    );
  return { requiredBytes, limitBytes };
}

/** Bytes the driver's volumes may still take (Infinity without `--capacity`). */
async function remainingBytes(ctx: DriverContext): Promise<number> {
  if (ctx.opts.capacityBytes === undefined) return Number.POSITIVE_INFINITY;
  const used = (await ctx.state.listVolumes()).reduce((sum, v) => sum + v.record.capacityBytes, 0);
  return Math.max(0, ctx.opts.capacityBytes - used);
}

function volumeOf(id: string, record: VolumeRecord): object {
  return {
    volume_id: id,
    capacity_bytes: String(record.capacityBytes),
    volume_context: {},
    accessible_topology: record.segments === undefined ? [] : [{ segments: record.segments }],
  };
}

async function createVolume(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const rpc = 'CreateVolume';
  const name = required(r.name, 'name', rpc);
  checkCapabilities(r.volume_capabilities, rpc);
  if (r.volume_content_source !== null && r.volume_content_source !== undefined)
    throw invalid(
      `${rpc}: ${diskCsiDriverName} creates only empty volumes (no snapshot or clone source)`,
    );
  const unknown = Object.keys(r.parameters ?? {});
  if (unknown.length > 0)
    throw invalid(`${rpc}: ${diskCsiDriverName} takes no parameters; remove ${unknown.join(', ')}`);
  const { requiredBytes, limitBytes } = rangeOf(r, rpc);
  const segments = placeVolume(ctx.segments, r.accessibility_requirements, rpc);
  const id = volumeIdOf(name);
  return ctx.serially(async () => {
    const existing = await ctx.state.readVolume(id);
    if (existing !== undefined) {
      const fits =
        existing.capacityBytes >= requiredBytes &&
        (limitBytes === 0 || existing.capacityBytes <= limitBytes);
      if (existing.name !== name || !fits)
        throw alreadyExists(
          `${rpc}: volume ${name} exists with ${existing.capacityBytes} bytes, ` +
            'which does not fit ' +
            'the requested range; use another name or the same capacity',
        );
      return { volume: volumeOf(id, existing) };
    }
    const sizeBytes = newVolumeBytes(r, { requiredBytes, limitBytes });
    const remaining = await remainingBytes(ctx);
    if (sizeBytes > remaining)
      throw outOfRange(
        `${rpc}: ${sizeBytes} bytes asked, ` +
          `${remaining} of --capacity ${ctx.opts.capacityBytes} left`,
      );
    const record: VolumeRecord = { name, capacityBytes: sizeBytes, segments };
    await ensureImage(ctx.state.image(id), sizeBytes);
    await ctx.state.writeVolume(id, record);
    return { volume: volumeOf(id, record) };
  });
}

/** DeleteVolume: an unknown id is OK; a volume still attached (published) is refused. */
async function deleteVolume(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const id = checkVolumeId(required(r.volume_id, 'volume_id', 'DeleteVolume'), 'DeleteVolume');
  return ctx.serially(async () => {
    const image = ctx.state.image(id);
    if (await isDiskAttached(image))
      throw failedPrecondition(
        `DeleteVolume: volume ${id} is still published; ControllerUnpublishVolume it first`,
      );
    await rm(image, { force: true });
    await ctx.state.removeVolume(id);
    return {};
  });
}

/**
 * ControllerPublishVolume: the image on a loop device of this node. A static volume the
 * driver did not create is made from `volume_context.size` (docs/csi.md).
 */
async function controllerPublish(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const rpc = 'ControllerPublishVolume';
  const id = checkVolumeId(required(r.volume_id, 'volume_id', rpc), rpc);
  const nodeId = required(r.node_id, 'node_id', rpc);
  accessTypeOf(r.volume_capability, rpc);
  const image = ctx.state.image(id);
  const record = await ctx.state.readVolume(id);
  let sizeBytes = record?.capacityBytes;
  if (sizeBytes === undefined && !(await present(image))) {
    sizeBytes = parseQuantityBytes(r.volume_context?.size);
    if (sizeBytes === undefined || sizeBytes <= 0)
      throw notFound(
        `${rpc}: volume ${id} does not exist; create it (CreateVolume) or give its size in the ` +
          "PV's csi.volumeAttributes.size (e.g. 64Mi)",
      );
  }
  if (nodeId !== ctx.opts.nodeId)
    throw notFound(
      `${rpc}: node ${nodeId} is not known to this driver (it serves node ${ctx.opts.nodeId})`,
    );
  if (record?.segments !== undefined && !segmentsMatch(record.segments, ctx.segments))
    throw failedPrecondition(
      `${rpc}: volume ${id} is accessible from ${JSON.stringify(record.segments)}, ` +
        'not from this node',
    );
  return ctx.serially(async () => {
    await checkAttachLimit(ctx, image, rpc);
    const current = (await stat(image).catch(() => undefined))?.size ?? 0;
    const device = await attachDisk(image, Math.max(current, sizeBytes ?? 0));
    return { publish_context: { devicePath: device } };
  });
}

/** RESOURCE_EXHAUSTED when attaching one more image would pass --max-volumes-per-node. */
async function checkAttachLimit(ctx: DriverContext, image: string, rpc: string): Promise<void> {
  const limit = ctx.opts.maxVolumesPerNode ?? 0;
  if (limit === 0 || (await isDiskAttached(image))) return;
  const images = dirname(image) + sep;
  const attached = (await listLoops()).filter((l) => l.backFile.startsWith(images)).length;
  if (attached >= limit)
    throw new DriverError(
      'RESOURCE_EXHAUSTED',
      `${rpc}: node ${ctx.opts.nodeId} has ${attached} volume(s) of ${diskCsiDriverName} ` +
        `attached, its limit (max_volumes_per_node ${limit}); unpublish one first`,
    );
}

async function controllerUnpublish(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const rpc = 'ControllerUnpublishVolume';
  const id = checkVolumeId(required(r.volume_id, 'volume_id', rpc), rpc);
  const staged = await ctx.state.readStaged(id);
  if (staged !== undefined)
    throw failedPrecondition(
      `${rpc}: volume ${id} is still staged at ${staged.stagingTargetPath}; ` +
        'NodeUnstageVolume it first',
    );
  await detachDisk(ctx.state.image(id));
  return {};
}

async function present(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined)) !== undefined;
}

/** A volume the driver knows: one it created, or a static one whose image exists. */
async function known(ctx: DriverContext, id: string): Promise<VolumeRecord | 'static' | undefined> {
  const record = await ctx.state.readVolume(id);
  if (record !== undefined) return record;
  return (await present(ctx.state.image(id))) ? 'static' : undefined;
}

/**
 * ValidateVolumeCapabilities: `confirmed` echoes the request only when the driver gives
 * every capability asked; otherwise a message says which one it cannot.
 */
async function validateCapabilities(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const rpc = 'ValidateVolumeCapabilities';
  const id = checkVolumeId(required(r.volume_id, 'volume_id', rpc), rpc);
  const capabilities = r.volume_capabilities ?? [];
  if (capabilities.length === 0) throw invalid(`${rpc}: volume_capabilities is required`);
  if ((await known(ctx, id)) === undefined) throw notFound(`${rpc}: volume ${id} does not exist`);
  for (const capability of capabilities) {
    const reason = unsupportedReason(capability);
    if (reason !== undefined) return { message: `${diskCsiDriverName}: ${reason}` };
  }
  const unknown = Object.keys(r.parameters ?? {});
  if (unknown.length > 0)
    return { message: `${diskCsiDriverName} takes no parameters: ${unknown.join(', ')}` };
  return {
    confirmed: {
      volume_context: r.volume_context ?? {},
      volume_capabilities: capabilities,
      parameters: r.parameters ?? {},
    },
  };
}

/**
 * ListVolumes: the volumes the driver created, in id order; a page of max_entries (0: all)
 * starting at the index starting_token names, and next_token the index after it. Each
 * says whether it is published (attached to a loop device: this node) or not.
 */
async function listVolumes(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const rpc = 'ListVolumes';
  const maxEntries = r.max_entries ?? 0;
  if (maxEntries < 0) throw invalid(`${rpc}: max_entries must not be negative`);
  const volumes = await ctx.state.listVolumes();
  const token = r.starting_token ?? '';
  const start = token === '' ? 0 : /^[0-9]+$/.test(token) ? Number(token) : Number.NaN;
  if (!(start >= 0 && start <= volumes.length))
    throw new DriverError(
      'ABORTED',
      `${rpc}: starting_token "${token}" is not one this driver gave; list from the start`,
    );
  const end = maxEntries === 0 ? volumes.length : Math.min(volumes.length, start + maxEntries);
  const attached = new Set((await listLoops()).map((l) => l.backFile));
  return {
    entries: volumes.slice(start, end).map((v) => ({
      volume: volumeOf(v.id, v.record),
      status: { published_node_ids: attached.has(ctx.state.image(v.id)) ? [ctx.opts.nodeId] : [] },
    })),
    next_token: end < volumes.length ? String(end) : '',
  };
}

/**
 * GetCapacity: what `--capacity` leaves for new volumes here; 0 for another node or for
 * capabilities or parameters the driver cannot give.
 */
async function getCapacity(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const elsewhere =
    r.accessible_topology?.segments !== undefined &&
    !segmentsMatch(r.accessible_topology.segments, ctx.segments);
  const unsupported = (r.volume_capabilities ?? []).some((c) => unsupportedReason(c) !== undefined);
  const withParameters = Object.keys(r.parameters ?? {}).length > 0;
  const available = elsewhere || unsupported || withParameters ? 0 : await remainingBytes(ctx);
  return {
    available_capacity: String(available),
    maximum_volume_size: { value: String(available) },
  };
}

/**
 * ControllerExpandVolume: grows the image file. The loop device and the filesystem grow on
 * the node (NodeExpandVolume), except for a Block volume that is not attached anywhere.
 */
async function controllerExpand(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const rpc = 'ControllerExpandVolume';
  const id = checkVolumeId(required(r.volume_id, 'volume_id', rpc), rpc);
  if (r.capacity_range === null || r.capacity_range === undefined)
    throw invalid(`${rpc}: capacity_range is required`);
  const { requiredBytes, limitBytes } = rangeOf(r, rpc);
  return ctx.serially(async () => {
    const volume = await known(ctx, id);
    if (volume === undefined) throw notFound(`${rpc}: volume ${id} does not exist`);
    const image = ctx.state.image(id);
    const currentBytes = volume === 'static' ? (await stat(image)).size : volume.capacityBytes;
    const newBytes = Math.max(currentBytes, requiredBytes);
    if (limitBytes > 0 && newBytes > limitBytes)
      throw outOfRange(
        `${rpc}: volume ${id} is ${currentBytes} bytes, above limit_bytes ${limitBytes}; ` +
          'volumes never shrink',
      );
    if (volume !== 'static' && newBytes - currentBytes > (await remainingBytes(ctx)))
      throw outOfRange(
        `${rpc}: growing ${id} by ${newBytes - currentBytes} bytes exceeds what --capacity leaves`,
      );
    await ensureImage(image, newBytes);
    if (volume !== 'static')
      await ctx.state.writeVolume(id, { ...volume, capacityBytes: newBytes });
    const block =
      r.volume_capability?.access_type === 'block' || (r.volume_capability?.block ?? null) !== null;
    const nodeExpansionRequired = !block || (await isDiskAttached(image));
    return { capacity_bytes: String(newBytes), node_expansion_required: nodeExpansionRequired };
  });
}
