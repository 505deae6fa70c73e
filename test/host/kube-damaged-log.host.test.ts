/**
 * A damaged log met by the Kubernetes-mode commands on a real kube-apiserver: the log is
 * damaged where a restart does not read, so each starts, and the whole-file check finds
 * the damage in the background. `vole run --kubeconfig` (long-running and --once) and
 * `vole controller --kubeconfig` then stop at once and exit 2 with the advice (salvage,
 * import, restore), as `vole run --manifests` does; the log keeps every byte, an orphan the
 * agent would clean up stays, and the controller gives its Lease up for a replica on a
 * sound log.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { type AgentProcess, startVole } from '../support/agent-process.js';
import { damageMiddlePage, fingerprint, logWithSnapshot } from '../support/damaged-log.js';
import { hostSandbox } from '../support/host.js';
import { kubeTestSkipReason, useKubeCluster } from '../support/kube.js';

const skip = kubeTestSkipReason();

/** The process's exit code, stdout and stderr once it has ended by itself. */
async function ended(p: AgentProcess): Promise<{ status: number | null; out: string }> {
  let stderr = '';
  p.child.stderr!.on('data', (chunk: string) => (stderr += chunk));
  const status = await p.exited;
  return { status, out: `${p.lines.join('\n')}\n${stderr}` };
}

function assertRefused(r: { status: number | null; out: string }): void {
  assert.equal(r.status, 2, `exit 2:\n${r.out}`);
  assert.match(r.out, /is damaged \(SQLite's quick_check.*\); nothing was written to it/s);
  assert.match(
    r.out,
    /vole export --salvage --db .* --out OUT`, then `vole import OUT --db NEW`, or restore it from a backup/,
  );
  assert.doesNotMatch(r.out, /\n\s+at .+\(.+:\d+:\d+\)/, 'no stack trace');
}

describe('a damaged log in Kubernetes mode: exit 2 with the advice', { skip }, () => {
  const cluster = useKubeCluster([]);
  const { base } = skip === false ? hostSandbox('kube-damaged') : { base: '' };

  before(() => cluster.start(base));

  /** An orphan as a fresh log leaves it: the volume directory of a pod no log knows. */
  function rootWithOrphan(name: string): { root: string; orphan: string } {
    const root = join(base, `${name}-root`);
    const orphan = join(root, 'pods/uid-stray/volumes/kubernetes.io~empty-dir/data');
    mkdirSync(orphan, { recursive: true });
    writeFileSync(join(orphan, 'file'), 'stray');
    return { root, orphan };
  }

  async function runAgent(name: string, once: readonly string[]) {
    const db = await logWithSnapshot(base, name, 3_000);
    damageMiddlePage(db);
    const before = fingerprint(db);
    const { root, orphan } = rootWithOrphan(name);
    const kubeconfig = cluster.agentKubeconfig('node-1');
    const agent = cluster.started(
      startVole([
        'run',
        '--kubeconfig',
        kubeconfig,
        '--node',
        'node-1',
        '--root',
        root,
        '--db',
        db,
        ...once,
      ]),
    );
    const r = await ended(agent);
    assertRefused(r);
    assert.deepEqual(fingerprint(db), before, 'the log and its WAL keep every byte');
    assert.equal(readFileSync(join(orphan, 'file'), 'utf8'), 'stray', 'the orphan is untouched');
    assert.doesNotMatch(r.out, /orphans: \d+ found/);
  }

  // Each stops by itself or fails at its timeout (the code before stayed up).
  const timeout = 150_000;

  test(
    'vole run --kubeconfig on a damaged log exits 2 with the advice, the orphan left',
    { timeout },
    async () => {
      await runAgent('agent', []);
    },
  );

  test(
    'vole run --kubeconfig --once on a damaged log exits 2, not settled',
    { timeout },
    async () => {
      await runAgent('agent-once', ['--once', '--timeout', '60']);
    },
  );

  test(
    'vole controller --kubeconfig on a damaged log exits 2 with the advice and gives its Lease up',
    { timeout },
    async () => {
      const db = await logWithSnapshot(base, 'controller', 3_000, 'controller');
      damageMiddlePage(db);
      const before = fingerprint(db);
      const kubeconfig = cluster.controllerKubeconfig(join(base, 'controller.kubeconfig'));
      const controller = cluster.started(
        startVole([
          ...['controller', '--kubeconfig', kubeconfig, '--identity', 'c1'],
          ...['--root', join(base, 'controller-root'), '--db', db],
        ]),
      );
      const r = await ended(controller);
      assertRefused(r);
      assert.match(r.out, /leading: CSI drivers/, 'it led, and opened the log');
      assert.deepEqual(fingerprint(db), before, 'the log and its WAL keep every byte');
      const holder = cluster.ok([
        ...['-n', 'kube-system', 'get', 'lease', 'vole-attach-detach'],
        ...['-o', 'jsonpath={.spec.holderIdentity}'],
      ]);
      assert.equal(holder, '', 'the Lease is free for another replica');
    },
  );
});
