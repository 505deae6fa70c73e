import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ControllerManager } from '../../src/agent/controller-manager.js';
import { managedAnnotation } from '../../src/controller/index.js';
import { RealClock, VirtualClock } from '../../src/clock.js';
import { operationsInFlightMax, planOperationsMax } from '../../src/constants.js';
import { controllerCore } from '../../src/engine/cores.js';
import type { Node } from '../../src/events/k8s.js';
import { describeControllerWorld } from '../../src/postmortem/index.js';
import { FakePlugin, type FakeCallRecord } from '../../src/plugins/fake.js';
import { caps } from '../../src/plugins/types.js';
import { claim, diskObjects, pod } from '../support/builders.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-cm-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
async function settle() {
  for (let i = 0; i < 30; i++) await turn();
}

function node(name: string): Node {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, annotations: { [managedAnnotation]: 'true' } },
    status: { conditions: [{ type: 'Ready', status: 'True' }], volumesInUse: [] },
  };
}

function open(db: string, journal: FakeCallRecord[]) {
  const clock = new VirtualClock(0);
  const disk = new FakePlugin({ caps: caps('fake.disk', { attachable: true }), clock, journal });
  return ControllerManager.open({
    db,
    plugins: [disk],
    clock,
    durability: 'normal',
    snapshotEveryEvents: 5,
    verifyAttachments: false,
  });
}

test("controller manager: attaches a scheduled pod's volume and publishes volumesAttached", async () => {
  const journal: FakeCallRecord[] = [];
  const cm = open(join(dir, 'a.db'), journal);
  cm.start();
  cm.inputs.upsertObject(node('node-1'));
  for (const e of diskObjects('disk-1'))
    if (e.type === 'ObjectUpserted') cm.inputs.upsertObject(e.object);
  const scheduled = pod('uid-a', [claim('disk-1')]);
  cm.inputs.addPod({ ...scheduled, spec: { ...scheduled.spec, nodeName: 'node-1' } });
  await settle();
  assert.deepEqual(
    journal.map((c) => `${c.call} ${c.volume} ${c.node}`),
    ['attach fake.disk/disk-1 node-1'],
  );
  assert.deepEqual(
    cm.status.volumesAttached('node-1').map((v) => v.name),
    ['fake.disk/disk-1'],
  );
  assert.equal(cm.status.settled(), true);
  cm.inputs.removePod('uid-a');
  await settle();
  // behaviour C2.1: a new attachment is assumed mounted until the node reports otherwise.
  assert.deepEqual(
    cm.status.volumesAttached('node-1').map((v) => v.name),
    ['fake.disk/disk-1'],
  );
  cm.inputs.upsertObject(node('node-1')); // the node's status: nothing in use
  await settle();
  assert.deepEqual(cm.status.volumesAttached('node-1'), []);
  assert.equal(journal.at(-1)?.call, 'detach');
  await cm.drainAndStop();
});

test('controller manager: a restart loads the latest snapshot and folds only the events after it', async () => {
  const db = join(dir, 'b.db');
  const journal: FakeCallRecord[] = [];
  const first = open(db, journal);
  first.start();
  first.inputs.upsertObject(node('node-1'));
  first.inputs.upsertObject(node('node-2'));
  for (const handle of ['disk-1', 'disk-2'])
    for (const e of diskObjects(handle))
      if (e.type === 'ObjectUpserted') first.inputs.upsertObject(e.object);
  for (const [uid, handle, n] of [
    ['uid-a', 'disk-1', 'node-1'],
    ['uid-b', 'disk-2', 'node-2'],
  ]) {
    const p = pod(uid!, [claim(handle!)]);
    first.inputs.addPod({ ...p, spec: { ...p.spec, nodeName: n! } });
  }
  await settle();
  const before = describeControllerWorld(first.world);
  await first.drainAndStop();
  assert.equal(first.restoredFromSeq, 0);
  const second = open(db, journal);
  assert.ok(second.restoredFromSeq > 0, 'loaded from a snapshot');
  assert.ok(second.restoredFromSeq <= before.seq);
  assert.deepEqual(describeControllerWorld(second.world), before);
  second.start();
  await settle();
  assert.deepEqual(
    second.status.volumesAttached('node-2').map((v) => v.name),
    ['fake.disk/disk-2'],
  );
  await second.drainAndStop();
});

