/** The disk driver's Node service (docs/csi.md: strict order and idempotency). */
import { mkdir, readFile, rm, rmdir, stat, statfs } from 'node:fs/promises';
import { basename } from 'node:path';
import { parseQuantityBytes } from '../../events/k8s.js';
import { findLoopForImage } from '../../host/loop.js';
import {
  attachDisk,
  bindDeviceFile,
  detachDisk,
  growDisk,
  mountDisk,
} from '../../host/loop-disk.js';
import { bindMount, ensureUnmounted, isMountPoint } from '../../host/mount.js';
import {
  type CsiRequest,
  type DriverContext,
  type Handler,
  accessTypeOf,
  fsTypeOf,
} from './common.js';
import {
  alreadyExists,
  DriverError,
  failedPrecondition,
  invalid,
  notFound,
  required,
} from './errors.js';
import { checkVolumeId } from './state.js';

export function nodeHandlers(ctx: DriverContext): Record<string, Handler> {
  return {
    NodeStageVolume: (r) => nodeStage(ctx, r),
    async NodeUnstageVolume(r) {
      const rpc = 'NodeUnstageVolume';
      const id = checkVolumeId(required(r.volume_id, 'volume_id', rpc), rpc);
      const staging = required(r.staging_target_path, 'staging_target_path', rpc);
      await ensureUnmounted(staging);
      await ctx.state.removeStaged(id);
      if (ctx.opts.nodeAttach === true) await detachDisk(ctx.state.image(id)); // --node-attach
      return {};
    },
    NodePublishVolume: (r) => nodePublish(ctx, r),
    NodeUnpublishVolume: (r) => nodeUnpublish(ctx, r),
    NodeExpandVolume: (r) => nodeExpand(ctx, r),
    NodeGetVolumeStats: (r) => volumeStats(ctx, r),
    NodeGetCapabilities: async () => ({
      capabilities: [
        'STAGE_UNSTAGE_VOLUME',
        'GET_VOLUME_STATS',
        'EXPAND_VOLUME',
        'VOLUME_CONDITION',
      ].map((type) => ({ rpc: { type } })),
    }),
    NodeGetInfo: async () => ({
      node_id: ctx.opts.nodeId,
      max_volumes_per_node: String(ctx.opts.maxVolumesPerNode ?? 0),
      accessible_topology: { segments: ctx.segments },
    }),
  };
}

/** The loop device of the volume's image here; FAILED_PRECONDITION when it is not published. */
async function deviceOf(image: string, id: string, rpc: string): Promise<string> {
  const device = await findLoopForImage(image);
  // NodeExpandVolume's FAILED_PRECONDITION means "in use, cannot grow online" (never retried).
  const error = rpc === 'NodeExpandVolume' ? notFound : failedPrecondition;
  if (device === undefined)
    throw error(
      `${rpc}: volume ${id} is not published to this node; ControllerPublishVolume it first`,
    );
  return device;
}

/**
 * With --node-attach, the size of a volume the driver did not create and has no image of
 * yet: `volume_context.size` (the PV's csi.volumeAttributes.size), at which attachDisk
 * makes its image. 0 when the image is there.
 */
async function staticSize(
  ctx: DriverContext,
  id: string,
  r: CsiRequest,
  rpc: string,
): Promise<number> {
  const image = ctx.state.image(id);
  if ((await stat(image).catch(() => undefined)) !== undefined) return 0;
  const sizeBytes = parseQuantityBytes(r.volume_context?.size);
  if (sizeBytes === undefined || sizeBytes <= 0)
    throw notFound(
      `${rpc}: volume ${id} does not exist; create it (CreateVolume) or give its size in the ` +
        "PV's csi.volumeAttributes.size (e.g. 64Mi)",
    );
  return sizeBytes;
}

/**
 * NodeStageVolume: format if blank and mount at the staging path (Filesystem), or only
 * record the staging (Block). The same arguments again are OK; another capability or
 * staging path is ALREADY_EXISTS.
 */
