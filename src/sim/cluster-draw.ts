/**
 * What one seed of `vole chaos --cluster` runs: the cluster's size, its disks, and the
 * steps — pods coming, going and moving between nodes, time passing, and the faults of
 * cluster mode. The order of the draws is the seed's meaning: keep it, or old seeds stop
 * reproducing.
 */
import type { Pod } from '../events/k8s.js';
import { prng } from './chaos.js';

export type ClusterStep =
  | { readonly addPod: Pod }
  | { readonly removePod: { readonly uid: string } }
  | { readonly advance: number }
  /** The leading controller is killed (SIGKILL) in the middle of an attach. */
  | { readonly killLeader: Record<string, never> }
  /** The leading controller is killed after writing a snapshot's chunks, before its meta. */
  | { readonly killLeaderMidSnapshot: Record<string, never> }
  /**
   * The leading controller is killed as one of its log transactions lands, its answer lost:
   * between two transactions of one commit (a segment boundary) when it can.
   */
  | { readonly crashMidCommit: Record<string, never> }
  /** The log's reader (`vole inspect --etcd`) is cut off while the log is compacted. */
  | { readonly partitionReader: number }
  /** etcd compacts its history: reads at an older revision are refused. */
  | { readonly compactStore: Record<string, never> }
  | { readonly startReplica: Record<string, never> }
  /** The store's leader member is lost for this long. */
  | { readonly storeLeaderLost: number }
  /** The store refuses writes (NOSPACE) for this long. */
  | { readonly noSpace: number }
  /** The leading controller is cut off from the store for this long (longer than its TTL). */
  | { readonly partitionLeader: number }
  /** A node agent is stopped for this long (longer than maxWaitForUnmount); its disk's pod leaves. */
  | { readonly stopAgent: { readonly node: string; readonly durationMs: number } };

export interface ClusterPlan {
  readonly seed: number;
  readonly nodes: string[];
  readonly replicas: string[];
  readonly disks: number;
  readonly steps: ClusterStep[];
}

/** Timing of the simulated cluster (etcd leases, the controller's wait for unmount). */
export const clusterTimings = {
  leaseTtlMs: 5_000,
  heartbeatTtlMs: 10_000,
  maxWaitForUnmountMs: 60_000,
  /** The liveness phase: every fault over, everything restarted, time for backoffs. */
  livenessMs: 20 * 60_000,
} as const;

type Random = () => number;
const int = (r: Random, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
const pick = <T>(r: Random, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;

export function podOf(k: number, node: string, disk: number, scratch: boolean): Pod {
  const volumes: Pod['spec']['volumes'] = [
    { name: 'data', persistentVolumeClaim: { claimName: `claim-${disk}` } },
  ];
  if (scratch) volumes.push({ name: 'scratch', emptyDir: {} });
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `pod-${k}`, namespace: 'default', uid: `uid-${k}` },
    spec: { nodeName: node, volumes },
  } as Pod;
}

/** The disk a pod claims (each pod claims one). */
export function diskOf(pod: Pod): number {
  const claim = pod.spec.volumes?.find((v) => v.persistentVolumeClaim !== undefined)
    ?.persistentVolumeClaim?.claimName;
  return Number(claim?.split('-')[1]);
}

class Drawing {
  readonly steps: ClusterStep[] = [];
  /** Present pods by disk: a disk is claimed by one present pod at most. */
  readonly byDisk = new Map<number, Pod>();
  private podCount = 0;
  dead = 0;

  constructor(
    readonly r: Random,
    readonly nodes: string[],
    readonly replicas: number,
    readonly disks: number,
  ) {}

  freeDisks(): number[] {
    return Array.from({ length: this.disks }, (_, d) => d).filter((d) => !this.byDisk.has(d));
  }

  add(disk: number, node: string): void {
    const pod = podOf(this.podCount++, node, disk, this.r() < 0.5);
    this.byDisk.set(disk, pod);
    this.steps.push({ addPod: pod });
  }

