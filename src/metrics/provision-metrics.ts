/**
 * The provisioner's metrics, derived from the log like the rest (docs/design.md "Metrics are a
 * fold too"), under the names the CSI sidecars and sig-storage-lib-external-provisioner
 * export, so their dashboards read vole's:
 *
 * - `csi_sidecar_operations_seconds` {driver_name, method_name, grpc_status_code}: every
 *   controller RPC of provisioning (CreateVolume, DeleteVolume, ControllerExpandVolume) —
 *   its `_count` is the count of calls by driver, method and outcome;
 * - `controller_persistentvolumeclaim_provision_total` / `_failed_total` {class}, and
 *   `controller_persistentvolume_delete_total` / `_failed_total` {class}: provisioning and
 *   deletion attempts that ended, by StorageClass.
 */
import { Counter, Histogram, type Registry } from 'prom-client';
import type { EventOf, VoleEvent } from '../events/index.js';
import { grpcCodeLabel, kubernetesSecondsBuckets } from './names.js';

/** The controller RPCs of provisioning (not the kubelet's csi_operations_seconds). */
export const provisioningMethods: ReadonlySet<string> = new Set([
  '/csi.v1.Controller/CreateVolume',
  '/csi.v1.Controller/DeleteVolume',
  '/csi.v1.Controller/ControllerExpandVolume',
]);

interface Started {
  readonly kind: 'provision' | 'delete' | 'expand';
  readonly driver: string;
  readonly storageClass: string;
}

/** What the world says of a PV an operation names (driver, class); empty when unknown. */
export type PvLookup = (pv: string) => { driver: string; storageClass: string } | undefined;

export class ProvisionMetrics {
  private readonly started = new Map<string, Started>();
  readonly sidecarOperations: Histogram<'driver_name' | 'method_name' | 'grpc_status_code'>;
  readonly provisionTotal: Counter<'class'>;
  readonly provisionFailed: Counter<'class'>;
  readonly deleteTotal: Counter<'class'>;
  readonly deleteFailed: Counter<'class'>;

  constructor(registers: Registry[]) {
    this.sidecarOperations = new Histogram({
      name: 'csi_sidecar_operations_seconds',
      help: 'Container Storage Interface operation duration with gRPC error code status total',
      labelNames: ['driver_name', 'method_name', 'grpc_status_code'],
      buckets: [...kubernetesSecondsBuckets],
      registers,
    });
    const counter = (name: string, help: string) =>
      new Counter({ name, help, labelNames: ['class'], registers });
    this.provisionTotal = counter(
      'controller_persistentvolumeclaim_provision_total',
      'Persistent volume claims provisioned, by storage class',
    );
    this.provisionFailed = counter(
      'controller_persistentvolumeclaim_provision_failed_total',
      'Failed attempts to provision a persistent volume claim, by storage class',
    );
    this.deleteTotal = counter(
      'controller_persistentvolume_delete_total',
      'Persistent volumes deleted, by storage class',
    );
    this.deleteFailed = counter(
      'controller_persistentvolume_delete_failed_total',
      'Failed attempts to delete a persistent volume, by storage class',
    );
  }

  get metrics(): { reset(): void }[] {
    return [
      this.sidecarOperations,
      this.provisionTotal,
      this.provisionFailed,
      this.deleteTotal,
      this.deleteFailed,
    ];
  }

  reset(): void {
    this.started.clear();
  }

  /** The driver of a provisioning operation (its metrics' driver_name), or undefined. */
  driverOf(opId: string): string | undefined {
    return this.started.get(opId)?.driver;
  }

  observe(event: VoleEvent, pvOf: PvLookup): void {
    if (event.type === 'OperationStarted') this.start(event, pvOf);
    else if (event.type === 'OperationFinished') this.finish(event);
    else if (event.type === 'CallSucceeded' || event.type === 'CallFailed') this.rpc(event);
  }

  private start(event: EventOf<'OperationStarted'>, pvOf: PvLookup): void {
    if (event.provision !== undefined) {
      const { driver, storageClassName } = event.provision;
      this.started.set(event.opId, { kind: 'provision', driver, storageClass: storageClassName });
      return;
    }
    if (event.op !== 'deleteVolume' && event.op !== 'controllerExpand') return;
    const pv = event.pv === undefined ? undefined : pvOf(event.pv);
    this.started.set(event.opId, {
      kind: event.op === 'deleteVolume' ? 'delete' : 'expand',
      driver: pv?.driver ?? '',
      storageClass: pv?.storageClass ?? '',
    });
  }

  private finish(event: EventOf<'OperationFinished'>): void {
    const op = this.started.get(event.opId);
    if (op === undefined) return;
    this.started.delete(event.opId);
    const labels = { class: op.storageClass };
    const ok = event.outcome === 'ok';
    if (op.kind === 'provision') (ok ? this.provisionTotal : this.provisionFailed).inc(labels);
    if (op.kind === 'delete') (ok ? this.deleteTotal : this.deleteFailed).inc(labels);
  }

  private rpc(event: EventOf<'CallSucceeded'> | EventOf<'CallFailed'>): void {
    if (event.rpc === undefined || !provisioningMethods.has(event.rpc.method)) return;
    this.sidecarOperations.observe(
      {
        driver_name: this.started.get(event.opId)?.driver ?? '',
        method_name: event.rpc.method,
        grpc_status_code: grpcCodeLabel(event.rpc.code),
      },
      event.rpc.durationMs / 1000,
    );
  }
}
