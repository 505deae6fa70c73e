/**
 * The CI budget of randomized fault simulation (issue: at least 2,000 runs): every seed
 * must keep the invariants and converge with nothing leaked on the pretend host.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { chaos, generateScenario } from '../src/sim/chaos.js';
import { parseScenario } from '../src/sim/scenario.js';
import type { Core } from '../src/engine/core.js';
import { kubeletCore } from '../src/engine/cores.js';
import { kubeletMode } from '../src/sim/kubelet-mode.js';
import { simulate, simulateWith } from '../src/sim/simulate.js';
import type { Operation } from '../src/kubelet/planner.js';
import type { World } from '../src/kubelet/types.js';

const runs = Number(process.env.VOLE_CHAOS_RUNS ?? 2000);
const seed = Number(process.env.VOLE_CHAOS_SEED ?? 20_261_124);

test(
  `chaos: ${runs} seeded runs from seed ${seed} keep the invariants and converge`,
  { timeout: 900_000 },
  async () => {
    const report = await chaos({ seed, runs });
    const failed = report.failures.map((f) => `seed ${f.seed}: ${f.messages.join('; ')}`);
    assert.deepEqual(failed, []);
    assert.equal(report.runs, runs);
    assert.ok(report.faultsInjected > runs, `faults were injected (${report.faultsInjected})`);
    assert.ok(report.restarts > runs / 2, `restarts happened (${report.restarts})`);
    assert.ok(
      report.invariantChecks > report.events,
      `invariants were checked (${report.invariantChecks})`,
    );
    process.stdout.write(
      `# chaos: ${report.runs} runs, ${report.events} events, ${report.calls} calls (${report.faultsInjected} faulty), ${report.restarts} restarts, ${report.invariantChecks} invariant checks\n`,
    );
  },
);

test('chaos: a seed always generates the same scenario, and its file reproduces the run', async () => {
  const a = stringify(generateScenario(42).document);
  const b = stringify(generateScenario(42).document);
  assert.equal(a, b);
  assert.notEqual(a, stringify(generateScenario(43).document));
  const first = await simulate(parseScenario(a));
  const again = await simulate(parseScenario(b));
  assert.equal(JSON.stringify(first), JSON.stringify(again));
});

/**
 * The "checks bite" of docs/reliability.md: a kubelet core that forgets the uncertain state after an
 * uncertain setUp (it folds the failure as a transient one, so the mount counts as not
 * there) must be caught by the same seeds the real core passes: the pod volume the fake
 * plugin did set up is never torn down, and the convergence check finds it leaked.
 */
test('chaos: a core that forgets an uncertain setUp is caught as leaked pod volumes', async () => {
  const forgetful: Core<World, Operation> = {
    ...kubeletCore,
    fold: (world, event) =>
      kubeletCore.fold(
        world,
        event.type === 'CallFailed' && event.call === 'setUp' && event.error.kind === 'uncertain'
          ? { ...event, error: { ...event.error, kind: 'transient' } }
          : event,
      ),
  };
  const seeds = { seed, runs: 300 };
  const real = await chaos(seeds);
  assert.deepEqual(real.failures, [], 'the real core passes these seeds');
  const mutant = await chaos({
    ...seeds,
    simulate: (scenario, opts) => simulateWith(scenario, { ...kubeletMode, core: forgetful }, opts),
  });
  const leaked = mutant.failures.filter((f) =>
    f.messages.some((m) => m.startsWith('leaked on the host: pod volume')),
  );
  process.stdout.write(`# the forgetful core: caught in ${mutant.failures.length} of 300 seeds\n`);
  assert.ok(leaked.length >= 5, `caught as leaked pod volumes in ${leaked.length} of 300 seeds`);
});
