/**
 * A real etcd cluster for tests and benchmarks: N `etcd` processes (Debian etcd-server)
 * on free 127.0.0.1 ports with temporary data dirs. Members can be SIGKILLed and
 * restarted by PID; the leader is found through the JSON gateway; `stop()` kills every
 * member by its PID and removes the data dirs.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync, rmSync, closeSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import type { Etcd3 } from 'etcd3';
import { connect } from '../../src/cluster/client.js';

export interface EtcdMember {
  readonly name: string;
  readonly clientUrl: string;
  readonly peerUrl: string;
  readonly dataDir: string;
  /** Where the test itself reaches the member (clientUrl unless it lives in a namespace). */
  readonly testUrl: string;
  /** The command prefix the member runs under (e.g. nsenter into its network namespace). */
  readonly prefix: readonly string[];
  process: ChildProcess | null;
}

/** Where member i runs: its own address (ports 2379/2380 there) and how the test reaches it. */
export interface MemberPlacement {
  readonly address: string;
  readonly prefix: readonly string[];
  readonly testUrl: string;
}

export interface EtcdClusterOptions {
  readonly members?: number;
  /** etcd's --quota-backend-bytes: a small one fills fast (NOSPACE). */
  readonly quotaBackendBytes?: number;
  readonly startTimeoutMs?: number;
  /** Members on addresses of their own (network namespaces) instead of 127.0.0.1 ports. */
  readonly placement?: (i: number) => MemberPlacement;
  /** The etcd binary (default: `etcd` on the PATH, Debian's etcd-server). */
  readonly bin?: string;
  /** etcd's --log-level (default warn; info keeps its elections in the member's log). */
  readonly logLevel?: 'debug' | 'info' | 'warn' | 'error';
}

/**
 * A cluster for the test file that calls this (started before its tests, stopped after,
 * with a client on it handed to `ready`); answers etcdSkipReason() for its tests' `skip`.
 */
export function useEtcdCluster(
  ready: (etcd: EtcdCluster, client: Etcd3) => void,
  opts: EtcdClusterOptions = {},
): string | false {
  const skip = etcdSkipReason();
  let etcd: EtcdCluster | undefined;
  let client: Etcd3 | undefined;
  before(async () => {
    if (skip !== false) return;
    etcd = await EtcdCluster.start(opts);
    client = connect(etcd.urls);
    ready(etcd, client);
  });
  after(async () => {
    client?.close();
    await etcd?.stop();
  });
  return skip;
}

