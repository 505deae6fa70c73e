import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemorySink } from '../../src/engine/sink.js';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';

const scenarios = join(import.meta.dirname, '../scenarios');

async function run(file: string) {
  const sink = new MemorySink();
  const result = await simulate(parseScenario(readFileSync(join(scenarios, file), 'utf8'), file), {
    log: { sink, readAll: () => sink.events },
  });
  return { result, events: sink.events };
}

test('controller: multi-attach is refused with one FailedAttachVolume report per pod, not one per retry', async () => {
  const { result } = await run('controller-multi-attach.yaml');
  assert.deepEqual(result.reports, [
    {
      t: 0,
      reason: 'FailedAttachVolume',
      pod: 'uid-b',
      volume: 'fake.disk/disk-1',
      message: 'Multi-Attach error for volume "pv-1" Volume is already used by pod(s) a',
    },
  ]);
  const nodes = (result.state as { nodes: { node: string; volumesAttached: { name: string }[] }[] })
    .nodes;
  assert.deepEqual(
    nodes.map((n) => `${n.node}:${n.volumesAttached.map((v) => v.name).join(',')}`),
    ['node-1:', 'node-2:fake.disk/disk-1'],
  );
});

test('controller: a forced detach records why and skips the in-use check; a normal one verifies', async () => {
  const forced = await run('controller-force-detach.yaml');
  const detach = forced.events.find((e) => e.type === 'OperationStarted' && e.op === 'detach');
  assert.ok(detach !== undefined && detach.type === 'OperationStarted');
  assert.equal(detach.forced, 'timeout');
  assert.equal(detach.verifySafeToDetach, false);
  assert.ok(detach.tsMs > 6 * 60_000, `forced only after 6 min (at ${detach.tsMs} ms)`);
  // Not in use before the wait expired: a normal, verified detach.
  const normal = await run('controller-multi-attach.yaml');
  const plain = normal.events.find((e) => e.type === 'OperationStarted' && e.op === 'detach');
  assert.ok(
    plain?.type === 'OperationStarted' &&
      plain.verifySafeToDetach === true &&
      plain.forced === undefined,
  );
  // Spec §3.3 decision table: no longer in use but the wait expired (10 min): detach without
  // verification, counted as a timeout.
  const late = await run('controller-attach-detach.yaml');
  const expired = late.events.find((e) => e.type === 'OperationStarted' && e.op === 'detach');
  assert.ok(
    expired?.type === 'OperationStarted' &&
      expired.verifySafeToDetach === false &&
      expired.forced === 'timeout',
  );
  const oos = await run('controller-out-of-service.yaml');
  const tainted = oos.events.find((e) => e.type === 'OperationStarted' && e.op === 'detach');
  assert.ok(tainted?.type === 'OperationStarted' && tainted.forced === 'out-of-service');
});

test('controller: the published node status lists a volume only while it is confirmed attached', async () => {
  const { result } = await run('controller-attach-detach.yaml');
  const state = result.state as {
    attachments: unknown[];
    nodes: { node: string; volumesAttached: unknown[] }[];
  };
  assert.deepEqual(state.attachments, []);
  assert.deepEqual(state.nodes, [{ node: 'node-1', volumesAttached: [] }]);
});
