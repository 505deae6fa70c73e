/**
 * A real control plane for one test file (scripts/kube-up.sh in the file's sandbox, ended
 * by scripts/kube-down.sh through the PIDs it wrote), kubectl against it, and the waits
 * the Kubernetes tests share. Call it inside the describe, before hostSandbox: its cleanup
 * then runs first (agent processes, then the control plane, then the sandbox).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after } from 'node:test';
import { type AgentProcess, repo, startVole } from './agent-process.js';
import { hostTestSkipReason } from './host.js';
import { peersBinDir } from './peers.js';

export const kubeUp = join(repo, 'scripts/kube-up.sh');
const kubeDown = join(repo, 'scripts/kube-down.sh');

/** Why a Kubernetes host test cannot run here (not root, no unshare, …), or false. */
export function kubeTestSkipReason(): string | false {
  const host = hostTestSkipReason();
  if (host !== false) return host;
  if (!existsSync(kubeUp)) return 'scripts/kube-up.sh is not here yet';
  return false;
}

export interface KubeCluster {
  /** The peers' bin directory (kubectl, kube-apiserver, …). */
  readonly bin: () => string;
  readonly dir: () => string;
  /** Processes the test started, stopped (by PID) before the control plane. */
  readonly processes: Set<AgentProcess>;
  /** Adds `p` to the processes; a named one's output is part of `context()`. */
  started(p: AgentProcess, name?: string): AgentProcess;
  /** The output of every named process, for a failed wait's message. */
  context(): string;
  /** `eventually` with the named processes' output on a timeout (default 120 s). */
  wait<T>(
    what: string,
    probe: () => T | undefined | Promise<T | undefined>,
    timeoutMs?: number,
  ): Promise<T>;
  /** Waits for `namespace`'s default ServiceAccount (kube-controller-manager makes it): a pod needs it. */
  defaultServiceAccount(namespace?: string): Promise<true>;
  /**
   * `vole csi-driver` on `base`/csi/disk.sock (its disks under `base`/csi-state), registered
   * in `root`/plugins_registry as a kubelet plugin: its socket.
   */
  startCsiDriver(base: string, root: string, nodeId: string, args?: readonly string[]): string;
  /**
   * kubeControllerManagerFlags: more flags for it (scripts/kube-up.sh's VOLE_KCM_FLAGS);
   * scheduler: kube-scheduler too (its peer must be among the cluster's names).
   */
  start(
    base: string,
    opts?: {
      controllers?: string;
      kubeControllerManagerFlags?: readonly string[];
      scheduler?: boolean;
      /** kubemark hollow nodes of these names (kubemark must be among the names). */
      hollowNodes?: readonly string[];
    },
  ): void;
  /**
   * `vole controller --kubeconfig` (deploy/'s roles) with `controllers`, its root under
   * `base`, identity c1, leading once it returns; `args` after the common flags.
   */
  startController(
    base: string,
    controllers: string,
    args?: readonly string[],
  ): Promise<AgentProcess>;
  /** The root directory of a hollow node kube-up started (DIR/hollow-nodes). */
  hollowRoot(name: string): string;
  kubectl(
    args: readonly string[],
    opts?: { kubeconfig?: string; input?: string },
  ): { status: number | null; stdout: string; stderr: string };
  /** kubectl that must succeed: its stdout. */
  ok(args: readonly string[], input?: string): string;
  json<T>(args: readonly string[]): T;
  /**
   * The kubeconfig `vole run --kubeconfig` gets on `node`: the node's own identity
   * (nodeKubeconfig), with what the Node authorizer and NodeRestriction allow a kubelet and
   * nothing more (deploy/node-identity.md).
   */
  agentKubeconfig(node: string): string;
  /**
   * `vole run --kubeconfig` on `node` with the node's own identity (agentKubeconfig), named
   * `agent`; resolves once the CSI driver a test started beside it has registered.
   */
  startAgent(node: string, root: string): Promise<AgentProcess>;
  /** The same for `vole controller` (deploy/'s attach/detach and PV binder roles only). */
  controllerKubeconfig(file: string): string;
  /** The same for `vole record` (deploy/recorder-rbac.yaml: get, list and watch only). */
  recorderKubeconfig(file: string): string;
  /**
   * A node's own kubeconfig (scripts/kube-up.sh --node-kubeconfig): a client certificate
   * with CN system:node:NODE and O system:nodes, signed by the cluster CA. Its path.
   */
  nodeKubeconfig(node: string): string;
  /**
   * A CSI sidecar on `socket` (its output appended to `logDir`/NAME.log, `args` after the
   * common flags), stopped by its PID with the others, or earlier by the test.
   */
  startSidecar(
    name: string,
    socket: string,
    logDir: string,
    args?: readonly string[],
  ): AgentProcess;
}