async function nodeStage(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const rpc = 'NodeStageVolume';
  const id = checkVolumeId(required(r.volume_id, 'volume_id', rpc), rpc);
  const stagingTargetPath = required(r.staging_target_path, 'staging_target_path', rpc);
  const accessType = accessTypeOf(r.volume_capability, rpc);
  const accessMode = r.volume_capability?.access_mode?.mode ?? 'UNKNOWN';
  // --node-attach: a static volume is made here, as ControllerPublishVolume makes it otherwise.
  const staticBytes = ctx.opts.nodeAttach === true ? await staticSize(ctx, id, r, rpc) : 0;
  const image = staticBytes > 0 ? ctx.state.image(id) : await ctx.imageOf(id, rpc);
  const staged = await ctx.state.readStaged(id);
  if (
    staged !== undefined &&
    (staged.stagingTargetPath !== stagingTargetPath || staged.accessType !== accessType)
  )
    throw alreadyExists(
      `${rpc}: volume ${id} is already staged at ${staged.stagingTargetPath} ` +
        `as ${staged.accessType}; ` +
        'NodeUnstageVolume it before staging it differently',
    );
  // --node-attach: no ControllerPublishVolume attached the disk; the node does it here.
  if (ctx.opts.nodeAttach === true && (await findLoopForImage(image)) === undefined) {
    const sizeBytes = (await ctx.state.readVolume(id))?.capacityBytes ?? staticBytes;
    const current = (await stat(image).catch(() => undefined))?.size ?? 0;
    await ctx.serially(() => attachDisk(image, Math.max(current, sizeBytes)));
  }
  const device = await deviceOf(image, id, rpc);
  if (accessType !== 'block') {
    const fsType = fsTypeOf(r.volume_capability!, rpc);
    const options = r.volume_capability?.mount?.mount_flags ?? [];
    await mountDisk({ device, target: stagingTargetPath, fsType, options });
  }
  await ctx.state.writeStaged(id, { stagingTargetPath, accessType, accessMode });
  await ctx.hold(rpc);
  return {};
}

/**
 * NodePublishVolume: bind the staging mount (Filesystem) or the device node (Block) onto
 * the target. Before NodeStageVolume it is FAILED_PRECONDITION.
 */
async function nodePublish(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const rpc = 'NodePublishVolume';
  const id = checkVolumeId(required(r.volume_id, 'volume_id', rpc), rpc);
  const targetPath = required(r.target_path, 'target_path', rpc);
  const stagingTargetPath = required(r.staging_target_path, 'staging_target_path', rpc);
  const accessType = accessTypeOf(r.volume_capability, rpc);
  if (r.volume_context?.['csi.storage.k8s.io/ephemeral'] === 'true')
    throw invalid(
      `${rpc}: ${id}: this driver does not serve inline ephemeral volumes; use a PersistentVolume`,
    );
  const image = await ctx.imageOf(id, rpc);
  const staged = await ctx.state.readStaged(id);
  if (staged === undefined || staged.stagingTargetPath !== stagingTargetPath)
    throw failedPrecondition(
      `${rpc}: volume ${id} is not staged at ${stagingTargetPath}; NodeStageVolume it first`,
    );
  if (staged.accessType !== accessType)
    throw alreadyExists(
      `${rpc}: volume ${id} is staged as ${staged.accessType}, not ${accessType}`,
    );
  if (accessType === 'block') {
    await bindDeviceFile(await deviceOf(image, id, rpc), targetPath);
  } else {
    if (!(await isMountPoint(stagingTargetPath)))
      throw failedPrecondition(
        `${rpc}: ${stagingTargetPath} is not mounted; NodeStageVolume it again`,
      );
    await mkdir(targetPath, { recursive: true, mode: 0o750 });
    if (!(await isMountPoint(targetPath)))
      await bindMount(stagingTargetPath, targetPath, { readOnly: r.readonly === true });
  }
  await ctx.hold(rpc);
  return {};
}

/** NodeUnpublishVolume: unmount and remove the target; absent is OK; unknown volume NOT_FOUND. */
async function nodeUnpublish(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const rpc = 'NodeUnpublishVolume';
  const id = checkVolumeId(required(r.volume_id, 'volume_id', rpc), rpc);
  const targetPath = required(r.target_path, 'target_path', rpc);
  if (!(await isMountPoint(targetPath))) await ctx.imageOf(id, rpc);
  await ensureUnmounted(targetPath);
  await rm(targetPath, { recursive: false, force: true }).catch(
    async (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EISDIR' && error.code !== 'ERR_FS_EISDIR') throw error;
      await rmdir(targetPath);
    },
  );
  return {};
}

