/**
 * A network of namespaces for partition tests: each process (etcd member, controller
 * replica, node agent, the test's observer) gets a network namespace of its own with one
 * address (eth0, 10.R.0.N/24), joined by a veth pair to a bridge that lives in a namespace
 * of its own too, so the machine's network is never touched. Links between any two of
 * them can be cut, delayed or made lossy and healed while the processes run:
 *
 *   cut, loss  nftables in the sender's namespace (`ip daddr PEER drop`, or
 *              `numgen random mod 100 < P drop`), in both namespaces for a link
 *   slow       tc in the sender's namespace: an htb class capped at a rate per slowed
 *              peer, chosen by a u32 filter on the peer's address
 *   delay      the same with a netem leaf under the peer's class (only where the kernel
 *              has sch_netem: netemAvailable(); this machine's does not)
 *
 * Each namespace's rules are rebuilt whole from the current impairments on every change.
 * Processes run in a namespace with `nsenter --net=/run/netns/NAME` (the network only:
 * `ip netns exec` would also give them a mount namespace of their own, where a node
 * agent's mounts would be out of the test's sight). `destroy()` deletes every namespace
 * (their veths and the bridge go with them); a process exit without it does the same.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

export type Impairment =
  | { readonly kind: 'cut' }
  | { readonly kind: 'loss'; readonly percent: number }
  /** Needs sch_netem, which some kernels lack (netemAvailable()). */
  | { readonly kind: 'delay'; readonly delayMs: number; readonly jitterMs: number }
  /** A link capped at this rate (htb): what it carries beyond the rate waits in a queue. */
  | { readonly kind: 'slow'; readonly rateKbit: number };

export interface NetLabOptions {
  /** Names of the hosts (namespaces with an address): letters, digits, dashes. */
  readonly hosts: readonly string[];
}

/** Why the lab cannot be built here, or false. */
export function netnsSkipReason(): string | false {
  if (process.getuid?.() !== 0) return 'network namespaces need root';
  for (const bin of ['ip', 'nft', 'tc', 'nsenter']) {
    if (spawnSync('sh', ['-c', `command -v ${bin}`]).status !== 0)
      return `${bin} is not installed (apt-get install iproute2 nftables util-linux)`;
  }
  return false;
}

let netem: boolean | undefined;
/** Whether the kernel has sch_netem (a `delay` impairment needs it). */
export function netemAvailable(): boolean {
  if (netem !== undefined) return netem;
  const ns = `vole${process.pid}-probe`;
  spawnSync('ip', ['netns', 'add', ns]);
  const added = spawnSync('ip', [
    'netns',
    'exec',
    ns,
    'tc',
    'qdisc',
    'add',
    'dev',
    'lo',
    'root',
    'netem',
    'delay',
    '1ms',
  ]);
  spawnSync('ip', ['netns', 'del', ns]);
  netem = added.status === 0;
  return netem;
}

function run(cmd: string, args: readonly string[], input?: string): string {
  const result = spawnSync(cmd, args, { encoding: 'utf8', input, timeout: 10_000 });
  if (result.status !== 0)
    throw new Error(
      `${cmd} ${args.join(' ')} failed (${result.status}): ${result.stderr || result.error?.message}`,
    );
  return result.stdout;
}

const labs = new Set<NetLab>();
let labCount = 0;
process.on('exit', () => {
  for (const lab of labs) lab.destroy();
});

const pairKey = (from: string, to: string) => `${from}>${to}`;

export class NetLab {
  /** Impairments of traffic sent from a host to another, by `from>to`. */
  private readonly impaired = new Map<string, Impairment>();
  private readonly addresses = new Map<string, string>();
  private readonly namespaces: string[] = [];
  private destroyed = false;

  private constructor(
    readonly prefix: string,
    readonly subnet: string,
  ) {}

