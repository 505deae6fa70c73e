/**
 * `waitForPod` results (docs/scenarios.md: they go to `waits`, not to expectations), checked
 * against behaviour K2.5 WaitForAttachAndMount:
 *  - pod errors from the populator (behaviour K2.6) stop the wait at once with the errors, sorted
 *    (PopPodErrors) and joined by "; ";
 *  - otherwise it polls until the timeout ("timed out waiting for the condition");
 *  - Uncertain does not count as mounted (S5);
 *  - the error is `unmounted volumes=[…], unattached volumes=[…], failed to process
 *    volumes=[…]: <cause>`, each list sorted and space-separated (Go's %v of []string);
 *    unattached = attachable DSW volumes absent from ASW; failed to process = expected
 *    names not in DSW.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseScenario } from '../src/sim/scenario.js';
import { simulate, type SimulationResult, type WaitResult } from '../src/sim/simulate.js';

const file = join(import.meta.dirname, 'scenarios', 'wait-for-pod-results.yaml');

let once: Promise<SimulationResult> | undefined;
/** The scenario is deterministic (checked by scenarios.scenario.test.ts): run it once. */
function run(): Promise<SimulationResult> {
  once ??= simulate(parseScenario(readFileSync(file, 'utf8'), file));
  return once;
}

function waitOf(result: SimulationResult, pod: string): WaitResult {
  const found = result.waits.filter((w) => w.pod === pod);
  assert.equal(found.length, 1, `one wait for ${pod}`);
  return found[0]!;
}

test("waits: the scenario's own expectations hold, one wait per waitForPod step, in order", async () => {
  const result = await run();
  assert.deepEqual(result.failures, []);
  assert.ok(result.ok);
  assert.deepEqual(
    result.waits.map((w) => w.pod),
    ['uid-a', 'uid-b', 'uid-c', 'uid-d', 'uid-e'],
  );
});

test('waits: claims that do not exist fail the wait with both volumes unprocessed', async () => {
  const a = waitOf(await run(), 'uid-a');
  assert.equal(a.ok, false);
  const error = a.error ?? '';
  assert.ok(
    error.startsWith(
      'unmounted volumes=[adata zdata], unattached volumes=[], failed to process volumes=[adata zdata]: ',
    ),
    error,
  );
  const cause = error.slice(error.indexOf(']: ') + 3);
  // The populator's errors, one per claim, sorted and joined by "; ".
  assert.ok(cause.includes('missing-a') && cause.includes('missing-z'), cause);
  assert.ok(cause.indexOf('missing-a') < cause.indexOf('missing-z'), cause);
  assert.ok(cause.includes('; '), cause);
  assert.ok(!cause.includes('timed out'), 'pod errors stop the wait before the timeout');
});

test('waits: a volume that cannot be attached times out, listed as unmounted and unattached', async () => {
  const b = waitOf(await run(), 'uid-b');
  assert.equal(b.ok, false);
  const error = b.error ?? '';
  // The emptyDir mounted; only the attachable volume is missing.
  assert.ok(
    error.startsWith(
      'unmounted volumes=[data], unattached volumes=[data], failed to process volumes=[]: ',
    ),
    error,
  );
  assert.ok(error.includes('timed out waiting for the condition'), error);
});

test('waits: a pod whose device mount ends during the wait becomes ready', async () => {
  const result = await run();
  const c = waitOf(result, 'uid-c');
  assert.equal(c.ok, true);
  assert.equal(c.error, undefined);
  // Its SetUp ran when the 5 s device mount answered.
  const setUps = result.calls.filter(
    (call) => call.volume === 'fake.disk/disk-3' && call.call === 'setUp',
  );
  assert.deepEqual(
    setUps.map((call) => call.t),
    [5000],
  );
});

test('waits: an uncertain mount is not mounted, the wait times out', async () => {
  const d = waitOf(await run(), 'uid-d');
  assert.equal(d.ok, false);
  const error = d.error ?? '';
  // Attached (so not "unattached"), but its only record is Uncertain.
  assert.ok(
    error.startsWith(
      'unmounted volumes=[data], unattached volumes=[], failed to process volumes=[]: ',
    ),
    error,
  );
  assert.ok(error.includes('timed out waiting for the condition'), error);
});

test('waits: a volume no plugin supports cannot be processed', async () => {
  const e = waitOf(await run(), 'uid-e');
  assert.equal(e.ok, false);
  const error = e.error ?? '';
  assert.ok(
    error.startsWith(
      'unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: ',
    ),
    error,
  );
  // behaviour K1.1: `failed to get Plugin from volumeSpec for volume "<spec>" err=<err>`.
  assert.ok(error.includes('failed to get Plugin from volumeSpec for volume "data"'), error);
  assert.ok(!error.includes('timed out'), 'pod errors stop the wait before the timeout');
});
