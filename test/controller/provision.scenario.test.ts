/**
 * The leading controller provisions (cluster mode: whoever binds claims provisions): every
 * decision of its provisioning scenarios is re-planned by `vole verify`; the binding of a
 * provisioned volume is the binder's ClaimBound after the CreateVolume that made its PV;
 * WaitForFirstConsumer asks for the topology of the first consumer's node.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemorySink } from '../../src/engine/sink.js';
import type { EventOf } from '../../src/events/index.js';
import { verify } from '../../src/postmortem/index.js';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';

const dir = join(import.meta.dirname, '..', 'scenarios');
const scenarios = readdirSync(dir)
  .filter((f) => f.startsWith('controller-provision-'))
  .sort();

async function run(file: string) {
  const sink = new MemorySink();
  const text = readFileSync(join(dir, file), 'utf8');
  const result = await simulate(parseScenario(text, file), {
    log: { sink, readAll: () => sink.events },
  });
  assert.deepEqual(result.failures, [], file);
  return sink.events;
}

test('controller provisioning: the scenarios exist', () => {
  assert.deepEqual(scenarios, [
    'controller-provision-claim-deleted.yaml',
    'controller-provision-expansion.yaml',
    'controller-provision-failing.yaml',
    'controller-provision-lifecycle.yaml',
    'controller-provision-pvc-protection.yaml',
    'controller-provision-restart-mid-create.yaml',
  ]);
});

for (const file of scenarios) {
  test(`controller provisioning: vole verify re-plans every decision of ${file}`, async () => {
    const events = await run(file);
    const report = verify(events);
    assert.deepEqual(report.divergences, [], file);
    assert.ok(events.some((e) => e.type === 'OperationStarted' && e.op === 'provision'));
    assert.ok(events.some((e) => e.type === 'OperationStarted' && e.op === 'deleteVolume'));
  });
}

const madeThenBound =
  'controller provisioning: the PV made, the binder binds the claim to it; ' +
  'WaitForFirstConsumer asks for its node’s zone';
test(madeThenBound, async () => {
  const events = await run('controller-provision-lifecycle.yaml');
  const created = events.findIndex(
    (e) =>
      e.type === 'CallSucceeded' &&
      e.call === 'createVolume' &&
      e.provisioned?.volumeId === 'pvc-c-1',
  );
  const bound = events.findIndex(
    (e) => e.type === 'ClaimBound' && e.claim === 'data' && e.volume === 'pvc-c-1',
  );
  assert.ok(created > 0 && bound > created, `CreateVolume at ${created}, ClaimBound at ${bound}`);
  const late = events.find(
    (e) =>
      e.type === 'OperationStarted' && e.op === 'provision' && e.provision?.claim.name === 'late',
  );
  assert.ok(late?.type === 'OperationStarted');
  assert.equal(late.provision?.selectedNode, 'node-2');
  assert.deepEqual(late.provision?.requisite, [{ 'topology.example.com/zone': 'z2' }]);
  const immediate = events.find(
    (e) =>
      e.type === 'OperationStarted' && e.op === 'provision' && e.provision?.claim.name === 'data',
  );
  assert.ok(immediate?.type === 'OperationStarted');
  assert.equal(immediate.provision?.selectedNode, undefined);
  assert.ok(
    !events.some(
      (e) =>
        e.type === 'OperationStarted' &&
        e.op === 'provision' &&
        e.provision?.claim.name === 'first',
    ),
    'a static PV of the class is used first',
  );
});

test('controller pvc-protection: the finalizer is removed only after the last pod using the claim goes', async () => {
  const events = await run('controller-provision-pvc-protection.yaml');
  const released = events
    .map((e, i) => ({ e, i }))
    .filter(({ e }) => e.type === 'ClaimFinalizerRemoved');
  assert.deepEqual(
    released.map(({ e }) => (e.type === 'ClaimFinalizerRemoved' ? e.claim : '')),
    ['spare', 'data'],
  );
  const podGone = events.findIndex((e) => e.type === 'PodRemoved' && e.uid === 'uid-a');
  assert.ok(podGone > 0 && released[1]!.i > podGone, `pod removed at ${podGone}`);
  const marked = events.find(
    (e) =>
      e.type === 'ObjectUpserted' &&
      e.object.kind === 'PersistentVolumeClaim' &&
      e.object.metadata.name === 'data' &&
      e.object.metadata.deletionTimestamp !== undefined,
  );
  assert.ok(marked, 'the claim in use is marked deleted, not removed');
  assert.ok(!events.some((e) => e.type === 'ObjectRemoved' && e.kind === 'PersistentVolumeClaim'));
  // The log's re-planning reaches the same decisions; one dropped is a divergence.
  const dropped = events.filter((e) => !(e.type === 'ClaimFinalizerRemoved' && e.claim === 'data'));
  const renumbered = dropped.map((e, i) => ({ ...e, seq: i + 1 }));
  assert.notDeepEqual(verify(renumbered).divergences, []);
});

test('controller expansion: ControllerExpandVolume for the request, retried until it answers; the PV grows', async () => {
  const events = await run('controller-provision-expansion.yaml');
  const expands = events.filter(
    (e): e is EventOf<'OperationStarted'> =>
      e.type === 'OperationStarted' && e.op === 'controllerExpand',
  );
  // pvc-c-a three times (two failures, then ok) and pvc-c-b once (no RPC); never pvc-c-c.
  assert.deepEqual(
    expands.map((e) => [e.volume.split('^')[1], e.sizeBytes]),
    [
      ['pvc-c-a', 2 ** 31],
      ['pvc-c-b', 2 ** 31],
      ['pvc-c-a', 2 ** 31],
      ['pvc-c-a', 2 ** 31],
    ],
  );
  const [, second, third] = expands.filter((e) => e.volume.endsWith('pvc-c-a'));
  assert.ok(third!.tsMs - second!.tsMs >= 1000, 'the second retry waits twice as long (backoff)');
  const grown = events.filter(
    (e) => e.type === 'CallSucceeded' && e.call === 'controllerExpand' && e.sizeBytes === 2 ** 31,
  );
  assert.equal(grown.length, 2);
});
