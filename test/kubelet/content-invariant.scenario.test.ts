/**
 * The content-exists invariant (src/kubelet/content-invariant.ts) that `vole simulate` and
 * `vole chaos` check on every event: a setUp that succeeds while a ConfigMap or Secret it
 * must read is missing from the world is a violation; one whose objects exist, or are
 * optional, is not. The plugins here write whatever they are asked to (they read no
 * store), as a cache kept past its object would.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { VolumeManager } from '../../src/agent/volume-manager.js';
import { VirtualClock } from '../../src/clock.js';
import type { Pod } from '../../src/events/k8s.js';
import { FakePlugin, type FakeCallRecord } from '../../src/plugins/fake.js';
import { caps } from '../../src/plugins/types.js';
import { checkSetUpContents } from '../../src/kubelet/content-invariant.js';
import type { Violation } from '../../src/operations/violation.js';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

function run(pod: Pod, secretExists: boolean) {
  const clock = new VirtualClock(0);
  const journal: FakeCallRecord[] = [];
  const blind = (name: string) =>
    new FakePlugin({ caps: caps(name, { requiresRemount: true }), clock, journal });
  const vm = VolumeManager.create({
    node: 'node-1',
    plugins: [blind('kubernetes.io/secret'), blind('kubernetes.io/projected')],
    clock,
    controllerAttachDetach: false,
  });
  const violations: Violation[] = [];
  vm.subscribe((event, world) => violations.push(...checkSetUpContents(world, event)));
  vm.start();
  if (secretExists)
    vm.inputs.upsertObject({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 's', namespace: 'default' },
      stringData: { password: 'p' },
    });
  vm.inputs.markSourcesReady();
  vm.inputs.addPod(pod);
  return { vm, violations, journal };
}

const reading = (optional: boolean): Pod => ({
  metadata: { name: 'b', namespace: 'default', uid: 'uid-b' },
  spec: {
    volumes: [
      { name: 'sec', secret: { secretName: 's', optional } },
      { name: 'all', projected: { sources: [{ secret: { name: 's', optional } }] } },
    ],
  },
});

test('content-exists: a setUp that succeeds with its Secret missing is a violation', async () => {
  const { vm, violations, journal } = run(reading(false), false);
  for (let i = 0; i < 50 && journal.filter((c) => c.call === 'setUp').length < 2; i++) await turn();
  for (let i = 0; i < 20; i++) await turn();
  assert.equal(journal.filter((c) => c.call === 'setUp').length, 2);
  assert.deepEqual(
    violations.map((v) => v.invariant),
    ['content-exists', 'content-exists'],
  );
  assert.match(
    violations[0]!.message,
    /^setUp of kubernetes\.io\/(secret|projected)\/uid-b-(sec|all) for pod uid-b succeeded while Secret default\/s does not exist \(seq \d+\)$/,
  );
  await vm.drainAndStop();
});

test('content-exists: no violation when the Secret exists, or the source is optional', async () => {
  for (const [optional, exists] of [
    [false, true],
    [true, false],
  ] as const) {
    const { vm, violations, journal } = run(reading(optional), exists);
    for (let i = 0; i < 50 && journal.filter((c) => c.call === 'setUp').length < 2; i++)
      await turn();
    for (let i = 0; i < 20; i++) await turn();
    assert.equal(journal.filter((c) => c.call === 'setUp').length, 2);
    assert.deepEqual(violations, [], `optional ${optional}, exists ${exists}`);
    await vm.drainAndStop();
  }
});
