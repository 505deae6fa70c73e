/**
 * When the leading controller snapshots its world into etcd: at most every `--snapshot-every`
 * events (the engine asks), and only once the log has grown by at least the previous
 * snapshot's size since it. A snapshot is the whole world (85 MiB for 45,000 pods, 1.3 s to
 * encode), so at a fixed interval of 10,000 events (about 2.5 MiB of log) a large cluster
 * would write its world to etcd forty times for each copy of the log: the snapshots, not
 * the log, would fill etcd and stall the leader. Paced by size, what snapshots write stays
 * at most what the log writes, and a restart folds at most one snapshot's worth of log.
 */
export class SnapshotPacer {
  /**
   * `snapshotBytes`: the size of the snapshot the leader started from (0: none); the log's
   * bytes are counted from this writer's start.
   */
  constructor(
    private snapshotBytes: number,
    private logBytesAtSnapshot = 0,
  ) {}

  /** Whether a snapshot is due, with `logBytes` committed by this writer so far. */
  due(logBytes: number): boolean {
    return logBytes - this.logBytesAtSnapshot >= this.snapshotBytes;
  }

  saved(snapshotBytes: number, logBytes: number): void {
    this.snapshotBytes = snapshotBytes;
    this.logBytesAtSnapshot = logBytes;
  }
}
