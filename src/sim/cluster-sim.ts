/**
 * The simulated cluster of `vole chaos --cluster` (cluster-chaos.ts) on the virtual clock:
 * two or three controller replicas and two or three node agents, each the real cluster
 * code (cluster-replica.ts, cluster-node.ts) on its own client of the simulated store
 * (store-sim.ts), a reader following the controller log as `vole inspect --etcd` does, and
 * a cloud where the disks really attach (cluster-cloud.ts). The faults are in
 * cluster-faults.ts, the checks in cluster-checks.ts: after every step, no ReadWriteOnce
 * disk on two nodes, no unforced detach of a disk its node reports in use, no event of
 * any log lost, the snapshot whole, the cores' own invariants; at the end, with every
 * fault over, one leader, the reader at the log's head, the cloud, each node's
 * volumesAttached and every node holding exactly what the present pods need, nothing running.
 */
import type { LogLimits } from '../cluster/etcd-log.js';
import { ClusterKeys } from '../cluster/keys.js';
import { EtcdLogMirror } from '../cluster/log-mirror.js';
import { decodeVolumesInUse } from '../cluster/status.js';
import type { TxnOp } from '../cluster/store.js';
import { sleep, VirtualClock } from '../clock.js';
import type { PersistentVolume, PersistentVolumeClaim, Pod } from '../events/k8s.js';
import { type FakeCallRecord, FakeHost } from '../plugins/fake.js';
import { prng } from './chaos.js';
import { LogArchive } from './cluster-archive.js';
import { SimCloud } from './cluster-cloud.js';
import { type ClusterPlan, clusterTimings } from './cluster-draw.js';
import { SimNodeAgent } from './cluster-node.js';
import { SimReplica } from './cluster-replica.js';
import { simulationPlugins } from './plugins.js';
import { SimStore, type StoreChange } from './store-sim.js';
import { SimStoreClient } from './store-sim-client.js';
import { advance, settle } from './quiescence.js';

/**
 * The log's limits in the simulation: small, so that a run's few hundred events (rows of
 * 100–450 bytes) fill many segments, a row in five goes in parts, and a burst of events
 * commits in several transactions.
 */
const simLogLimits: LogLimits = {
  txnBytes: 2 * 1024,
  segmentBytes: 256,
  segmentsPerTxn: 10,
};
/** Snapshots (and compaction) this often, paced by size as in production. */
const simSnapshotEveryEvents = 16;

export interface ClusterChaosOptions {
  /** The deliberately broken fencing rule (a deposed leader may write): the checks must bite. */
  readonly unfenced?: boolean;
  /** Given the simulation before it starts (tests look inside it afterwards). */
  readonly onSim?: (sim: ClusterSim) => void;
}

export const volumeOfDisk = (disk: number) => `fake.disk/disk-${disk}`;

export class ClusterSim {
  readonly clock = new VirtualClock(0);
  readonly keys = new ClusterKeys();
  readonly store: SimStore;
  readonly cloud: SimCloud;
  readonly admin: SimStoreClient;
  readonly archive: LogArchive;
  /** A fault waiting for its moment: told of each change as it lands; true once it fired. */
  trap: ((change: StoreChange) => boolean) | null = null;
  /** The controller log's reader (`vole inspect --etcd`), following it from its own client. */
  reader: { readonly client: SimStoreClient; readonly mirror: EtcdLogMirror } | null = null;
  readonly replicas = new Map<string, SimReplica>();
  readonly retired: SimReplica[] = [];
  readonly agents = new Map<string, SimNodeAgent>();
  readonly hosts = new Map<string, FakeHost>();
  readonly journal: FakeCallRecord[] = [];
  readonly present = new Map<string, Pod>();
  readonly failures: string[] = [];
  readonly trace: string[] = [];
  readonly faults: Record<string, number> = {};
  private events = 0;
  /** When the store's current out-of-space fault ends. */
  noSpaceUntilMs = 0;
  private adminQueue: Promise<void> = Promise.resolve();

  constructor(
    readonly plan: ClusterPlan,
    readonly opts: ClusterChaosOptions,
  ) {
    // The faults' own draws come from a second stream: the plan's draws stay as they are.
    const random = prng(plan.seed ^ 0x5bd1e995);
    this.store = new SimStore(this.clock, random);
    this.archive = new LogArchive(this.keys, (message) => this.fail(message));
    this.store.onChange = (change) => {
      this.archive.take(change);
      if (this.trap?.(change) === true) this.trap = null;
    };
    this.admin = new SimStoreClient(this.store, this.clock, 'vole apply');
    const rwo = new Set(Array.from({ length: plan.disks }, (_, d) => volumeOfDisk(d)));
    this.cloud = new SimCloud(this.clock, random, rwo, {
      inUse: (volume, node) => this.inUse(volume, node),
      confirmedOn: (replica, volume) => this.replicas.get(replica)?.confirmedOn(volume) ?? [],
      forced: (replica, volume, node) =>
        this.replicas.get(replica)?.detachDecision(volume, node).forced,
      violation: (message) => this.fail(message),
    });
    for (const node of plan.nodes) this.addAgent(node, random);
  }

