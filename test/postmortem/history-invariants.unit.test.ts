/**
 * The history checker the fault suites run over their logs (test/support/history-invariants.ts):
 * it finds a mount left for a removed pod, and an event a replica wrote after another one
 * started its engine; a sound history passes, its checks counted.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { eventCodec, type NewEvent } from '../../src/events/index.js';
import { openLog } from '../../src/log/store.js';
import {
  claim,
  controllerStarted,
  diskObjects,
  engineStarted,
  operation,
  podUpserted,
  sourcesReady,
} from '../support/builders.js';
import { checkHistory } from '../support/history-invariants.js';

const dir = mkdtempSync(join(tmpdir(), 'history-invariants-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A log file of `events` (seqs from 1): its path. */
function log(name: string, events: readonly NewEvent[]): string {
  const path = join(dir, `${name}.db`);
  const store = openLog(path, { codec: eventCodec, mode: 'create', durability: 'normal' });
  store.append(events, { expectedSeq: 0 });
  store.close();
  return path;
}

const volume = 'fake.disk/d1';
const removed: NewEvent = { type: 'PodRemoved', tsMs: 0, uid: 'u1' };

/** Attached, then mounted into pod u1 (the first event is seq 6). */
const mountedIntoU1: NewEvent[] = [
  engineStarted(),
  sourcesReady,
  ...diskObjects('d1'),
  podUpserted('u1', [claim('d1')]),
  ...operation(6, { op: 'attach', volume }, [{ call: 'attach', devicePath: '/dev/d1' }]),
  ...operation(10, { op: 'mount', volume, pod: 'u1' }, [
    { call: 'waitForAttach', devicePath: '/dev/d1' },
    { call: 'mountDevice', deviceMountPath: '/g/d1' },
    { call: 'setUp' },
  ]),
];

test('a removed pod whose mount stays is a leaked mount', () => {
  const leaked = log('leaked', [...mountedIntoU1, removed]);
  const check = checkHistory({ agentLogs: [leaked], controllerLogs: [] });
  assert.equal(check.violations.length, 1, check.violations.join('\n'));
  assert.match(check.violations[0]!, /mount leaked: fake\.disk\/d1 of removed pod u1 is mounted/);
});

test('a removed pod torn down leaves nothing to report', () => {
  const torn = log('torn', [
    ...mountedIntoU1,
    removed,
    ...operation(mountedIntoU1.length + 2, { op: 'unmount', volume, pod: 'u1' }, [
      { call: 'tearDown' },
    ]),
  ]);
  const check = checkHistory({ agentLogs: [torn], controllerLogs: [] });
  assert.deepEqual(check.violations, []);
  assert.equal(check.checked, 1, 'the one removed pod');
});

test('a replica that writes after another one started its engine was deposed and wrote', () => {
  const at = (tsMs: number, e: NewEvent): NewEvent => ({ ...e, tsMs });
  const first = log('replica-a', [at(1_000, controllerStarted), at(1_100, sourcesReady)]);
  const second = log('replica-b', [at(2_000, controllerStarted), at(2_100, sourcesReady)]);
  const sound = checkHistory({ agentLogs: [], controllerLogs: [first, second] });
  assert.deepEqual(sound.violations, []);
  assert.equal(sound.checked, 8, 'each event of each log, folded and placed in time');

  const late = log('replica-a-late', [
    at(1_000, controllerStarted),
    at(1_100, sourcesReady),
    at(3_000, sourcesReady),
  ]);
  const deposed = checkHistory({ agentLogs: [], controllerLogs: [late, second] });
  assert.equal(deposed.violations.length, 1, deposed.violations.join('\n'));
  assert.match(
    deposed.violations[0]!,
    /replica-a-late\.db: SourcesReady at seq 3 .* written while .*replica-b\.db led/,
  );
});

test('an agent log that is not there is reported, not passed over', () => {
  const check = checkHistory({ agentLogs: [join(dir, 'none.db')], controllerLogs: [] });
  assert.equal(check.violations.length, 1);
  assert.match(check.violations[0]!, /none\.db: no agent log there/);
});
