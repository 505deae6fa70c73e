/**
 * What a core tells the readers of its world (metrics, post-mortems, the CLI, the
 * inspector): the Core interface's reader part (src/engine/core.ts), below both cores so
 * each implements it (src/kubelet/readers.ts, src/controller/readers.ts).
 */
import type { Decision } from '../events/index.js';
import type { PersistentVolume } from '../events/k8s.js';
import type { UniqueVolumeName } from '../ids.js';
import type { ResolvedVolume } from './volume-spec.js';

/** The kinds of pair a world keeps (the controller keeps attachments only). */
export type PairKind = 'attachment' | 'mount';

/** An operation as its OperationStarted names it. */
export interface OperationRef {
  readonly opId: string;
  readonly volume: string;
  readonly node?: string | undefined;
  readonly pod?: string | undefined;
}

/** Which metric families a core's engine exports (docs/operating.md): its Kubernetes component's. */
export interface CoreMetricFamilies {
  /** volume_manager_total_volumes (kubelet) or attachdetach_controller_total_volumes. */
  readonly totalVolumes: string;
  /** The node's own: csi_operations_seconds, reconstruction, provisioning. */
  readonly node: boolean;
  /** The controller's own: forced detaches, storage_count_attachable_volumes_in_use. */
  readonly controller: boolean;
}

/** What a world's gauges read on scrape: specs desired and actual, uncertain pairs. */
export interface CoreGauges {
  /** The spec of each desired (volume, pod) or (volume, node). */
  readonly desired: ResolvedVolume[];
  /** The spec of each mounted (volume, pod) or attached (volume, node). */
  readonly actual: ResolvedVolume[];
  /** Pairs whose state may or may not exist, by the kinds the world keeps. */
  readonly uncertain: ReadonlyMap<PairKind, number>;
  /** Desired attachable volumes by node (the controller's; empty for a node). */
  readonly inUse: { readonly node: string; readonly spec: ResolvedVolume }[];
}

/**
 * What a core tells the readers of its world (metrics, post-mortems, the CLI, the
 * inspector), so none of them tests the mode or the world's shape. Methods (not function
 * properties): a reader of either core holds a CoreReader<CoreWorld>.
 */
export interface CoreReader<W> {
  /** The kinds of pair its world keeps. */
  readonly pairs: readonly PairKind[];
  readonly metrics: CoreMetricFamilies;
  /** The spec of the volume an operation acts on, from the world after its OperationStarted. */
  operationSpec(world: W, op: OperationRef): ResolvedVolume | undefined;
  /** A PersistentVolume the world keeps (undefined: not there, or a core that keeps none). */
  persistentVolume(world: W, name: string): PersistentVolume | undefined;
  gauges(world: W): CoreGauges;
  /**
   * What a decision acts on, as a verifier names it: the volume (a node's own decisions),
   * or volume@node (the controller's, one per attachment).
   */
  decisionTarget(d: Decision): string;
  /**
   * The volumes whose plan makes the claim decisions (a binding, pvc-protection's release)
   * that verify re-plans; empty for a core that makes none of them in its plan.
   */
  readonly claimDecisionVolumes: readonly UniqueVolumeName[];
}

/** The attachment states that mean "may exist" (an attach or a device mount uncertain). */
export const uncertainAttachments: ReadonlySet<string> = new Set([
  'attachUncertain',
  'attachDeviceUncertain',
  'attached.deviceUncertain',
]);