  remove(disk: number): Pod {
    const pod = this.byDisk.get(disk)!;
    this.byDisk.delete(disk);
    this.steps.push({ removePod: { uid: pod.metadata.uid! } });
    return pod;
  }

  /** A pod appears, or one moves to another node: an attach follows. */
  churn(): void {
    const free = this.freeDisks();
    if (free.length > 0 && (this.byDisk.size === 0 || this.r() < 0.6)) {
      return this.add(pick(this.r, free), pick(this.r, this.nodes));
    }
    const disk = pick(
      this.r,
      [...this.byDisk.keys()].sort((a, b) => a - b),
    );
    const from = this.remove(disk).spec.nodeName!;
    this.add(
      disk,
      pick(
        this.r,
        this.nodes.filter((n) => n !== from),
      ),
    );
  }

  /** A step that kills the leader: a standby is started first when none would be left. */
  private kill(step: ClusterStep): void {
    if (this.dead >= this.replicas - 1) {
      this.steps.push({ startReplica: {} });
      this.dead--;
    }
    this.churn();
    this.steps.push(step);
    this.dead++;
  }

  fault(roll: number): void {
    const r = this.r;
    if (roll < 0.2) this.kill({ killLeader: {} });
    else if (roll < 0.3) this.steps.push({ storeLeaderLost: int(r, 1_000, 15_000) });
    else if (roll < 0.4) this.steps.push({ noSpace: int(r, 1_000, 20_000) });
    else if (roll < 0.5) {
      this.churn();
      this.steps.push({ partitionLeader: int(r, clusterTimings.leaseTtlMs + 500, 20_000) });
    } else if (roll < 0.57) this.kill({ killLeaderMidSnapshot: {} });
    else if (roll < 0.64) this.kill({ crashMidCommit: {} });
    else if (roll < 0.74) {
      this.steps.push({ partitionReader: int(r, 5_000, 60_000) });
      this.churn();
      this.churn();
    } else if (roll < 0.8) {
      this.churn();
      this.steps.push({ compactStore: {} });
    } else {
      const node = pick(r, this.nodes);
      const durationMs = clusterTimings.maxWaitForUnmountMs + int(r, 15_000, 90_000);
      this.steps.push({ stopAgent: { node, durationMs } });
      // Its pod moves away while it is down: the old node still reports the disk in use.
      const disk = [...this.byDisk].find(([, pod]) => pod.spec.nodeName === node)?.[0];
      if (disk !== undefined) {
        this.remove(disk);
        this.add(
          disk,
          pick(
            r,
            this.nodes.filter((n) => n !== node),
          ),
        );
      }
    }
  }
}

export function drawClusterPlan(seed: number): ClusterPlan {
  const r = prng(seed);
  const nodes = Array.from({ length: int(r, 2, 3) }, (_, i) => `node-${i + 1}`);
  const replicas = Array.from(
    { length: int(r, 2, 3) },
    (_, i) => `controller-${String.fromCharCode(97 + i)}`,
  );
  const d = new Drawing(r, nodes, replicas.length, int(r, 2, 4));
  for (let i = int(r, 1, d.disks); i > 0; i--) d.churn();
  d.steps.push({ advance: 20_000 });
  const stepCount = int(r, 8, 16);
  for (let s = 0; s < stepCount; s++) {
    const roll = r();
    if (roll < 0.3) d.churn();
    else if (roll < 0.4 && d.byDisk.size > 0)
      d.remove(
        pick(
          r,
          [...d.byDisk.keys()].sort((a, b) => a - b),
        ),
      );
    else if (roll < 0.55) d.steps.push({ advance: int(r, 500, 30_000) });
    else if (roll < 0.65 && d.dead > 0) {
      d.steps.push({ startReplica: {} });
      d.dead--;
    } else d.fault(r());
  }
  return { seed, nodes, replicas, disks: d.disks, steps: d.steps };
}