  /** Builds the bridge and one namespace per host; throws (having removed them) on failure. */
  static create(opts: NetLabOptions): NetLab {
    assertNames(opts.hosts);
    // A subnet per test process: two runs at once do not share addresses (nor namespaces).
    labCount++;
    const subnet = `10.${200 + (process.pid % 50)}.${((process.pid >> 6) + labCount) % 250}`;
    const lab = new NetLab(`vole${process.pid}-${labCount}`, subnet);
    labs.add(lab);
    try {
      lab.build(opts.hosts);
    } catch (error) {
      lab.destroy();
      throw error;
    }
    return lab;
  }

  private build(hosts: readonly string[]): void {
    const bridge = this.ns('br');
    this.addNamespace(bridge);
    run('ip', ['-n', bridge, 'link', 'add', 'br0', 'type', 'bridge']);
    run('ip', ['-n', bridge, 'link', 'set', 'br0', 'up']);
    hosts.forEach((host, i) => {
      const ns = this.ns(host);
      const address = `${this.subnet}.${i + 2}`;
      this.addNamespace(ns);
      run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
      // The bridge's end is named after the host; the host's end is eth0 in its namespace.
      run('ip', [
        '-n',
        bridge,
        'link',
        'add',
        'name',
        host,
        'type',
        'veth',
        'peer',
        'name',
        'eth0',
        'netns',
        ns,
      ]);
      run('ip', ['-n', bridge, 'link', 'set', 'dev', host, 'master', 'br0', 'up']);
      run('ip', ['-n', ns, 'addr', 'add', `${address}/24`, 'dev', 'eth0']);
      run('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
      this.addresses.set(host, address);
      this.rebuild(host);
    });
  }

  private addNamespace(ns: string): void {
    run('ip', ['netns', 'add', ns]);
    this.namespaces.push(ns);
  }

  /** The namespace's name for a host (or `br` for the bridge's). */
  ns(host: string): string {
    return `${this.prefix}-${host}`;
  }

  get hosts(): string[] {
    return [...this.addresses.keys()];
  }

  address(host: string): string {
    const address = this.addresses.get(host);
    if (address === undefined) throw new Error(`no host "${host}" in the lab (${this.hosts})`);
    return address;
  }

  /** The command prefix that runs a program in the host's network namespace. */
  enter(host: string): string[] {
    this.address(host);
    return ['nsenter', `--net=/run/netns/${this.ns(host)}`, '--'];
  }

  /** Sets (or, with null, removes) the impairment of traffic between a and b, both ways. */
  link(a: string, b: string, impairment: Impairment | null): void {
    this.oneWay(a, b, impairment);
    this.oneWay(b, a, impairment);
    this.rebuild(a);
    this.rebuild(b);
  }

  /** Sets the impairment of what `from` sends to `to` only. */
  send(from: string, to: string, impairment: Impairment | null): void {
    this.oneWay(from, to, impairment);
    this.rebuild(from);
  }

  private oneWay(from: string, to: string, impairment: Impairment | null): void {
    this.address(from);
    this.address(to);
    if (from === to) throw new Error(`a link joins two hosts, not ${from} to itself`);
    if (impairment === null) this.impaired.delete(pairKey(from, to));
    else this.impaired.set(pairKey(from, to), impairment);
  }

  cut(a: string, b: string): void {
    this.link(a, b, { kind: 'cut' });
  }

  heal(a: string, b: string): void {
    this.link(a, b, null);
  }

  /** Every link healed. */
  healAll(): void {
    const touched = new Set([...this.impaired.keys()].flatMap((k) => k.split('>')));
    this.impaired.clear();
    for (const host of touched) this.rebuild(host);
  }

  /** The impairments now, as `a>b kind` lines (for a run's history). */
  describe(): string[] {
    return [...this.impaired].map(([k, v]) => `${k} ${JSON.stringify(v)}`);
  }

  private outgoing(host: string): { to: string; impairment: Impairment }[] {
    return [...this.impaired]
      .filter(([k]) => k.startsWith(`${host}>`))
      .map(([k, impairment]) => ({ to: k.slice(host.length + 1), impairment }));
  }

  /** The host's nft table and tc qdiscs, rebuilt whole from its outgoing impairments. */
  private rebuild(host: string): void {
    const ns = this.ns(host);
    const out = this.outgoing(host);
    const rules = out.flatMap(({ to, impairment }) => {
      const peer = this.address(to);
      if (impairment.kind === 'cut') return [`ip daddr ${peer} drop`];
      if (impairment.kind === 'loss')
        return impairment.percent >= 100
          ? [`ip daddr ${peer} drop`]
          : [`ip daddr ${peer} numgen random mod 100 < ${impairment.percent} drop`];
      return [];
    });
    const table = [
      'table inet vole {',
      '  chain out {',
      '    type filter hook output priority 0; policy accept;',
      ...rules.map((r) => `    ${r}`),
      '  }',
      '}',
    ].join('\n');
    run('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], `flush ruleset\n${table}\n`);
    spawnSync('ip', ['netns', 'exec', ns, 'tc', 'qdisc', 'del', 'dev', 'eth0', 'root']);
    const shaped = out.filter((o) => o.impairment.kind === 'delay' || o.impairment.kind === 'slow');
    if (shaped.length === 0) return;
    const tc = (...args: string[]) => run('ip', ['netns', 'exec', ns, 'tc', ...args]);
    // htb: class 1:1 (unlimited) carries everything else; class 1:(10+k) the k-th shaped peer.
    tc('qdisc', 'add', 'dev', 'eth0', 'root', 'handle', '1:', 'htb', 'default', '1', 'r2q', '1000');
    tc('class', 'add', 'dev', 'eth0', 'parent', '1:', 'classid', '1:1', 'htb', 'rate', '10gbit');
    shaped.forEach(({ to, impairment }, k) => {
      const classid = `1:${(10 + k).toString(16)}`;
      const rate = impairment.kind === 'slow' ? `${impairment.rateKbit}kbit` : '10gbit';
      tc('class', 'add', 'dev', 'eth0', 'parent', '1:', 'classid', classid, 'htb', 'rate', rate);
      if (impairment.kind === 'delay')
        tc(
          'qdisc',
          'add',
          'dev',
          'eth0',
          'parent',
          classid,
          'netem',
          'delay',
          `${impairment.delayMs}ms`,
          `${impairment.jitterMs}ms`,
        );
      const peer = `${this.address(to)}/32`;
      tc(
        'filter',
        'add',
        'dev',
        'eth0',
        'parent',
        '1:',
        'protocol',
        'ip',
        'prio',
        '1',
        'u32',
        'match',
        'ip',
        'dst',
        peer,
        'flowid',
        classid,
      );
    });
  }

  /** Deletes every namespace of the lab (veths and the bridge go with them). Idempotent. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    labs.delete(this);
    for (const ns of this.namespaces.reverse()) {
      if (existsSync(`/run/netns/${ns}`)) spawnSync('ip', ['netns', 'del', ns]);
    }
  }

  /** The namespaces of this lab still present (none after destroy). */
  leftovers(): string[] {
    const list = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout;
    return list
      .split('\n')
      .map((line) => line.split(' ')[0] ?? '')
      .filter((name) => name.startsWith(`${this.prefix}-`));
  }
}

function assertNames(hosts: readonly string[]): void {
  if (new Set(hosts).size !== hosts.length) throw new Error(`host names repeat: ${hosts}`);
  if (hosts.length > 250) throw new Error('at most 250 hosts');
  for (const host of hosts) {
    if (!/^[a-z][a-z0-9-]{0,9}$/.test(host) || host === 'br')
      throw new Error(
        `host name "${host}": a letter, then up to 9 letters, digits, dashes; not "br"`,
      );
  }
}