  private addAgent(node: string, random: () => number): void {
    const host = new FakeHost();
    this.hosts.set(node, host);
    const delay = () => ({
      outcome: 'ok' as const,
      delayMs: 100 + Math.floor(random() * 3_000),
      times: 1,
    });
    const transient = { outcome: 'transient' as const, delayMs: 0, times: 1 };
    const faults = {
      mountDevice: [delay(), transient],
      setUp: [delay()],
      unmountDevice: [delay(), transient],
      tearDown: [delay()],
    };
    const plugins = simulationPlugins([{ name: 'fake.disk', attachable: true, faults }], {
      clock: this.clock,
      journal: this.journal,
      host,
      node,
    });
    const agent = new SimNodeAgent({
      node,
      store: this.store,
      keys: this.keys,
      clock: this.clock,
      plugins,
      heartbeatTtlS: clusterTimings.heartbeatTtlMs / 1000,
      onEvent: () => this.events++,
      say: () => undefined,
    });
    this.agents.set(node, agent);
  }

  say(line: string): void {
    this.trace.push(`${(this.clock.nowMs() / 1000).toFixed(3)}s ${line}`);
  }

  fail(message: string): void {
    const line = `${(this.clock.nowMs() / 1000).toFixed(3)}s ${message}`;
    if (!this.failures.some((f) => f.endsWith(message))) this.failures.push(line);
  }

  private inUse(volume: string, node: string): boolean {
    const kv = this.store.get(this.keys.volumesInUse(node));
    const reported = kv === undefined ? [] : (decodeVolumesInUse(kv) ?? []);
    return reported.includes(volume) || this.hosts.get(node)?.devicesMounted.has(volume) === true;
  }

  startReplica(identity: string): void {
    const previous = this.replicas.get(identity);
    if (previous !== undefined) this.retired.push(previous);
    const unfenced = this.opts.unfenced === true;
    const replica = new SimReplica({
      identity,
      store: this.store,
      keys: this.keys,
      clock: this.clock,
      leaseTtlS: clusterTimings.leaseTtlMs / 1000,
      maxWaitForUnmountMs: clusterTimings.maxWaitForUnmountMs,
      snapshotEveryEvents: simSnapshotEveryEvents,
      logLimits: simLogLimits,
      plugin: this.cloud.plugin(identity),
      ...(unfenced
        ? { broken: { ignoreCompares: true, blindTo: (key) => key === this.keys.leader } }
        : {}),
      onEvent: () => this.events++,
      say: (line) => this.say(`${identity}: ${line}`),
    });
    this.replicas.set(identity, replica);
    void replica.run();
  }

  leader(): SimReplica | undefined {
    return [...this.replicas.values()].find((r) => r.leading);
  }

  private activity(): number {
    return (
      this.events +
      this.store.requests +
      this.store.revision +
      this.cloud.calls.length +
      this.journal.length
    );
  }

  settle(): Promise<void> {
    return settle(() => this.activity(), 'cluster simulation');
  }

  advance(durationMs: number): Promise<void> {
    return advance(this.clock, durationMs, () => this.settle());
  }

  /**
   * An administrator's write (`vole apply`, `vole delete`), retried every second until the
   * store takes it; writes land in the order they were made.
   */
  adminWrite(ops: TxnOp[]): void {
    this.adminQueue = this.adminQueue.then(async () => {
      while (true) {
        try {
          return void (await this.admin.txn([], ops));
        } catch {
          await sleep(this.clock, 1_000);
        }
      }
    });
  }

  async start(): Promise<void> {
    const objects: TxnOp[] = [];
    for (let d = 0; d < this.plan.disks; d++) {
      const pv: PersistentVolume = {
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        metadata: { name: `pv-${d}` },
        spec: {
          accessModes: ['ReadWriteOnce'],
          capacity: { storage: '1Gi' },
          csi: { driver: 'fake.disk', volumeHandle: `disk-${d}` },
        },
      };
      const pvc: PersistentVolumeClaim = {
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        metadata: { name: `claim-${d}`, namespace: 'default', uid: `uid-claim-${d}` },
        spec: { volumeName: `pv-${d}`, accessModes: ['ReadWriteOnce'] },
      };
      objects.push({ put: this.keys.objectOf(pv), value: JSON.stringify(pv) });
      objects.push({ put: this.keys.objectOf(pvc), value: JSON.stringify(pvc) });
    }
    this.adminWrite(objects);
    for (const agent of this.agents.values()) void agent.start();
    for (const identity of this.plan.replicas) this.startReplica(identity);
    await this.advance(1_000);
    const client = new SimStoreClient(this.store, this.clock, 'vole inspect');
    let said = '';
    const warn = (message: string) => {
      if (message !== said) this.say(`vole inspect: ${message}`);
      said = message;
    };
    const mirror = await EtcdLogMirror.open(client, this.keys, this.clock, { warn, pollMs: 5_000 });
    this.reader = { client, mirror };
  }
}
