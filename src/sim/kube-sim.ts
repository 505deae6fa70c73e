/**
 * The simulated Kubernetes cluster of `vole chaos --kube` (kube-chaos.ts) on the virtual
 * clock: the real node agent (src/kube/agent.ts, around the kubelet core with its own log
 * and a scripted CSI driver on a pretend host) on each node, two replicas of the real
 * attach/detach controller (src/kube/controller.ts) campaigning for one Lease, all on
 * clients of the simulated API server (kube-api-sim.ts); the harness plays the CSI
 * external-attacher (a cloud where disks attach to one node at a time) and the user who
 * creates and deletes pods. The checks are kube-checks.ts.
 */
import pino from 'pino';
import { VolumeManager } from '../agent/volume-manager.js';
import { VirtualClock } from '../clock.js';
import { InvariantChecker } from '../engine/core.js';
import { kubeletCore } from '../engine/cores.js';
import { MemorySink } from '../engine/sink.js';
import { KubeAgent } from '../kube/agent.js';
import { KubeController } from '../kube/controller.js';
import { controllerAttachedNow } from '../kube/node-status.js';
import type { JsonObject } from '../kube/http.js';
import { type FakeCallRecord, FakeHost } from '../plugins/fake.js';
import type { World } from '../kubelet/types.js';
import { prng } from './chaos.js';
import { KubeAttacher } from './kube-attacher.js';
import { type KubeChange, SimKubeApi, type SimKubeClient } from './kube-api-sim.js';
import { simulationPlugins } from './plugins.js';
import { advance, settle } from './quiescence.js';

/** One silent logger for every process of every run (each pino() opens a stream). */
const silentLogger = pino({ level: 'silent' });

export const kubeTimings = {
  leaseDurationMs: 15_000,
  /** Short, so that a node down for a minute sees a forced detach within the run. */
  maxWaitForUnmountMs: 60_000,
  /** How long the end of a run lets everything settle with every fault over. */
  livenessMs: 180_000,
  /**
   * The same for a short run (kube-chaos.ts): of 60 short seeds, every one had converged
   * and stayed so 10 s into the end; a minute leaves room for a pod's 30 s grace period.
   */
  shortLivenessMs: 60_000,
} as const;

export const leasePath = '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/vole-ad';
export const driver = 'fake.disk';
export const handleOf = (disk: number) => `disk-${disk}`;
/** The unique volume name the kubelet and the controller give disk `disk` (CSI). */
export const volumeOf = (disk: number) => `kubernetes.io/csi/${driver}^${handleOf(disk)}`;

export interface KubeSimOptions {
  /** A planted bug: the agents never report a volume in use (the checks must bite). */
  readonly blindInUse?: boolean;
  /** Given the simulation before it starts (tests look inside it afterwards). */
  readonly onSim?: (sim: KubeSim) => void;
}

/** One node: its host, its log (kept across restarts) and the agent process, if up. */
export class SimKubeNode {
  readonly host = new FakeHost();
  readonly sink = new MemorySink();
  readonly checker = new InvariantChecker<World>(kubeletCore.invariants);
  readonly journal: FakeCallRecord[] = [];
  process: { client: SimKubeClient; vm: VolumeManager; agent: KubeAgent } | null = null;
  runs = 0;

  constructor(readonly name: string) {}
}

/** One controller replica: its identity and its current process, if up. */
export class SimKubeReplica {
  process: { client: SimKubeClient; controller: KubeController; stop: AbortController } | null =
    null;
  runs = 0;
  /** Its log, kept across restarts as its SQLite file would be. */
  readonly sink = new MemorySink();
  /** Forced detaches it started: `volume|node`, with the reason logged. */
  readonly forced = new Map<string, string>();

  constructor(readonly identity: string) {}
}

export class KubeSim {
  readonly clock = new VirtualClock(Date.UTC(2026, 0, 1));
  readonly api: SimKubeApi;
  readonly admin: SimKubeClient;
  readonly attacher: KubeAttacher;
  readonly nodes = new Map<string, SimKubeNode>();
  readonly replicas = new Map<string, SimKubeReplica>();
  readonly failures: string[] = [];
  readonly trace: string[] = [];
  readonly faults: Record<string, number> = {};
  /** The user's create of each pod, retried until it lands: its delete waits for it. */
  readonly podCreates = new Map<string, Promise<void>>();
  /** Pods the user created and has not deleted: name → node and disk. */
  readonly present = new Map<string, { node: string; disk: number }>();
  checks = 0;
  /** Pods deleted while their node's agent was cut off or down (the leak check's case). */
  deletedWhileAway = 0;
  private events = 0;
  /** Change hooks of the checks (kube-checks.ts). */
  readonly onChange: ((change: KubeChange, client: string) => void)[] = [];

