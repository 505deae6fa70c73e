import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemorySink } from '../../src/engine/sink.js';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';
import { controllerMode } from '../../src/sim/controller-mode.js';
import type { ControllerWorld } from '../../src/controller/types.js';

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
  // behaviour C3.3 decision table: no longer in use but the wait expired (10 min): detach without
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
  const file = 'controller-attach-detach.yaml';
  const scenario = parseScenario(readFileSync(join(scenarios, file), 'utf8'), file);
  const mismatches: string[] = [];
  let listedAt = 0;
  const result = await simulate(scenario, {
    onEvent: (event, world) => {
      const state = controllerMode.describe(world as unknown as ControllerWorld) as {
        attachments: { volume: string; node: string; attachedConfirmed: boolean }[];
        nodes: { node: string; volumesAttached: { name: string }[] }[];
        pending: { op: string; volume: string; node: string }[];
      };
      for (const node of state.nodes) {
        const listed = new Set(node.volumesAttached.map((v) => v.name));
        if (listed.size > 0) listedAt++;
        // Attached, and not on its way out: a detach takes it off the list before it starts.
        const detaching = (volume: string) =>
          state.pending.some(
            (p) => p.op === 'detach' && p.volume === volume && p.node === node.node,
          );
        const confirmed = state.attachments
          .filter((a) => a.node === node.node && a.attachedConfirmed && !detaching(a.volume))
          .map((a) => a.volume);
        if (JSON.stringify([...listed].sort()) !== JSON.stringify(confirmed.sort()))
          mismatches.push(`seq ${event.seq} ${event.type}: ${node.node} lists [${[...listed]}]`);
      }
    },
  });
  assert.deepEqual(result.failures, []);
  assert.deepEqual(mismatches, []);
  assert.ok(listedAt > 0, 'the volume was listed while attached');
  const state = result.state as { nodes: { node: string; volumesAttached: unknown[] }[] };
  assert.deepEqual(state.nodes, [{ node: 'node-1', volumesAttached: [] }]);
});
