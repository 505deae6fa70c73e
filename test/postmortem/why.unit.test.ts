/**
 * `vole why`: for each of a pod's volumes, the step it waits on, its last error, its next
 * retry and the event that caused the wait — from the folded world, the CLI, and the
 * error of waitForAttachAndMount.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { VolumeManager, WaitForAttachAndMountError } from '../../src/agent/volume-manager.js';
import { openSimulationLog } from '../../src/cli/sqlite-sink.js';
import { VirtualClock } from '../../src/clock.js';
import { FakePlugin } from '../../src/plugins/fake.js';
import { caps } from '../../src/plugins/types.js';
import { why } from '../../src/postmortem/index.js';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';
import { foldAll } from '../../src/kubelet/index.js';
import { claim, diskObjects, pod } from '../support/builders.js';
import { vole } from '../support/agent-process.js';
import type { VoleEvent } from '../../src/events/index.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-why-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const db = join(dir, 'why.db');

async function failingLog(): Promise<VoleEvent[]> {
  const text = readFileSync(join(import.meta.dirname, 'why-setup-keeps-failing.yaml'), 'utf8');
  const log = openSimulationLog(db, 'kubelet');
  await simulate(parseScenario(text, 'why'), { log });
  const events = [...log.readAll()];
  log.sink.close();
  return events;
}

test('why: the failing step, its error, its next retry and the CallFailed that caused it', async () => {
  const events = await failingLog();
  const world = foldAll(events);
  const answer = why(world, 'default/web');
  assert.ok(answer !== undefined);
  assert.equal(answer.kind, 'pod');
  const data = answer.volumes.find((v) => v.outerVolumeSpecName === 'data')!;
  assert.equal(data.status, 'waiting');
  assert.equal(data.step, 'setUp');
  assert.match(data.lastError?.message ?? '', /scripted final failure/);
  const cause = events[data.causeSeq - 1]!;
  assert.equal(cause.type, 'CallFailed');
  assert.equal(cause.type === 'CallFailed' && cause.call, 'setUp');
  // Three failures: backoff 500 ms, 1 s, 2 s; the next retry is 2 s after the last one.
  assert.equal(data.nextRetryAtMs, data.lastError!.tsMs + 2_000);
  assert.equal(answer.volumes.find((v) => v.outerVolumeSpecName === 'scratch')?.status, 'mounted');
  // The same answer by UID, by name, and by volume.
  assert.deepEqual(why(world, 'uid-web'), answer);
  assert.deepEqual(why(world, 'web'), answer);
  assert.equal(why(world, 'fake.disk/disk-1')?.volumes[0]?.step, 'setUp');
  assert.equal(why(world, 'nobody'), undefined);
  // Earlier, while the disk was still attaching, it waited on attach.
  const early = why(
    foldAll(
      events.slice(
        0,
        events.findIndex((e) => e.type === 'CallStarted'),
      ),
    ),
    'web',
  );
  assert.equal(early?.volumes.find((v) => v.outerVolumeSpecName === 'data')?.step, 'attach');
});

test('vole why --db names the failing step and error; an unknown name exits 2', () => {
  const out = vole('why', 'default/web', '--db', db);
  assert.equal(out.status, 0, out.stderr);
  assert.match(
    out.stdout,
    /^pod default\/web \(uid-web\) at seq \d+: 1 of 2 volume\(s\) not ready$/m,
  );
  assert.match(out.stdout, /data \(fake\.disk\/disk-1\): waits on setUp since seq \d+/);
  assert.match(
    out.stdout,
    /last error at seq \d+ \(\+1\.500s\): MountVolume\.SetUp failed: .*scripted final failure/,
  );
  assert.match(out.stdout, /next retry at \+3\.500s/);
  assert.match(out.stdout, /caused by seq \d+: setUp failed, final/);
  const earlier = vole('why', 'web', '--db', db, '--at', '+0s', '--json');
  assert.equal(earlier.status, 0, earlier.stderr);
  assert.equal(JSON.parse(earlier.stdout).kind, 'pod');
  const unknown = vole('why', 'nobody', '--db', db);
  assert.equal(unknown.status, 2);
  assert.match(unknown.stderr, /no pod, claim or volume "nobody".*vole status/);
});

test("waitForAttachAndMount's timeout error carries the same text", async () => {
  const clock = new VirtualClock(0);
  const disk = new FakePlugin({
    caps: caps('fake.disk', { attachable: true }),
    clock,
    journal: [],
    faults: { setUp: [{ outcome: 'final', delayMs: 0, times: Infinity }] },
  });
  const vm = VolumeManager.create({
    node: 'node-1',
    plugins: [disk],
    clock,
    controllerAttachDetach: false,
  });
  vm.start();
  for (const e of diskObjects('disk-1'))
    if (e.type === 'ObjectUpserted') vm.inputs.upsertObject(e.object);
  vm.inputs.markSourcesReady();
  vm.inputs.addPod(pod('uid-a', [claim('disk-1')]));
  const settled = vm.waitForAttachAndMount('uid-a', { timeoutMs: 5_000 }).then(
    () => null,
    (e: unknown) => e,
  );
  const turns = async () => {
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  };
  await turns();
  while (clock.fireNext(6_000)) await turns();
  const error = await settled;
  assert.ok(error instanceof WaitForAttachAndMountError);
  const [kubelet, ...explained] = error.message.split('\n');
  assert.match(kubelet!, /unmounted volumes=\[data\].*timed out waiting for the condition/);
  assert.match(
    explained[0]!,
    /^pod default\/.* \(uid-a\) at seq \d+: 1 of 1 volume\(s\) not ready$/,
  );
  assert.match(explained[1]!, /^  data \(fake\.disk\/disk-1\): waits on setUp since seq \d+/);
  assert.match(
    explained[2]!,
    /^    last error at seq \d+ \(\+\d+\.\d{3}s\): MountVolume\.SetUp failed/,
  );
  assert.match(explained.join('\n'), /next retry at \+\d+\.\d{3}s\n    caused by seq \d+$/);
  vm.stop();
});

test("the inspector's pair view carries the same answer", async () => {
  const { Tracker } = await import('../../src/inspect/api.js');
  const { openReadonly } = await import('../../src/postmortem/open.js');
  const store = openReadonly(db);
  try {
    const tracker = new Tracker(store);
    const payload = tracker.worldAt(tracker.head);
    const mount = payload.pairs.find((p) => p.kind === 'mount' && p.volume === 'fake.disk/disk-1');
    assert.ok(mount !== undefined, JSON.stringify(payload.pairs.map((p) => p.id)));
    assert.match(mount.why ?? '', /^data \(fake\.disk\/disk-1\): waits on setUp since seq \d+/);
    assert.match(mount.why ?? '', /last error at seq \d+ \(\+1\.500s\): MountVolume\.SetUp failed/);
    const attachment = payload.pairs.find(
      (p) => p.kind === 'attachment' && p.volume === 'fake.disk/disk-1',
    );
    assert.match(
      attachment?.why ?? '',
      /^volume fake\.disk\/disk-1 at seq \d+\n  pod uid-web: data/,
    );
    // An earlier moment is replayed: the answer is the one of that moment.
    const early = tracker.worldAt(3).pairs.find((p) => p.volume === 'fake.disk/disk-1');
    assert.ok(early === undefined || !/waits on setUp/.test(early.why ?? ''));
  } finally {
    store.close();
  }
});