export function useKubeCluster(names: readonly string[]): KubeCluster {
  let bin = '';
  let dir = '';
  const processes = new Set<AgentProcess>();
  const named = new Map<string, AgentProcess>();
  after(async () => {
    for (const p of [...processes].reverse()) await p.stop(); // the agent before its driver
    if (existsSync(join(dir, 'pids'))) spawnSync('bash', [kubeDown, dir], { stdio: 'inherit' });
  });
  const cluster: KubeCluster = {
    bin: () => bin,
    dir: () => dir,
    processes,
    started(p, name) {
      processes.add(p);
      if (name !== undefined) named.set(name, p);
      return p;
    },
    context: () => [...named].map(([name, p]) => `${name}:\n${p.lines.join('\n')}`).join('\n'),
    wait: (what, probe, timeoutMs = 120_000) =>
      eventually(what, probe, { timeoutMs, context: cluster.context }),
    defaultServiceAccount: (namespace = 'default') =>
      cluster.wait(`the default ServiceAccount of ${namespace}`, () =>
        cluster.kubectl(['-n', namespace, 'get', 'serviceaccount', 'default']).status === 0
          ? true
          : undefined,
      ),
    startCsiDriver(base, root, nodeId, args = []) {
      const socket = join(base, 'csi/disk.sock');
      mkdirSync(join(base, 'csi'), { recursive: true });
      cluster.started(
        startVole([
          'csi-driver',
          ...['--endpoint', `unix://${socket}`, '--node-id', nodeId],
          ...['--state-dir', join(base, 'csi-state')],
          ...['--registration-dir', join(root, 'plugins_registry')],
          ...args,
        ]),
      );
      return socket;
    },
    start(base, opts = {}) {
      bin = peersBinDir(['etcd', 'kube-apiserver', 'kubectl', ...names]);
      dir = join(base, 'kube');
      const controllers =
        opts.controllers === undefined
          ? []
          : ['--with-controller-manager', '--controllers', opts.controllers];
      const scheduler = opts.scheduler === true ? ['--with-scheduler'] : [];
      if (opts.hollowNodes !== undefined && opts.hollowNodes.length > 0)
        scheduler.push('--hollow-nodes', opts.hollowNodes.join(','));
      const up = spawnSync('bash', [kubeUp, dir, ...controllers, ...scheduler], {
        encoding: 'utf8',
        env: {
          ...process.env,
          VOLE_PEERS_BIN: bin,
          VOLE_KCM_FLAGS: (opts.kubeControllerManagerFlags ?? []).join(' '),
        },
        timeout: 180_000,
      });
      assert.equal(up.status, 0, `kube-up.sh: ${up.stderr}`);
    },
    async startController(base, controllers, args = []) {
      const controller = cluster.started(
        startVole([
          'controller',
          ...['--kubeconfig', cluster.controllerKubeconfig(join(base, 'controller.kubeconfig'))],
          ...['--controllers', controllers, '--root', join(base, 'controller')],
          ...['--identity', 'c1', ...args],
        ]),
        'controller',
      );
      await controller.line(/leading/);
      return controller;
    },
    hollowRoot(name) {
      const lines = readFileSync(join(dir, 'hollow-nodes'), 'utf8').split('\n');
      const root = lines.map((l) => l.split(' ')).find(([n]) => n === name)?.[1];
      assert.ok(root !== undefined, `no hollow node ${name} in ${dir}/hollow-nodes`);
      return root;
    },
    kubectl(args, opts = {}) {
      const run = spawnSync(
        join(bin, 'kubectl'),
        ['--kubeconfig', opts.kubeconfig ?? join(dir, 'kubeconfig'), ...args],
        { encoding: 'utf8', input: opts.input, timeout: 90_000 },
      );
      return { status: run.status, stdout: run.stdout, stderr: run.stderr };
    },
    ok(args, input) {
      const run = cluster.kubectl(args, input === undefined ? {} : { input });
      assert.equal(run.status, 0, `kubectl ${args.join(' ')}: ${run.stderr}`);
      return run.stdout;
    },
    json: <T>(args: readonly string[]): T => JSON.parse(cluster.ok([...args, '-o', 'json'])) as T,
    agentKubeconfig: (node) => cluster.nodeKubeconfig(node),
    async startAgent(node, root) {
      const kubeconfig = cluster.agentKubeconfig(node);
      const args = ['run', '--kubeconfig', kubeconfig, '--node', node, '--root', root];
      const agent = cluster.started(startVole(args), 'agent');
      await agent.line(/CSI driver disk\.csi\.vole\.dev registered/);
      return agent;
    },
    controllerKubeconfig(file) {
      cluster.ok(['apply', '-f', join(repo, 'deploy/attach-detach-controller-rbac.yaml')]);
      cluster.ok(['apply', '-f', join(repo, 'deploy/pv-binder-rbac.yaml')]);
      return tokenKubeconfig(cluster, file, 'vole-attach-detach');
    },
    recorderKubeconfig(file) {
      cluster.ok(['apply', '-f', join(repo, 'deploy/recorder-rbac.yaml')]);
      return tokenKubeconfig(cluster, file, 'vole-recorder');
    },
    nodeKubeconfig(node) {
      const minted = spawnSync('bash', [kubeUp, dir, '--node-kubeconfig', node], {
        encoding: 'utf8',
        timeout: 60_000,
      });
      assert.equal(minted.status, 0, `kube-up.sh --node-kubeconfig ${node}: ${minted.stderr}`);
      return minted.stdout.trim().split('\n').at(-1)!;
    },
    startSidecar(name, socket, logDir, args = []) {
      const log = openSync(join(logDir, `${name}.log`), 'a');
      const kubeconfig = join(dir, 'kubeconfig');
      const child = spawn(
        join(bin, name),
        ['--csi-address', socket, '--kubeconfig', kubeconfig, '-v', '3', ...args],
        { stdio: ['ignore', log, log] },
      );
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
      const sidecar: AgentProcess = {
        child,
        lines: [],
        exited,
        line: () => Promise.reject(new Error(`${name} output is in ${name}.log`)),
        stop: async () => {
          if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!);
          return exited;
        },
      };
      processes.add(sidecar);
      return sidecar;
    },
  };
  return cluster;
}