/**
 * NodeExpandVolume: grow the loop device and the mounted filesystem to the image's size, or
 * to capacity_range.required_bytes when that is more (the image grows too: vole also runs
 * without an external resizer, so the node can do the controller's part). Spec order:
 * volume_id, then an unknown volume NOT_FOUND, then volume_path; capacity_range is optional.
 */
async function nodeExpand(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const rpc = 'NodeExpandVolume';
  const id = checkVolumeId(required(r.volume_id, 'volume_id', rpc), rpc);
  const image = await ctx.imageOf(id, rpc);
  const volumePath = required(r.volume_path, 'volume_path', rpc);
  const requiredBytes = Number(r.capacity_range?.required_bytes ?? 0);
  const limitBytes = Number(r.capacity_range?.limit_bytes ?? 0);
  if (!(requiredBytes >= 0 && limitBytes >= 0))
    throw invalid(`${rpc}: capacity_range must not be negative`);
  const device = await deviceOf(image, id, rpc);
  const staged = await ctx.state.readStaged(id);
  const block = staged?.accessType === 'block';
  if (!block && !(await isMountPoint(volumePath)))
    throw notFound(`${rpc}: volume_path ${volumePath} is not mounted`);
  const fsType = staged?.accessType === 'mount:xfs' ? 'xfs' : 'ext4';
  const sizeBytes = Math.max(requiredBytes, (await stat(image)).size);
  if (limitBytes > 0 && sizeBytes > limitBytes)
    throw new DriverError(
      'OUT_OF_RANGE',
      `${rpc}: volume ${id} is ${sizeBytes} bytes, above limit_bytes ${limitBytes}`,
    );
  await growDisk({
    image,
    device,
    newSizeBytes: sizeBytes,
    mountPath: block ? '' : volumePath,
    fsType,
  });
  const record = await ctx.state.readVolume(id);
  if (record !== undefined && record.capacityBytes < sizeBytes)
    await ctx.state.writeVolume(id, { ...record, capacityBytes: sizeBytes });
  return { capacity_bytes: String(sizeBytes) };
}

/**
 * NodeGetVolumeStats: bytes and inodes of the mounted filesystem, or a Block device's size;
 * the volume is abnormal when its image is attached to no loop device.
 */
async function volumeStats(ctx: DriverContext, r: CsiRequest): Promise<object> {
  const rpc = 'NodeGetVolumeStats';
  const id = checkVolumeId(required(r.volume_id, 'volume_id', rpc), rpc);
  const volumePath = required(r.volume_path, 'volume_path', rpc);
  const image = await ctx.imageOf(id, rpc);
  const st = await stat(volumePath).catch(() => undefined);
  if (st === undefined) throw notFound(`${rpc}: volume_path ${volumePath} does not exist`);
  const device = await findLoopForImage(image);
  const condition =
    device === undefined
      ? { abnormal: true, message: `the image of ${id} is attached to no loop device here` }
      : { abnormal: false, message: `on ${device}` };
  if (st.isBlockDevice()) {
    const sizeBytes = device === undefined ? '0' : String(await deviceSizeBytes(device));
    return {
      usage: [{ unit: 'BYTES', total: sizeBytes, available: '0', used: '0' }],
      volume_condition: condition,
    };
  }
  if (!(await isMountPoint(volumePath)))
    throw notFound(`${rpc}: volume ${id} is not mounted at ${volumePath}`);
  const s = await statfs(volumePath);
  const bytes = (n: number) => String(n * s.bsize);
  return {
    volume_condition: condition,
    usage: [
      {
        unit: 'BYTES',
        total: bytes(s.blocks),
        available: bytes(s.bavail),
        used: bytes(s.blocks - s.bfree),
      },
      {
        unit: 'INODES',
        total: String(s.files),
        available: String(s.ffree),
        used: String(s.files - s.ffree),
      },
    ],
  };
}

/** A block device's size (sysfs counts 512-byte sectors). */
async function deviceSizeBytes(device: string): Promise<number> {
  const sectors = await readFile(`/sys/class/block/${basename(device)}/size`, 'utf8');
  return Number(sectors.trim()) * 512;
}