  constructor(
    readonly seed: number,
    nodes: readonly string[],
    replicas: readonly string[],
    readonly disks: number,
    readonly opts: KubeSimOptions = {},
  ) {
    const random = prng(seed ^ 0x2545f491);
    this.api = new SimKubeApi(this.clock, random);
    this.admin = this.api.client('user');
    this.attacher = new KubeAttacher(this, random);
    this.api.onChange = (write) => {
      for (const hook of this.onChange) hook(write.change, write.client);
    };
    for (const node of nodes) this.nodes.set(node, new SimKubeNode(node));
    for (const identity of replicas) this.replicas.set(identity, new SimKubeReplica(identity));
  }

  say(line: string): void {
    this.trace.push(`${this.secondsNow()}s ${line}`);
  }

  fail(message: string): void {
    const line = `${this.secondsNow()}s ${message}`;
    if (!this.failures.some((f) => f.endsWith(message))) this.failures.push(line);
  }

  private secondsNow(): string {
    return ((this.clock.nowMs() - Date.UTC(2026, 0, 1)) / 1000).toFixed(3);
  }

  count(fault: string): void {
    this.faults[fault] = (this.faults[fault] ?? 0) + 1;
  }

  /** A user's write, retried every second until the API server takes it. */
  async userWrite(what: string, write: () => Promise<unknown>): Promise<void> {
    for (let attempt = 0; attempt < 600; attempt++) {
      try {
        await write();
        return;
      } catch (error) {
        const status = (error as { statusCode?: number }).statusCode;
        if (status === 409 || status === 404) return; // done by a try that seemed to fail
        await new Promise<void>((resolve) =>
          this.clock.setTimer(this.clock.nowMs() + 1_000, resolve),
        );
      }
    }
    this.fail(`the user could not ${what} in 10 minutes`);
  }

  /** PVs, claims bound to them, the CSIDriver: what the user made before the run. */
  async setUp(): Promise<void> {
    const csiDriver = {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'CSIDriver',
      metadata: { name: driver },
      spec: { attachRequired: true },
    };
    await this.userWrite('create the CSIDriver', () =>
      this.admin.post('/apis/storage.k8s.io/v1/csidrivers', csiDriver),
    );
    for (let d = 0; d < this.disks; d++) {
      const { pv, pvc } = boundPair(d);
      await this.userWrite(`create pv-${d}`, () =>
        this.admin.post('/api/v1/persistentvolumes', pv),
      );
      await this.userWrite(`create claim-${d}`, () =>
        this.admin.post('/api/v1/namespaces/default/persistentvolumeclaims', pvc),
      );
    }
  }

  // --- nodes ---

  startAgent(name: string): void {
    const node = this.nodes.get(name)!;
    if (node.process !== null) return;
    node.runs++;
    const client = this.api.client(`agent:${name}#${node.runs}`);
    const plugins = simulationPlugins(
      [{ name: driver, csi: { publishUnpublish: true, stageUnstage: true } }],
      { clock: this.clock, journal: node.journal, host: node.host, node: name },
    );
    const http = this.opts.blindInUse === true ? blindToInUse(client) : client;
    const vm = VolumeManager.create({
      node: name,
      plugins,
      clock: this.clock,
      controllerAttachDetach: true,
      controllerAttachedCheck: controllerAttachedNow(http, name),
      bindClaims: false,
      csiDriverObjects: true,
      logger: silentLogger,
      log: { sink: node.sink, history: node.sink.events },
    });
    vm.subscribe((_event, world) => {
      this.events++;
      node.checker.after(world);
    });
    const agent = new KubeAgent({
      http,
      clock: this.clock,
      node: name,
      vm,
      controllerAttachDetach: true,
      logger: silentLogger,
      say: (line) => this.say(`${name}: ${line}`),
    });
    node.process = { client, vm, agent };
    void this.runAgent(node, node.process);
  }

  /** Starts it; one that cannot start (the API failing) exits and is started again. */
  private async runAgent(node: SimKubeNode, process: NonNullable<SimKubeNode['process']>) {
    try {
      process.vm.start({ hostObserved: await process.vm.checkHost() });
      await process.agent.start();
    } catch (error) {
      if (node.process !== process) return;
      this.say(`${node.name}: the agent could not start (${(error as Error).message}); again`);
      this.stopAgent(node.name);
      this.clock.setTimer(this.clock.nowMs() + 2_000, () => this.startAgent(node.name));
    }
  }

