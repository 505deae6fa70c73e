/**
 * One engine, two cores: the mode in EngineStarted picks the core for every reader; the
 * planner decides a mount's steps and `vole verify` compares whole decisions; a mode this
 * version does not know is refused.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { coreOfLog, coreOfMode, UnknownModeError } from '../../src/engine/cores.js';
import { MemorySink } from '../../src/engine/sink.js';
import type { EventOf, VoleEvent } from '../../src/events/index.js';
import { history, logWorld, replayInto, verify } from '../../src/postmortem/index.js';
import { stringify } from 'yaml';
import { generateScenario } from '../../src/sim/chaos.js';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';

const dir = join(import.meta.dirname, '../scenarios');

async function logOf(file: string): Promise<VoleEvent[]> {
  const sink = new MemorySink();
  const scenario = parseScenario(readFileSync(join(dir, file), 'utf8'), file);
  await simulate(scenario, { log: { sink, readAll: () => sink.events } });
  return sink.events;
}

const starts = (events: VoleEvent[]) =>
  events.filter((e): e is EventOf<'OperationStarted'> => e.type === 'OperationStarted');

test('engine: every scenario log, kubelet and controller, passes verify with its own core', async () => {
  const files = readdirSync(dir).filter((f) => f.endsWith('.yaml'));
  const modeOf = (file: string) => parseScenario(readFileSync(join(dir, file), 'utf8'), file).mode;
  const controller = files.filter((f) => modeOf(f) === 'controller');
  assert.ok(controller.length >= 9, 'the controller scenarios were found');
  for (const file of files) {
    const events = await logOf(file);
    const report = verify(events);
    assert.deepEqual(report.divergences, [], file);
    assert.equal(report.mode, modeOf(file), file);
    if (starts(events).length > 0) assert.ok(report.decisions > 0, file);
  }
});

test('engine: logs of chaos runs (faults, hangs, restarts) verify with 0 divergences', async () => {
  for (let seed = 1; seed <= 12; seed++) {
    const scenario = parseScenario(stringify(generateScenario(seed).document), `seed ${seed}`);
    const sink = new MemorySink();
    await simulate(scenario, { log: { sink, readAll: () => sink.events } });
    const report = verify(sink.events);
    assert.deepEqual(report.divergences, [], `chaos seed ${seed}`);
  }
});

test("engine: the planner decides a mount's steps; the device is mounted once for two pods", async () => {
  const events = await logOf('shared-volume-two-pods.yaml');
  const mounts = starts(events).filter((e) => e.op === 'mount');
  assert.deepEqual(
    mounts.map((e) => [e.pod, e.steps]),
    [
      ['uid-a', ['waitForAttach', 'mountDevice', 'setUp']],
      ['uid-b', ['waitForAttach', 'setUp']],
    ],
  );
  const block = starts(await logOf('block-map-unmap.yaml'));
  assert.deepEqual(block.find((e) => e.op === 'mount')?.steps, [
    'waitForAttach',
    'setUpDevice',
    'map',
  ]);
  assert.deepEqual(block.find((e) => e.op === 'unmount')?.steps, ['unmap']);
});

test('engine: verify catches a tampered step of a mount decision', async () => {
  const events = await logOf('shared-volume-two-pods.yaml');
  const second = starts(events).filter((e) => e.op === 'mount')[1]!;
  const tampered = events.map((e) =>
    e === second ? { ...second, steps: ['waitForAttach', 'mountDevice', 'setUp'] } : e,
  ) as VoleEvent[];
  const report = verify(tampered);
  assert.equal(report.ok, false);
  assert.equal(report.divergences[0]!.seq, second.seq);
  assert.equal(report.divergences[0]!.kind, 'decision');
  assert.match(
    report.divergences[0]!.message,
    /started mount fake\.disk\/disk-1 for pod uid-b with .*steps \[waitForAttach mountDevice setUp\].*; this version would start it with .*steps \[waitForAttach setUp\]/,
  );
});

test('engine: verify catches a tampered controller decision (a forced detach made safe)', async () => {
  const events = await logOf('controller-force-detach.yaml');
  const detach = starts(events).find((e) => e.op === 'detach')!;
  assert.equal(detach.forced, 'timeout');
  assert.equal(detach.verifySafeToDetach, false);
  const { forced: _forced, ...safe } = detach;
  const tampered = events.map((e) =>
    e === detach ? { ...safe, verifySafeToDetach: true } : e,
  ) as VoleEvent[];
  const report = verify(tampered);
  assert.equal(report.ok, false);
  assert.equal(report.divergences[0]!.seq, detach.seq);
  assert.match(
    report.divergences[0]!.message,
    /the log started detach fake\.disk\/disk-1@node-1 with .*verifySafeToDetach true.*; this version would start it with .*verifySafeToDetach false, forced timeout/,
  );
  // A detach on a node it was never attached to is no decision this version makes.
  const elsewhere = events.map((e) =>
    e === detach ? { ...detach, node: 'node-9' } : e,
  ) as VoleEvent[];
  assert.match(
    verify(elsewhere).divergences[0]!.message,
    /started detach fake\.disk\/disk-1@node-9; this version would start detach fake\.disk\/disk-1@node-1/,
  );
});

test("engine: a controller log replays into the controller's world, not a kubelet's", async () => {
  const events = await logOf('controller-multi-attach.yaml');
  const logCore = coreOfLog(events);
  assert.equal(logCore.mode, 'controller');
  const view = replayInto(logWorld(logCore), events).describe();
  assert.equal(view.mode, 'controller');
  assert.deepEqual(
    view.attachments.map((a) => `${a.volume}@${a.node} ${a.state}`),
    ['fake.disk/disk-1@node-2 attached.deviceUnmounted'],
  );
  assert.deepEqual(
    (view.nodes ?? []).map((n) => [n.node, n.volumesAttached.map((v) => v.name)]),
    [
      ['node-1', []],
      ['node-2', ['fake.disk/disk-1']],
    ],
  );
  const moves = [...history(events, { volume: 'fake.disk/disk-1' })].map(
    (t) => `${t.node} ${t.from}→${t.to}`,
  );
  assert.deepEqual(moves.slice(-2), [
    'node-2 detached→attaching',
    'node-2 attaching→attached.deviceUnmounted',
  ]);
  assert.ok(moves.includes('node-1 detaching→detached'));
});

test('engine: a log whose mode this version does not know is refused, saying so', async () => {
  assert.equal(coreOfMode(undefined).mode, 'kubelet');
  assert.throws(() => coreOfMode('scheduler'), UnknownModeError);
  const events = await logOf('kubelet-attach-mount.yaml');
  const first = events[0]!;
  assert.equal(first.type, 'EngineStarted');
  const foreign = [{ ...first, mode: 'scheduler' } as VoleEvent, ...events.slice(1)];
  assert.throws(
    () => verify(foreign),
    /written in mode "scheduler", which this version of vole does not know \(it reads kubelet, controller and recorded logs\)/,
  );
  assert.throws(() => [...history(foreign)], UnknownModeError);
});