test('controller manager: with more volumes to attach than may run, a tick plans at most what can start, and nothing while the executor is full', async () => {
  const journal: FakeCallRecord[] = [];
  const fake = new FakePlugin({
    caps: caps('fake.disk', { attachable: true }),
    clock: new RealClock(),
    journal,
  });
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const attacher = fake.attacher!;
  const gated = {
    ...fake,
    attacher: {
      ...attacher,
      attach: async (...args: Parameters<typeof attacher.attach>) => (
        await gate,
        attacher.attach(...args)
      ),
    },
  };
  const core = controllerCore as { plan: typeof controllerCore.plan };
  const plan = core.plan;
  const planned: number[] = [];
  core.plan = (world, nowMs, opts) => {
    planned.push(opts?.volumes === undefined ? -1 : [...opts.volumes].length);
    return plan(world, nowMs, opts);
  };
  const cm = ControllerManager.create({ plugins: [gated], verifyAttachments: false });
  try {
    cm.start();
    cm.inputs.upsertObject(node('node-1'));
    const pods = operationsInFlightMax + 904; // 5,000
    for (let i = 0; i < pods; i++) {
      for (const e of diskObjects(`d${i}`))
        if (e.type === 'ObjectUpserted') cm.inputs.upsertObject(e.object);
      const scheduled = pod(`uid-${i}`, [claim(`d${i}`)]);
      cm.inputs.addPod({ ...scheduled, spec: { ...scheduled.spec, nodeName: 'node-1' } });
    }
    await settle();
    assert.equal(cm.world.running.size, operationsInFlightMax, 'the executor is full');
    assert.ok(
      Math.max(...planned) <= planOperationsMax,
      `at most ${planOperationsMax} volumes a plan (${Math.max(...planned)})`,
    );
    const plansAtCapacity = planned.length;
    cm.inputs.upsertObject(node('node-2')); // an event while full: no plan, no busy loop
    for (let i = 0; i < 20; i++) await turn();
    assert.equal(
      planned.length,
      plansAtCapacity,
      'nothing is planned while no operation may start',
    );
    release();
    await cm.waitUntilSettled({ timeoutMs: 30_000 });
    assert.equal(journal.filter((c) => c.call === 'attach').length, pods);
    assert.ok(Math.max(...planned) <= planOperationsMax);
  } finally {
    core.plan = plan;
    cm.stop();
  }
});

test('a claim listed again without a UID is, as the log holds it, the claim the world holds', () => {
  const cm = ControllerManager.create({
    plugins: [
      new FakePlugin({
        caps: caps('fake.disk', { attachable: true }),
        clock: new RealClock(),
        journal: [],
      }),
    ],
    verifyAttachments: false,
  });
  cm.start();
  const [, claimEvent] = diskObjects('disk-1');
  assert.ok(
    claimEvent?.type === 'ObjectUpserted' && claimEvent.object.kind === 'PersistentVolumeClaim',
  );
  const listed = claimEvent.object;
  assert.equal(listed.metadata.uid, undefined, 'written without a UID');
  cm.inputs.upsertObject(listed);
  const held = cm.world.objects.get('PersistentVolumeClaim/default/claim-disk-1');
  assert.ok(held?.metadata.uid !== undefined, 'the log gave it one');
  // What the controller's inputs compare with the world's when etcd lists it again.
  assert.equal(JSON.stringify(cm.inputs.loggedObject(listed)), JSON.stringify(held));
  cm.stop();
});