/** Why etcd tests cannot run here, or false when the binaries are present. */
export function etcdSkipReason(): string | false {
  for (const bin of ['etcd', 'etcdctl']) {
    if (spawnSync('sh', ['-c', `command -v ${bin}`]).status !== 0)
      return `${bin} is not installed (apt-get install etcd-server etcd-client)`;
  }
  return false;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

const live = new Set<ChildProcess>();
function killLive(): void {
  for (const child of live) if (child.pid !== undefined) process.kill(child.pid, 'SIGKILL');
}
process.on('exit', killLive);
// A test run stopped from outside (the runner's timeout, Ctrl-C) ends its members too.
for (const signal of ['SIGTERM', 'SIGINT'] as const)
  process.once(signal, () => {
    killLive();
    process.exit(signal === 'SIGTERM' ? 143 : 130);
  });

async function postJson(url: string, body: unknown, timeoutMs = 1000): Promise<unknown> {
  const response = await fetch(url, {
    method: 'POST',
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  return response.json();
}

export interface MemberStatus {
  readonly memberId: string;
  readonly leader: string;
  readonly revision: number;
  readonly raftIndex: number;
  readonly raftTerm: number;
}

export class EtcdCluster {
  private readonly token = `vole-test-${process.pid}-${Date.now()}`;

  private constructor(
    readonly base: string,
    readonly members: EtcdMember[],
    private readonly opts: EtcdClusterOptions,
  ) {}

  static async start(opts: EtcdClusterOptions = {}): Promise<EtcdCluster> {
    const base = mkdtempSync(join(tmpdir(), 'vole-etcd-'));
    const members: EtcdMember[] = [];
    for (let i = 0; i < (opts.members ?? 3); i++) {
      const placed = opts.placement?.(i);
      const clientUrl = placed
        ? `http://${placed.address}:2379`
        : `http://127.0.0.1:${await freePort()}`;
      members.push({
        name: `m${i}`,
        clientUrl,
        peerUrl: placed ? `http://${placed.address}:2380` : `http://127.0.0.1:${await freePort()}`,
        dataDir: join(base, `m${i}`),
        testUrl: placed?.testUrl ?? clientUrl,
        prefix: placed?.prefix ?? [],
        process: null,
      });
    }
    const cluster = new EtcdCluster(base, members, opts);
    for (let i = 0; i < members.length; i++) cluster.spawnMember(i, 'new');
    try {
      await cluster.waitHealthy(opts.startTimeoutMs ?? 20_000);
    } catch (error) {
      await cluster.stop();
      throw error;
    }
    return cluster;
  }

  /** Client endpoints, comma-separated (what `--etcd` takes). */
  get urls(): string {
    return this.members.map((m) => m.clientUrl).join(',');
  }

  get endpoints(): string[] {
    return this.members.map((m) => m.clientUrl);
  }

  /** Where the test reaches the members, comma-separated (the client URLs without placement). */
  get testUrls(): string {
    return this.members.map((m) => m.testUrl).join(',');
  }

  /** The member's own log (etcd's output). */
  logPath(i: number): string {
    return join(this.base, `${this.members[i]!.name}.log`);
  }

  private spawnMember(i: number, state: 'new' | 'existing'): void {
    const m = this.members[i]!;
    mkdirSync(m.dataDir, { recursive: true });
    const out = openSync(join(this.base, `${m.name}.log`), 'a');
    const args = [
      `--name=${m.name}`,
      `--data-dir=${m.dataDir}`,
      `--listen-client-urls=${m.clientUrl}`,
      `--advertise-client-urls=${m.clientUrl}`,
      `--listen-peer-urls=${m.peerUrl}`,
      `--initial-advertise-peer-urls=${m.peerUrl}`,
      `--initial-cluster=${this.members.map((x) => `${x.name}=${x.peerUrl}`).join(',')}`,
      `--initial-cluster-state=${state}`,
      `--initial-cluster-token=${this.token}`,
      '--heartbeat-interval=100',
      '--election-timeout=1000',
      `--log-level=${this.opts.logLevel ?? 'warn'}`,
      '--logger=zap',
    ];
    if (this.opts.quotaBackendBytes !== undefined)
      args.push(`--quota-backend-bytes=${this.opts.quotaBackendBytes}`);
    const bin = this.opts.bin ?? 'etcd';
    const [cmd, ...rest] = [...m.prefix, bin, ...args];
    const child = spawn(cmd!, rest, { stdio: ['ignore', out, out] });
    closeSync(out);
    live.add(child);
    child.on('exit', () => live.delete(child));
    m.process = child;
  }

  pid(i: number): number | undefined {
    return this.members[i]!.process?.pid;
  }

  /** SIGKILLs member i by its PID and waits for it to be gone. */
  async kill(i: number): Promise<void> {
    const child = this.members[i]!.process;
    if (child === null || child.pid === undefined) return;
    this.members[i]!.process = null;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    process.kill(child.pid, 'SIGKILL');
    await exited;
  }

  /** Starts member i again on its data dir (it rejoins as an existing member). */
  async restart(i: number, timeoutMs = 20_000): Promise<void> {
    await this.kill(i);
    this.spawnMember(i, 'existing');
    await this.waitMemberHealthy(i, timeoutMs);
  }

  async memberHealthy(i: number): Promise<boolean> {
    try {
      const response = await fetch(`${this.members[i]!.testUrl}/health`, {
        signal: AbortSignal.timeout(1000),
      });
      const body = (await response.json()) as { health?: string };
      return body.health === 'true';
    } catch {
      return false;
    }
  }

  private async waitMemberHealthy(i: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await this.memberHealthy(i))) {
      if (Date.now() > deadline)
        throw new Error(
          `etcd member ${this.members[i]!.name} not healthy after ${timeoutMs} ms (log in ${this.base})`,
        );
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async waitHealthy(timeoutMs = 20_000): Promise<void> {
    for (let i = 0; i < this.members.length; i++)
      if (this.members[i]!.process !== null) await this.waitMemberHealthy(i, timeoutMs);
  }

  /** Member i's status as it answers it (raft term and index, its leader, revision), or null. */
  async status(i: number): Promise<MemberStatus | null> {
    try {
      const body = (await postJson(`${this.members[i]!.testUrl}/v3/maintenance/status`, {})) as {
        header?: { member_id?: string; revision?: string };
        leader?: string;
        raftIndex?: string;
        raftTerm?: string;
      };
      return {
        memberId: body.header?.member_id ?? '',
        leader: body.leader ?? '0',
        revision: Number(body.header?.revision ?? 0),
        raftIndex: Number(body.raftIndex ?? 0),
        raftTerm: Number(body.raftTerm ?? 0),
      };
    } catch {
      return null;
    }
  }

  /** The index of the member that leads now (asked of the live members), or -1. */
  async leader(): Promise<number> {
    for (const m of this.members) {
      if (m.process === null) continue;
      try {
        const status = (await postJson(`${m.testUrl}/v3/maintenance/status`, {})) as {
          leader?: string;
        };
        if (status.leader === undefined || status.leader === '0') continue;
        for (let j = 0; j < this.members.length; j++) {
          const other = this.members[j]!;
          if (other.process === null) continue;
          const own = (await postJson(`${other.testUrl}/v3/maintenance/status`, {}).catch(
            () => ({}),
          )) as { header?: { member_id?: string } };
          if (own.header?.member_id === status.leader) return j;
        }
      } catch {
        // this member does not answer: ask the next
      }
    }
    return -1;
  }

  /** Runs etcdctl against the live members; returns stdout (throws with stderr on failure). */
  etcdctl(...args: string[]): string {
    const endpoints = this.members
      .filter((m) => m.process !== null)
      .map((m) => m.testUrl)
      .join(',');
    const result = spawnSync('etcdctl', [`--endpoints=${endpoints}`, ...args], {
      encoding: 'utf8',
      env: { ...process.env, ETCDCTL_API: '3' },
      timeout: 15_000,
    });
    if (result.status !== 0)
      throw new Error(
        `etcdctl ${args.join(' ')} failed: ${result.stderr || result.error?.message}`,
      );
    return result.stdout;
  }

  /** Kills every member by its PID and removes the data dirs. */
  async stop(): Promise<void> {
    for (let i = 0; i < this.members.length; i++) await this.kill(i);
    rmSync(this.base, { recursive: true, force: true });
  }
}
