/**
 * docs/reliability.md "Durable points": how many commits (fsyncs) a pod waits for on its
 * way to ready, on a SQLite log at durability full. A pod with a disk and an emptyDir waits
 * for one: when the node attaches, the attach's OperationStarted (its mount intent names
 * the pod, so the mounts wait for no commit of their own); when the controller attaches,
 * the mounts' OperationStarted (the verifies touch nothing and wait for no commit).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { openSqliteLog } from '../../src/agent/sqlite-log.js';
import { RealClock } from '../../src/clock.js';
import { kubeletCore } from '../../src/engine/cores.js';
import { UniquePodName } from '../../src/ids.js';
import type { FakeCallRecord } from '../../src/plugins/fake.js';
import { podWaitStatus } from '../../src/kubelet/queries.js';
import { claim, diskObjects, emptyDir, podUpserted } from '../support/builders.js';
import { controllerAttached, crashEngine } from '../support/durable-child.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-commits-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const sleepMs = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The commits made between each pod's PodUpserted and the fold that says it is ready. */
async function commitsToReady(attachMode: 'node' | 'controller'): Promise<number[]> {
  const clock = new RealClock();
  const journal: FakeCallRecord[] = [];
  // Events nobody waits on stay buffered for a minute, so every commit counted below is one
  // a durable point forced: a lazy commit of 20 ms fell inside a slow pod's wait on CI.
  const log = openSqliteLog(join(dir, `${attachMode}.db`), kubeletCore, {
    durability: 'full',
    blocked: { lazyCommitMs: 60_000 },
  });
  let commits = 0;
  log.sink.onCommitted?.(() => commits++);
  const engine = crashEngine({ sink: log.sink, journal, clock, attachMode });
  engine.start();
  engine.append({ type: 'SourcesReady', tsMs: clock.nowMs() });
  const perPod: number[] = [];
  for (const uid of ['p-0', 'p-1', 'p-2']) {
    for (const event of diskObjects(`disk-${uid}`)) engine.append(event);
    // The disk's events, and what the engine made of them, are committed before the pod.
    for (;;) {
      await sleepMs(20);
      const pending = log.sink.whenDurable?.();
      if (pending === undefined) break;
      await pending;
    }
    const before = commits;
    engine.append(podUpserted(uid, [claim(`disk-${uid}`), emptyDir()]));
    if (attachMode === 'controller') controllerAttached(engine, clock);
    for (let waitedMs = 0; !podWaitStatus(engine.world, UniquePodName(uid)).ready; waitedMs++) {
      assert.ok(waitedMs < 5_000, `${uid} ready within 5 s`);
      await sleepMs(1);
    }
    perPod.push(commits - before);
  }
  await engine.drainAndStop();
  log.sink.close();
  assert.ok(
    journal.some((call) => call.call === 'setUp'),
    'the pods were set up on the pretend host',
  );
  return perPod;
}

test('durable points: a pod waits for one commit when the node attaches (its mounts are intended)', async () => {
  assert.deepEqual(await commitsToReady('node'), [1, 1, 1]);
});

test('durable points: a pod waits for one commit when the controller attaches (verify waits for none)', async () => {
  assert.deepEqual(await commitsToReady('controller'), [1, 1, 1]);
});