/** A kubeconfig with a token of the kube-system ServiceAccount `account`, for one hour. */
function tokenKubeconfig(cluster: KubeCluster, file: string, account: string): string {
  const { ok } = cluster;
  const token = ok(['-n', 'kube-system', 'create', 'token', account, '--duration', '1h']).trim();
  const view = ['config', 'view', '--raw', '-o'];
  const server = ok([...view, 'jsonpath={.clusters[0].cluster.server}']);
  const ca = ok([...view, 'jsonpath={.clusters[0].cluster.certificate-authority}']);
  const cluster_ = `{server: "${server}", certificate-authority: "${ca}"}`;
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: vole, cluster: ${cluster_}}]`,
      `users: [{name: ${account}, user: {token: "${token}"}}]`,
      `contexts: [{name: vole, context: {cluster: vole, user: ${account}}}]`,
      'current-context: vole',
      '',
    ].join('\n'),
  );
  return file;
}

/** Polls `probe` (every 200 ms) until it answers something, failing after `timeoutMs`. */
export async function eventually<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  opts: { timeoutMs?: number; context?: () => string } = {},
): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}\n${opts.context?.() ?? ''}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** The disk images `vole csi-driver` holds under `base`/csi-state (startCsiDriver's). */
export const csiDiskImages = (base: string): string[] =>
  readdirSync(join(base, 'csi-state/images')).filter((f) => f.endsWith('.img'));
