/**
 * The Kubernetes metric vocabulary (docs/operating.md): histogram buckets, operation names and
 * the plugin label of a volume, as pkg/volume/util/metrics.go spells them.
 */
import type { OperationKind } from '../events/index.js';
import type { ResolvedVolume } from '../operations/volume-spec.js';

/** Buckets of every Kubernetes `*_seconds` histogram vole emits. */
export const kubernetesSecondsBuckets = [
  0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600,
] as const;

/** vole's own append latency: a durable commit takes fractions of a millisecond to tens. */
export const appendSecondsBuckets = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
] as const;

/** Kubernetes' label for a plugin it cannot name. */
const pluginNameNotAvailable = 'N/A';

/**
 * The operation_name label of an operation; undefined for steps Kubernetes does not
 * measure (markDetached only forgets an attachment the controller reported gone).
 */
export function operationName(op: OperationKind, block: boolean): string | undefined {
  switch (op) {
    case 'attach':
      return 'volume_attach';
    case 'detach':
      return 'volume_detach';
    case 'verifyControllerAttached':
      return 'verify_controller_attached_volume';
    case 'mount':
      return block ? 'map_volume' : 'volume_mount';
    case 'unmount':
      return block ? 'unmap_volume' : 'volume_unmount';
    case 'unmountDevice':
      return block ? 'unmap_device' : 'unmount_device';
    case 'expand':
      return 'expand_volume';
    case 'markDetached':
      return undefined;
    // The persistent-volume controller's names for a provisioner's operations.
    case 'provision':
      return 'volume_provision';
    case 'deleteVolume':
      return 'volume_delete';
    case 'controllerExpand':
      return 'expand_volume';
  }
}

/**
 * The fully qualified plugin name (GetFullQualifiedPluginNameForVolume): CSI volumes are
 * `kubernetes.io/csi:<driver>`; an unknown plugin is `N/A`.
 */
export function pluginLabel(spec: ResolvedVolume | null | undefined, pluginName = ''): string {
  if (spec?.source.kind === 'csi') return `kubernetes.io/csi:${spec.source.driver}`;
  const name = spec?.traits.pluginName ?? pluginName;
  return name === '' ? pluginNameNotAvailable : name;
}

/** The driver_name label of csi_operations_seconds. */
export function driverLabel(spec: ResolvedVolume | null | undefined, pluginName = ''): string {
  if (spec?.source.kind === 'csi') return spec.source.driver;
  return spec?.traits.pluginName ?? pluginName;
}

/** gRPC's names where Go's codes.Code.String() spells them otherwise. */
const goCodeNames: Readonly<Record<string, string>> = { CANCELLED: 'Canceled' };

/**
 * The grpc_status_code label as Kubernetes writes it (Go's codes.Code.String():
 * `OK`, `DeadlineExceeded`, `FailedPrecondition`), from a code logged in gRPC's spelling
 * (`DEADLINE_EXCEEDED`) or already in Go's.
 */
export function grpcCodeLabel(code: string): string {
  if (code === 'OK' || !/^[A-Z_]+$/.test(code)) return code;
  return (
    goCodeNames[code] ??
    code
      .split('_')
      .map((word) => word.charAt(0) + word.slice(1).toLowerCase())
      .join('')
  );
}
