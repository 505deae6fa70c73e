/** How `vole csi-driver` runs the disk driver. */
export interface DiskDriverOptions {
  readonly nodeId: string;
  readonly stateDir: string;
  /** NodeGetInfo's max_volumes_per_node (0: no limit). */
  readonly maxVolumesPerNode?: number;
  /**
   * Fault injection for tests: after doing this RPC's work, and before answering, write
   * `<state-dir>/held-<RPC>` and never answer (so a test can kill the driver mid-RPC).
   */
  readonly holdIn?: string;
}
