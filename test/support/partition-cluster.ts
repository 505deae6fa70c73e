/**
 * Cluster mode on a network of its own (test/support/netns.ts): three etcd members, two
 * controller replicas and two node agents, each in a network namespace with its own
 * address, and an observer namespace (never cut) through which the test reaches etcd
 * (netns-relay.ts). Two ReadWriteOnce loop disks, one pod each; pods move between nodes.
 *
 * The observer watches etcd throughout: every volumesAttached the leader publishes (a
 * ReadWriteOnce disk published on two nodes is a violation at once), every heartbeat, and
 * every row of the controller log (a seq seen twice with different rows is a violation).
 * `history()` is the run's story: the faults with their times, and each process's own
 * output and etcd's leader changes, all on one clock.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:net';
import { join } from 'node:path';
import type { Etcd3, Watcher } from 'etcd3';
import { connect } from '../../src/cluster/client.js';
import { readLogEvents, SegmentDecoder } from '../../src/cluster/etcd-log.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import type { VoleEvent } from '../../src/events/index.js';
import { readMountTable } from '../../src/host/mountinfo.js';
import { EtcdCluster } from './etcd-cluster.js';
import { type Impairment, NetLab } from './netns.js';
import { loopbackRelay } from './netns-relay.js';
import { eventually, stamp, VoleProcess } from './vole-procs.js';

export const members = ['e0', 'e1', 'e2'] as const;
export const replicas = ['c1', 'c2'] as const;
export const nodes = ['n1', 'n2'] as const;
export const disks = ['a', 'b'] as const;
export type Disk = (typeof disks)[number];
export type Node = (typeof nodes)[number];
export const leaseTtlS = 3;
export const heartbeatTtlS = 2;
const repo = join(import.meta.dirname, '../..');
const keys = new ClusterKeys('/vole/');
const volumeOf = (disk: Disk) => `disk.vole.dev/${disk}`;

export class PartitionCluster {
  readonly procs = new Map<string, VoleProcess>();
  /** Where each pod is wanted now: its UID and node. */
  readonly pods = new Map<Disk, { uid: string; node: Node }>();
  readonly violations: string[] = [];
  readonly logEvents: VoleEvent[] = [];
  private readonly rows = new Map<number, string>();
  private readonly published = new Map<string, string[]>();
  private readonly faults: string[] = [];
  private readonly heartbeats = new Set<string>();
  private watchers: Watcher[] = [];
  private relay: ChildProcess | null = null;
  private relays: Server[] = [];
  private moves = 0;
  etcd!: EtcdCluster;
  client!: Etcd3;

  private constructor(
    readonly base: string,
    readonly lab: NetLab,
  ) {}

  static async start(base: string): Promise<PartitionCluster> {
    const lab = NetLab.create({ hosts: [...members, ...replicas, ...nodes, 'obs'] });
    const cluster = new PartitionCluster(base, lab);
    await cluster.startRelay();
    const ports = await Promise.all(
      members.map((m) => loopbackRelay(join(base, 'relay', `${m}.sock`))),
    );
    cluster.relays = ports.map((p) => p.server);
    cluster.etcd = await EtcdCluster.start({
      logLevel: 'info',
      ...(process.env.VOLE_PARTITION_ETCD_BIN ? { bin: process.env.VOLE_PARTITION_ETCD_BIN } : {}),
      placement: (i) => ({
        address: lab.address(members[i]!),
        prefix: lab.enter(members[i]!),
        testUrl: `http://127.0.0.1:${ports[i]!.port}`,
      }),
    });
    cluster.client = connect(cluster.etcd.testUrls);
    await cluster.watch();
    cluster.startProcesses();
    return cluster;
  }

  private async startRelay(): Promise<void> {
    const dir = join(this.base, 'relay');
    mkdirSync(dir, { recursive: true });
    const targets = members.map((m) => `${m}=${this.lab.address(m)}:2379`);
    const [cmd, ...rest] = this.lab.enter('obs');
    const script = join(repo, 'test/support/netns-relay.ts');
    this.relay = spawn(
      cmd!,
      [...rest, process.execPath, '--import', 'tsx', script, dir, ...targets],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    await new Promise((resolve) => this.relay!.stdout!.once('data', resolve));
  }

  private startProcesses(): void {
    const san = join(this.base, 'san');
    const common = ['--etcd', this.etcd.urls, '--disks-root', san];
    for (const id of replicas) {
      const args = ['controller', ...common, '--root', join(this.base, 'controllers')];
      args.push('--identity', id, '--lease-ttl', String(leaseTtlS));
      args.push('--max-wait-for-unmount', '60s');
      this.procs.set(id, new VoleProcess(id, args, true, this.lab.enter(id)));
    }
    for (const node of nodes) {
      const args = ['run', ...common, '--node', node, '--root', join(this.base, node)];
      args.push('--db', this.agentDb(node), '--heartbeat-ttl', String(heartbeatTtlS));
      this.procs.set(node, new VoleProcess(node, args, false, this.lab.enter(node)));
    }
  }

  agentDb(node: Node): string {
    return join(this.base, `${node}.db`);
  }

  /**
   * Runs `vole ARGS --etcd …` from the test, through the observer's relays (which live in
   * this process: a synchronous spawn would block them and itself).
   */
  async vole(...args: string[]): Promise<string> {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(repo, 'src/cli/main.ts'), ...args, '--etcd', this.etcd.testUrls],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const status = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    assert.equal(status, 0, `vole ${args.join(' ')}: ${out}`);
    return out;
  }

  /** The two disks' PVs and claims, then pod-a on n1 and pod-b on n2. */
  async applyStorage(): Promise<void> {
    const docs = disks.map(
      (d) => `apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-${d}}
spec:
  capacity: {storage: 16Mi}
  accessModes: [ReadWriteOnce]
  csi: {driver: disk.vole.dev, volumeHandle: ${d}, fsType: ext4}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ${d}, namespace: default}
spec:
  volumeName: pv-${d}
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 16Mi}}
`,
    );
    mkdirSync(join(this.base, 'manifests'), { recursive: true });
    const file = join(this.base, 'manifests', 'storage.yaml');
    writeFileSync(file, docs.join('---\n'));
    await this.vole('apply', '-f', file);
  }

  /** Schedules pod-<disk> to `node` (a pod that moves is a new pod: a new UID). */
  async movePod(disk: Disk, node: Node): Promise<void> {
    const uid = `${disk}-${++this.moves}`;
    const file = join(this.base, 'manifests', `pod-${disk}.yaml`);
    writeFileSync(
      file,
      `apiVersion: v1
kind: Pod
metadata: {name: pod-${disk}, namespace: default, uid: ${uid}}
spec:
  nodeName: ${node}
  volumes: [{name: data, persistentVolumeClaim: {claimName: ${disk}}}]
`,
    );
    this.note(`pod-${disk} (uid ${uid}) scheduled to ${node}`);
    await this.vole('apply', '-f', file);
    this.pods.set(disk, { uid, node });
  }

  async deletePods(): Promise<void> {
    for (const disk of disks) {
      await this.vole('delete', '-f', join(this.base, 'manifests', `pod-${disk}.yaml`));
      this.pods.delete(disk);
    }
    this.note('every pod deleted');
  }

  // --- faults --------------------------------------------------------------------------

  /** A line in the run's history. */
  note(line: string): void {
    this.faults.push(`${stamp()} [test] ${line}`);
  }

  impair(a: string, b: string, impairment: Impairment | null): void {
    this.lab.link(a, b, impairment);
    this.note(impairment === null ? `heal ${a}-${b}` : `${a}-${b} ${JSON.stringify(impairment)}`);
  }

  /** Every link between the two groups cut. */
  partition(side: readonly string[], other: readonly string[]): void {
    for (const a of side) for (const b of other) this.lab.cut(a, b);
    this.note(`partition [${side.join(' ')}] | [${other.join(' ')}]`);
  }

  healAll(): void {
    this.lab.healAll();
    this.note('every link healed');
  }

  // --- what the observer sees ----------------------------------------------------------

  private async watch(): Promise<void> {
    const status = await this.client.watch().prefix(keys.status).create();
    status.on('put', (kv) => {
      const [node, field] = ClusterKeys.rest(kv.key.toString(), keys.status).split('/');
      if (field !== 'volumesAttached') return;
      const value = JSON.parse(kv.value.toString()) as { volumesAttached: { name: string }[] };
      this.published.set(
        node!,
        value.volumesAttached.map((v) => v.name),
      );
      for (const disk of disks) {
        const on = this.attachedTo(disk);
        if (on.length > 1)
          this.violations.push(
            `${volumeOf(disk)} published attached to ${on.join(' and ')} at revision ${kv.mod_revision}`,
          );
      }
    });
    const beats = await this.client.watch().prefix(`${keys.prefix}heartbeat/`).create();
    beats.on('put', (kv) => this.beat(kv.key.toString(), true));
    beats.on('delete', (kv) => this.beat(kv.key.toString(), false));
    const log = await this.client.watch().prefix(keys.log.segments).create();
    const segments = new SegmentDecoder(keys);
    log.on('put', (kv) => {
      for (const event of segments.take(kv.key.toString(), kv.value.toString())) this.row(event);
    });
    this.watchers = [status, beats, log];
  }

  private beat(key: string, up: boolean): void {
    const node = key.split('/').pop()!;
    if (up === this.heartbeats.has(node)) return;
    if (up) this.heartbeats.add(node);
    else this.heartbeats.delete(node);
    this.faults.push(
      `${stamp()} [etcd] heartbeat/${node} ${up ? 'present' : 'gone (lease expired)'}`,
    );
  }

  private row(event: VoleEvent): void {
    const text = JSON.stringify(event);
    const seen = this.rows.get(event.seq);
    if (seen === undefined) {
      this.rows.set(event.seq, text);
      this.logEvents.push(event);
    } else if (seen !== text)
      this.violations.push(
        `log seq ${event.seq} written twice, differently:\n  ${seen}\n  ${text}`,
      );
  }

  heartbeat(node: Node): boolean {
    return this.heartbeats.has(node);
  }

  attachedTo(disk: Disk): string[] {
    return [...this.published]
      .filter(([, volumes]) => volumes.includes(volumeOf(disk)))
      .map(([node]) => node)
      .sort();
  }

  /** The pod's volume mount point on its node, if mounted. */
  async mountOf(disk: Disk, uid = this.pods.get(disk)?.uid): Promise<string | undefined> {
    if (uid === undefined) return undefined;
    const table = await readMountTable();
    return table.find(
      (m) => m.mountPoint.startsWith(this.base) && m.mountPoint.includes(`/pods/${uid}/volumes/`),
    )?.mountPoint;
  }

  async leader(): Promise<string> {
    return (await this.client.get(keys.leader).string()) ?? '';
  }

  /** Every pod mounted on its node with its disk published attached there only. */
  async converged(): Promise<boolean> {
    for (const [disk, { node }] of this.pods) {
      if (this.attachedTo(disk).join() !== node) return false;
      if ((await this.mountOf(disk)) === undefined) return false;
    }
    return true;
  }

  /** Waits until converged, every node's heartbeat is back and etcd's members agree. */
  async waitConverged(what: string, timeoutMs = 40_000): Promise<number> {
    const started = Date.now();
    await eventually(
      () => this.converged(),
      `${what}: every pod mounted`,
      timeoutMs,
      () => this.history(),
    );
    await eventually(
      () => nodes.every((n) => this.heartbeat(n)),
      `${what}: every heartbeat back`,
      timeoutMs,
      () => this.history(),
    );
    let last: string | null = null;
    await eventually(
      async () => (last = await this.etcdDisagreement()) === null,
      `${what}: the etcd members agree`,
      timeoutMs,
      () => `${last}\n${this.history()}`,
    );
    return Date.now() - started;
  }

  /** null when the three members are healthy, agree on their leader and term and revision. */
  async etcdDisagreement(): Promise<string | null> {
    const { ok, line } = await this.etcdStatus();
    return ok ? null : line;
  }

  /** The members' leader, raft term and revision, as one line. */
  async etcdAgreement(): Promise<string> {
    return (await this.etcdStatus()).line;
  }

  private async etcdStatus(): Promise<{ ok: boolean; line: string }> {
    const statuses = await Promise.all(members.map((_, i) => this.etcd.status(i)));
    const healthy = await Promise.all(members.map((_, i) => this.etcd.memberHealthy(i)));
    const line = statuses.map((s, i) =>
      s === null
        ? `${members[i]} no answer`
        : `${members[i]} term ${s.raftTerm} rev ${s.revision}${healthy[i] ? '' : ' unhealthy'}`,
    );
    const ok =
      statuses.every((s) => s !== null && s.leader !== '0') &&
      healthy.every(Boolean) &&
      new Set(statuses.map((s) => `${s!.leader}/${s!.raftTerm}/${s!.revision}`)).size === 1;
    return { ok, line: `etcd ${line.join(', ')}` };
  }

  /** The controller log as etcd holds it now, read as a new leader reads it. */
  async readLog(): Promise<VoleEvent[]> {
    const events: VoleEvent[] = [];
    await readLogEvents(new EtcdStore(this.client), keys, 1, (e) => events.push(e));
    return events;
  }

  /** The run's story: faults and observations, each process's lines, etcd's elections. */
  history(): string {
    const lines = [...this.faults];
    for (const proc of this.procs.values())
      lines.push(
        ...proc.history
          .slice(-60)
          .map((l) => `${l.split(' ')[0]} [${proc.name}] ${l.slice(l.indexOf(' ') + 1)}`),
      );
    members.forEach((m, i) => {
      const log = readFileSync(this.etcd.logPath(i), 'utf8').split('\n');
      const elections = log.filter((l) =>
        /became leader|lost leader|elected leader|is starting a new election/.test(l),
      );
      lines.push(...elections.slice(-10).map((l) => `[etcd ${m}] ${l.slice(0, 220)}`));
    });
    const stamped = lines
      .filter((l) => l.startsWith('+'))
      .sort((x, y) => parseFloat(x.slice(1)) - parseFloat(y.slice(1)));
    return [...stamped, ...lines.filter((l) => !l.startsWith('+'))].join('\n');
  }

  /** Ends everything by PID and deletes every namespace; never throws, never hangs. */
  async stop(): Promise<void> {
    const bounded = (promise: Promise<unknown>, ms = 5_000) =>
      Promise.race([promise.catch(() => undefined), new Promise((r) => setTimeout(r, ms).unref())]);
    this.lab.healAll();
    for (const w of this.watchers) await bounded(w.cancel());
    for (const proc of this.procs.values()) await bounded(proc.stop(), 8_000);
    this.client?.close();
    await bounded(this.etcd?.stop() ?? Promise.resolve());
    if (this.relay?.pid !== undefined && this.relay.exitCode === null)
      process.kill(this.relay.pid, 'SIGKILL');
    for (const server of this.relays) server.close();
    this.lab.destroy();
  }
}
