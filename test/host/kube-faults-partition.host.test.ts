/**
 * The link between a node agent and a real API server cut for longer than the Node's grace
 * period, then healed, during pod churn (test/support/kube-churn.ts: 50 pods with a
 * ConfigMap, a Secret and an emptyDir, one in five with a CSI volume attached by `vole
 * controller --kubeconfig` and Kubernetes' csi-attacher).
 *
 * `vole run --kubeconfig` runs in a network namespace the test makes (netns.ts: `agent`,
 * joined to `api` over veth pairs and a bridge, each in a namespace of its own). It reaches
 * the API server at the address its kubeconfig names, 127.0.0.1:PORT inside its namespace,
 * where a forwarder sends it over the veth to the `api` namespace's address, and from there
 * through a unix socket to the API server on the machine's 127.0.0.1 (netns-forward.ts).
 * kube-controller-manager runs its node lifecycle controller with a short
 * `--node-monitor-grace-period`. The cut is nftables in both namespaces (every packet
 * between them dropped): the Node's Lease goes stale, the controller sets its Ready
 * Unknown; meanwhile 10 pods are deleted (two with a CSI volume) and 10 created. Healed:
 * the agent's connections come back, it tears the deleted pods' volumes down and lets them
 * go, mounts the new ones, and posts Ready again; the controller detaches what the deleted
 * pods used once the node no longer reports it in use. Then the logs' history passes the
 * invariants (history-invariants.ts: no mount left of a pod deleted while the agent was cut
 * off, among them) and `vole verify` finds 0 divergences in every log.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { createServer, connect, type Server } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type AgentProcess, repo, startVole, vole } from '../support/agent-process.js';
import { checkHistory } from '../support/history-invariants.js';
import { hostSandbox } from '../support/host.js';
import { churnContents, podChurn } from '../support/kube-churn.js';
import { kubeTestSkipReason, useKubeCluster } from '../support/kube.js';
import { NetLab, netnsSkipReason } from '../support/netns.js';
import { pipeBoth } from '../support/netns-forward.js';

const node = 'cut-node';
const podsMax = 50;
const gracePeriodS = 16;
const skip = kubeTestSkipReason() || netnsSkipReason();

interface NodeObject {
  status?: { conditions?: { type: string; status: string }[] };
}

describe(
  'the agent cut off from the API server past the grace period',
  { skip, timeout: 900_000 },
  () => {
    const cluster = useKubeCluster(['kube-controller-manager', 'csi-attacher']);
    let lab: NetLab | undefined;
    const forwarders: ChildProcess[] = [];
    let relay: Server | undefined;
    after(async () => {
      for (const f of forwarders) if (f.exitCode === null) process.kill(f.pid!);
      relay?.close();
      lab?.destroy();
    });
    const { base, root } = skip === false ? hostSandbox('kubecut') : { base: '', root: '' };
    const db = join(base, 'vole.db');
    const { ok, json, wait } = cluster;
    const churn = podChurn(cluster, { node, base, root });
    const table: string[] = [];

    before(() =>
      cluster.start(base, {
        // Its node lifecycle controller on, with a grace period short enough for a test (the
        // agent renews its Lease every 10 s); vole's replica is the attach/detach controller.
        controllers: '*,-attachdetach',
        kubeControllerManagerFlags: [
          `--node-monitor-grace-period=${gracePeriodS}s`,
          '--node-monitor-period=1s',
        ],
      }),
    );

    /** `node --import tsx netns-forward.ts LISTEN TARGET` in `host`'s namespace, once ready. */
    const forward = async (host: string, listen: string, target: string) => {
      const child = spawn(
        lab!.enter(host)[0]!,
        [
          ...lab!.enter(host).slice(1),
          process.execPath,
          '--import',
          'tsx',
          join(repo, 'test/support/netns-forward.ts'),
          listen,
          target,
        ],
        { cwd: repo, stdio: ['ignore', 'pipe', 'inherit'] },
      );
      forwarders.push(child);
      await new Promise<void>((resolve, reject) => {
        child.stdout!.once('data', () => resolve());
        child.once('exit', (code) => reject(new Error(`forwarder in ${host} exited ${code}`)));
      });
    };

    /** The path agent → (veth) → api namespace → unix socket → the API server. */
    const network = async () => {
      lab = NetLab.create({ hosts: ['api', 'agent'] });
      const server = /server: https:\/\/127\.0\.0\.1:(\d+)/.exec(
        readFileSync(join(cluster.dir(), 'kubeconfig'), 'utf8'),
      );
      assert.ok(server, 'the API server address in the kubeconfig');
      const apiPort = Number(server[1]);
      mkdirSync(join(base, 'net'), { recursive: true });
      const socket = join(base, 'net', 'api.sock');
      relay = createServer((s) => pipeBoth(s, connect(apiPort, '127.0.0.1')));
      await new Promise<void>((resolve) => relay!.listen(socket, resolve));
      const api = `${lab.address('api')}:6443`;
      await forward('api', api, socket);
      await forward('agent', `127.0.0.1:${apiPort}`, api);
    };

    const ready = () =>
      json<NodeObject>(['get', 'node', node]).status?.conditions?.find((c) => c.type === 'Ready')
        ?.status;
    const invariants = () =>
      checkHistory({
        agentLogs: [db],
        controllerLogs: [join(base, 'controller', 'controller.db')],
      });
    const converge = async (fault: string, sinceMs: number) => {
      const done = await wait(
        `convergence after: ${fault}`,
        async () => (ready() === 'True' ? churn.converged() : undefined),
        240_000,
      );
      const ms = Date.now() - sinceMs;
      const check = invariants();
      table.push(
        `${fault.padEnd(56)} ${String(ms).padStart(6)} ms  ${String(done.pods).padStart(4)}  ${String(done.csi).padStart(3)}  ${String(check.checked).padStart(9)}  ${check.violations.length}`,
      );
      assert.deepEqual(check.violations, [], `invariants after: ${fault}`);
      return done.pods;
    };

    test('cut past the grace period, pods deleted meanwhile, healed: nothing stays mounted', async () => {
      await network();
      await cluster.defaultServiceAccount();
      ok(['apply', '-f', '-'], churnContents);
      const socket = cluster.startCsiDriver(base, root, 'cut-disk-id');
      const agent: AgentProcess = cluster.started(
        startVole(
          [
            'run',
            '--kubeconfig',
            cluster.agentKubeconfig(node),
            '--node',
            node,
            '--root',
            root,
            '--db',
            db,
          ],
          { prefix: lab!.enter('agent') },
        ),
        'agent',
      );
      // The driver answers once registered: csi-attacher, started before, may give up on it.
      await agent.line(/CSI driver disk\.csi\.vole\.dev registered/, 120_000);
      cluster.startSidecar('csi-attacher', socket, base, ['--timeout=30s']);
      await cluster.startController(base, 'attachdetach');
      let t0 = Date.now();
      churn.create(churn.names('p', podsMax), 0);
      assert.equal(await converge(`${podsMax} pods created`, t0), podsMax);

      // Cut: the node lifecycle controller says Unknown once the grace period has passed.
      const cutMs = Date.now();
      lab!.cut('agent', 'api');
      await wait(
        'the Node Ready Unknown',
        () => (ready() === 'Unknown' ? true : undefined),
        120_000,
      );
      churn.remove(churn.names('p', 10));
      churn.create(churn.names('q', 10), 0);
      // Held past the grace period from the cut itself too (Unknown may come sooner: the
      // grace runs from the last renewal), and at least 3 s after the deletions.
      const holdMs = Math.max(cutMs + (gracePeriodS + 2) * 1000 - Date.now(), 3_000);
      await new Promise((resolve) => setTimeout(resolve, holdMs));
      const p0 = json<{ metadata: { deletionTimestamp?: string } }>(['get', 'pod', 'p0']);
      assert.ok(p0.metadata.deletionTimestamp, 'p0 waits, Terminating, on the node cut off');
      const heldMs = Date.now() - cutMs;
      t0 = Date.now();
      lab!.heal('agent', 'api');
      assert.equal(
        await converge(
          `link cut ${Math.round(heldMs / 1000)} s (grace ${gracePeriodS} s), churn, healed`,
          t0,
        ),
        podsMax,
      );
      // Ready again because the agent posted it on seeing Unknown, not five minutes later.
      await agent.line(/node Ready is Unknown on the API server: posting Ready again/);

      await agent.stop();
      for (const p of [...cluster.processes]) await p.stop();
      for (const log of [db, join(base, 'controller', 'controller.db')]) {
        const verify = vole('verify', '--db', log);
        assert.equal(verify.status, 0, `${log}: ${verify.stdout}${verify.stderr}`);
        assert.match(verify.stdout, / 0 divergences/, log);
      }
      console.log(
        [`${'fault'.padEnd(56)} converged   pods  csi  invariants  violations`, ...table].join(
          '\n',
        ),
      );
    });
  },
);
