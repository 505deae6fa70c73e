/**
 * The orphan pass (src/agent/orphans.ts) runs while the reconciler does: what the log comes
 * to know during the pass is no orphan. It reads the world again before it touches each one;
 * a loop device attached for a pod whose claim was bound during the pass was once detached
 * under the pod's mkfs ("Device size reported to be zero").
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { NewEvent, VoleEvent } from '../../src/events/index.js';
import { cleanUpOrphans, type OrphanReport } from '../../src/agent/orphans.js';
import { fold, initialWorld } from '../../src/kubelet/index.js';
import type { World } from '../../src/kubelet/types.js';
import { emptyDir, engineStarted, podUpserted, sourcesReady } from '../support/builders.js';

const base = mkdtempSync(join(tmpdir(), 'vole-orphans-'));
after(() => rmSync(base, { recursive: true, force: true }));

function worldOf(events: readonly NewEvent[]): World {
  return events.map((e, i) => ({ ...e, seq: i + 1 }) as VoleEvent).reduce(fold, initialWorld());
}

/** A root holding one pod volume directory of pod `uid`, which no log names yet. */
function rootWithPodVolume(name: string, uid: string): { root: string; dir: string } {
  const root = join(base, name);
  const dir = join(root, 'pods', uid, 'volumes', 'kubernetes.io~empty-dir', 'scratch');
  mkdirSync(dir, { recursive: true });
  return { root, dir };
}

const unknown = worldOf([engineStarted(), sourcesReady]);
const knowing = worldOf([engineStarted(), sourcesReady, podUpserted('uid-b', [emptyDir()])]);

test('orphans: a pod volume the log never names is recorded, then removed', async () => {
  const { root, dir } = rootWithPodVolume('never', 'uid-b');
  const reports: OrphanReport[] = [];
  const result = await cleanUpOrphans({
    root,
    world: () => unknown,
    record: async (report) => void reports.push(report),
  });
  assert.equal(result.found.length, 1);
  assert.deepEqual(result.left, []);
  assert.deepEqual(
    reports.map((r) => r.reason),
    ['OrphanFound', 'OrphanRemoved'],
  );
  assert.equal(existsSync(dir), false);
});

test('orphans: a pod the log comes to know during the pass is left to the reconciler', async () => {
  const { root, dir } = rootWithPodVolume('learnt', 'uid-b');
  const reports: OrphanReport[] = [];
  let looks = 0;
  const result = await cleanUpOrphans({
    root,
    // The first look (the scan) knows nothing; the pod arrives before the clean-up.
    world: () => (looks++ === 0 ? unknown : knowing),
    record: async (report) => void reports.push(report),
  });
  assert.equal(result.found.length, 1, 'found at the scan');
  assert.equal(result.left.length, 1, 'but not touched');
  assert.deepEqual(
    reports.map((r) => r.reason),
    ['OrphanFound', 'OrphanLeft'],
  );
  assert.match(reports[1]!.message, /the log came to know it during the pass/);
  assert.equal(existsSync(dir), true, 'the directory of a known pod stays');
});