  /** The agent process is killed: nothing more of it reaches the API or the host. */
  stopAgent(name: string): void {
    const node = this.nodes.get(name)!;
    const process = node.process;
    if (process === null) return;
    node.process = null;
    process.client.kill();
    void process.agent.stop().catch(() => undefined);
    process.vm.stop();
  }

  // --- replicas ---

  startReplica(identity: string): void {
    const replica = this.replicas.get(identity)!;
    if (replica.process !== null) return;
    replica.runs++;
    const client = this.api.client(`replica:${identity}#${replica.runs}`);
    const controller = new KubeController({
      http: client,
      clock: this.clock,
      db: `${identity}.db`,
      log: { sink: replica.sink, history: replica.sink.events },
      identity,
      leaseNamespace: 'kube-system',
      leaseName: 'vole-ad',
      leaseDurationMs: kubeTimings.leaseDurationMs,
      maxWaitForUnmountMs: kubeTimings.maxWaitForUnmountMs,
      logger: silentLogger,
      say: (line) => this.say(`${identity}: ${line}`),
      onManager: (cm) =>
        cm.subscribe((event) => {
          this.events++;
          if (event.type === 'OperationStarted' && event.forced !== undefined)
            replica.forced.set(`${event.volume}|${event.node ?? ''}`, event.forced);
        }),
    });
    const stop = new AbortController();
    replica.process = { client, controller, stop };
    void this.runReplica(replica, replica.process);
  }

  /** Leads until the Lease is lost, then exits and is started again, as a Deployment's. */
  private async runReplica(
    replica: SimKubeReplica,
    process: NonNullable<SimKubeReplica['process']>,
  ): Promise<void> {
    const result = await process.controller
      .run(process.stop.signal)
      .catch((error: Error) => ({ lost: true, message: error.message }));
    if (replica.process !== process) return;
    this.say(`${replica.identity}: exits (${result.message}); started again`);
    this.killReplica(replica.identity);
    this.clock.setTimer(this.clock.nowMs() + 1_000, () => this.startReplica(replica.identity));
  }

  killReplica(identity: string): void {
    const replica = this.replicas.get(identity)!;
    const process = replica.process;
    if (process === null) return;
    replica.process = null;
    process.client.kill();
    // Its engine stops with it: the abort is never heard by the API (the client is dead).
    process.stop.abort();
  }

  // --- time ---

  private activity(): number {
    return this.events + this.api.requests + this.api.resourceVersion;
  }

  settle(): Promise<void> {
    // Everything here runs on the virtual clock and in memory: no real timer, no I/O.
    return settle(() => this.activity(), 'kube simulation', true);
  }

  advance(durationMs: number): Promise<void> {
    return advance(this.clock, durationMs, () => this.settle());
  }

  /** The Node's status.volumesInUse as the API server holds it now. */
  volumesInUse(node: string): string[] {
    const object = this.api.peek(`/api/v1/nodes/${node}`);
    return ((object?.status ?? {}) as { volumesInUse?: string[] }).volumesInUse ?? [];
  }
}

/** pv-d (disk-d of the CSI driver) and claim-d, bound to each other, ReadWriteOnce. */
function boundPair(d: number): { pv: JsonObject; pvc: JsonObject } {
  const pv = {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name: `pv-${d}` },
    spec: {
      accessModes: ['ReadWriteOnce'],
      capacity: { storage: '1Gi' },
      csi: { driver, volumeHandle: handleOf(d) },
      claimRef: { namespace: 'default', name: `claim-${d}`, uid: `uid-claim-${d}` },
    },
    status: { phase: 'Bound' },
  };
  const pvc = {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: `claim-${d}`, namespace: 'default', uid: `uid-claim-${d}` },
    spec: {
      volumeName: `pv-${d}`,
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: '1Gi' } },
    },
    status: { phase: 'Bound', accessModes: ['ReadWriteOnce'], capacity: { storage: '1Gi' } },
  };
  return { pv, pvc };
}

/** The planted bug: an agent whose volumesInUse patches always say "none". */
function blindToInUse(client: SimKubeClient): SimKubeClient {
  const patch = client.patch.bind(client);
  const blind = Object.create(client) as SimKubeClient;
  blind.patch = (path, body, type) => {
    const status = (body as { status?: { volumesInUse?: unknown } }).status;
    if (path.endsWith('/status') && status?.volumesInUse !== undefined)
      return patch(path, { status: { ...status, volumesInUse: null } }, type);
    return patch(path, body, type);
  };
  return blind;
}
