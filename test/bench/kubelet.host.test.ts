/**
 * The kubelet bench (scripts/bench/kubelet.ts) at a tiny size: 3 pods on a kubemark hollow
 * kubelet and 3 on a vole node of one API server, both SIGKILLed and started again. Every
 * figure is measured (none missing or not a number), both nodes asked the API server
 * something, and nothing is left behind: no hollow kubelet root, no vole root, no mount.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { runKubelet } from '../../scripts/bench/kubelet.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { hostSandbox } from '../support/host.js';
import { kubeTestSkipReason } from '../support/kube.js';

const skip = kubeTestSkipReason();

describe('the kubelet bench, 3 pods a node', { skip, timeout: 600_000 }, () => {
  const { base } = skip === false ? hostSandbox('kubelet-bench') : { base: '' };

  test('measures both nodes and cleans up after itself', async () => {
    // The section checks it runs in a mount namespace of its own, as main.ts starts it.
    process.env.BENCH_OUTER_MOUNT_NS = process.env.VOLE_OUTER_MOUNT_NS;
    const result = await runKubelet({ sizes: [3], scratch: () => base });
    const unmeasured = result.figures.filter((f) => f.value === null && !f.name.startsWith('('));
    assert.deepEqual(unmeasured, [], 'every size finished');
    const byName = new Map(result.figures.map((f) => [f.name, f]));
    for (const label of ['kubelet', 'vole']) {
      for (const figure of [
        'bound → volumes on disk p50',
        'bound → volumes on disk p99',
        'CPU a pod',
        'reconcile after SIGKILL',
        'API requests over the run',
      ]) {
        const value = byName.get(`${label}, 3 pods: ${figure}`)?.value;
        assert.ok(
          typeof value === 'number' && Number.isFinite(value) && value > 0,
          `${label}: ${figure} is ${value}`,
        );
      }
    }
    for (const ratio of ['p99', 'CPU a pod', 'reconcile after SIGKILL'])
      assert.equal(typeof byName.get(`vole / kubelet, 3 pods: ${ratio}`)?.met, 'boolean');
    // Each start of kubemark made a root of its own (two here: the restart's too).
    const log = readFileSync(join(base, 'cluster/hollow-node-k1.log'), 'utf8');
    const roots = [...log.matchAll(/Using (\S+) as root dir/g)].map((m) => m[1]!);
    assert.equal(roots.length, 2, `the hollow kubelet started twice: ${roots.join(', ')}`);
    assert.deepEqual(
      roots.filter((r) => existsSync(r)),
      [],
      'every hollow root is removed',
    );
    assert.equal(existsSync(join(base, 'cluster/hollow-nodes')), false, 'kube-down ran');
    assert.equal(existsSync(join(base, 'vole-root')), false, "vole's root is removed");
    assert.deepEqual(mountsUnder(await readMountTable(), base), [], 'nothing stays mounted');
  });
});
