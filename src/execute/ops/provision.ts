/**
 * The provisioner's operations, run through the driver's controller: CreateVolume
 * (external-provisioner Provision), DeleteVolume (Delete) and ControllerExpandVolume (the
 * external-resizer). What they make of the world is the fold's (src/kubelet/provisioning.ts).
 */
import type { OpId } from '../../ids.js';
import type { PluginCaps, ProvisionedVolume } from '../../events/index.js';
import type { ClusterObject } from '../../events/k8s.js';
import type { StorageOperation } from '../../kubelet/planner.js';
import type { ProvisionerOps } from '../../plugins/types.js';
import { lookupOf } from '../../binding/claims.js';
import type { RunningOp } from '../../operations/types.js';
import { type OpContext, failOperation, runCall } from '../context.js';

type Of<K extends StorageOperation['op']> = Extract<StorageOperation, { op: K }>;

/**
 * What provisioning needs of a world: its running operations and its objects (the
 * kubelet's and the controller's both: whoever binds claims provisions).
 */
type ProvisioningWorld = {
  running: Map<OpId, RunningOp>;
  readonly objects: ReadonlyMap<string, ClusterObject>;
  readonly plugins: ReadonlyMap<string, PluginCaps>;
};

/** A provisioning context of either engine (the kubelet's or the controller's). */
type Ctx<O> = OpContext<ProvisioningWorld, O>;

function provisionerOf<O>(ctx: Ctx<O>, driver: string, what: string): ProvisionerOps {
  const provisioner = ctx.host.plugins.find(driver)?.provisioner;
  if (provisioner === undefined)
    failOperation(
      `${what} failed: CSI driver "${driver}" is not registered or cannot create volumes ` +
        '(no CREATE_DELETE_VOLUME); start the driver, vole retries',
      'transient',
    );
  return provisioner;
}

/** CreateVolume named `pvc-<claim uid>`; the PV is recorded when it answers. */
export async function provision<O>(ctx: Ctx<O>, op: Of<'provision'>): Promise<void> {
  // The planner refused the request (a reserved parameter key, topology): retried with
  // backoff, so a fixed class goes on.
  if (op.refused !== undefined) failOperation(op.refused);
  const request = op.provision;
  const provisioner = provisionerOf(ctx, request.driver, 'CreateVolume');
  await runCall(
    ctx,
    {
      call: 'createVolume',
      plugin: ctx.host.plugins.find(request.driver),
      prefix: `failed to provision volume with StorageClass "${request.storageClassName}"`,
      succeeded: (provisioned: ProvisionedVolume) => ({
        provisioned,
        sizeBytes: provisioned.capacityBytes,
      }),
    },
    (target) => provisioner.createVolume(request, target),
  );
}

/** The PV an operation names, with its CSI source. */
function csiPvOf<O>(ctx: Ctx<O>, pvName: string, what: string) {
  const pv = lookupOf(ctx.host.world().objects).lookup('PersistentVolume', pvName);
  const csi = pv?.kind === 'PersistentVolume' ? pv.spec.csi : undefined;
  if (pv?.kind !== 'PersistentVolume' || csi?.volumeHandle === undefined)
    failOperation(`${what} failed: PersistentVolume "${pvName}" is gone or not a CSI volume`);
  return { pv, driver: csi.driver, volumeHandle: csi.volumeHandle, fsType: csi.fsType ?? '' };
}

/** deleteVolumeOperation: DeleteVolume of a Released PV; the PV goes when it answers. */
export async function deleteVolume<O>(ctx: Ctx<O>, op: Of<'deleteVolume'>): Promise<void> {
  const { driver, volumeHandle } = csiPvOf(ctx, op.pv, 'DeleteVolume');
  const provisioner = provisionerOf(ctx, driver, 'DeleteVolume');
  await runCall(
    ctx,
    {
      call: 'deleteVolume',
      prefix: `failed to delete volume ${op.pv}`,
      plugin: ctx.host.plugins.find(driver),
    },
    (target) => provisioner.deleteVolume({ volume: op.volume, volumeHandle }, target),
  );
}

/**
 * The resizer: ControllerExpandVolume when the driver has controller expansion; without
 * it the PV's size is the request at once and the node expands (a call with no RPC).
 */
export async function controllerExpand<O>(ctx: Ctx<O>, op: Of<'controllerExpand'>): Promise<void> {
  const { pv, driver, volumeHandle, fsType } = csiPvOf(ctx, op.pv, 'ControllerExpandVolume');
  const provisioner = ctx.host.plugins.find(driver)?.provisioner;
  const nodeExpandable = ctx.host.world().plugins.get(driver)?.nodeExpandable === true;
  const v = {
    volume: op.volume,
    volumeHandle,
    sizeBytes: op.sizeBytes,
    accessModes: pv.spec.accessModes ?? [],
    volumeMode: pv.spec.volumeMode ?? 'Filesystem',
    fsType,
  };
  await runCall(
    ctx,
    {
      call: 'controllerExpand',
      prefix: `failed to expand volume ${op.pv}`,
      plugin: ctx.host.plugins.find(driver),
      succeeded: (r: { capacityBytes: number; nodeExpansionRequired: boolean }) => ({
        sizeBytes: r.capacityBytes,
        nodeExpansionRequired: r.nodeExpansionRequired && nodeExpandable,
      }),
    },
    async (target) =>
      provisioner?.controllerExpand === undefined
        ? { capacityBytes: op.sizeBytes, nodeExpansionRequired: true }
        : provisioner.controllerExpand(v, target),
  );
}
