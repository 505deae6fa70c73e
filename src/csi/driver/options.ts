/** How `vole csi-driver` runs the disk driver. */
export interface DiskDriverOptions {
  /** This node's id: NodeGetInfo's node_id and the value of the driver's topology segment. */
  readonly nodeId: string;
  readonly stateDir: string;
  /** NodeGetInfo's max_volumes_per_node (0: no limit). */
  readonly maxVolumesPerNode?: number;
  /**
   * How many bytes the volumes it creates may take together (`--capacity`). With it the
   * driver advertises GET_CAPACITY and answers OUT_OF_RANGE beyond it; without it there is
   * no limit and no GET_CAPACITY.
   */
  readonly capacityBytes?: number;
  /**
   * `--node-attach`: the node attaches each disk itself, at NodeStageVolume, and detaches it
   * at NodeUnstageVolume; the controller service has no PUBLISH_UNPUBLISH_VOLUME, as a
   * driver deployed with a CSIDriver of `attachRequired: false`.
   */
  readonly nodeAttach?: boolean;
  /**
   * Fault injection for tests: after doing this RPC's work, and before answering, write
   * `<state-dir>/held-<RPC>` and never answer (so a test can kill the driver mid-RPC).
   */
  readonly holdIn?: string;
}
