import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { parseScenario, ScenarioFormatError } from '../../src/sim/scenario.js';

test('scenario parser: any text is a scenario or a ScenarioFormatError, never a crash', () => {
  fc.assert(
    fc.property(fc.string({ maxLength: 400 }), (text) => {
      try {
        parseScenario(text);
      } catch (error) {
        assert.ok(error instanceof ScenarioFormatError, String(error));
      }
    }),
    { numRuns: 500 },
  );
});

test('scenario parser: any JSON value is a scenario or an error naming a field', () => {
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 4 }), (value) => {
      try {
        parseScenario(JSON.stringify(value));
      } catch (error) {
        assert.ok(error instanceof ScenarioFormatError, String(error));
        assert.match((error as Error).message, /invalid scenario|not valid YAML/);
      }
    }),
    { numRuns: 500 },
  );
});

test('scenario parser: steps with random keys are refused with the list of step kinds', () => {
  fc.assert(
    fc.property(
      fc
        .string({ minLength: 1, maxLength: 12 })
        .filter(
          (k) =>
            ![
              'addPod',
              'updatePod',
              'removePod',
              'advance',
              'addObject',
              'updateObject',
              'removeObject',
              'reportInUse',
              'controllerAttach',
              'restart',
              'waitForPod',
              'expect',
              'nodeStatus',
              'nodeReady',
              'taint',
              'untaint',
              'removeNode',
              '__proto__',
              'constructor',
              'toString',
              'valueOf',
              'hasOwnProperty',
            ].includes(k),
        ),
      (key) => {
        assert.throws(
          () => parseScenario(stringify({ name: 'x', steps: [{ [key]: 1 }] })),
          /steps\.0: a step is one of addPod/,
        );
      },
    ),
    { numRuns: 200 },
  );
});

test('scenario parser: durations, fault forms and unknown keys', () => {
  const s = parseScenario(
    stringify({
      name: 'forms',
      plugins: [
        {
          name: 'fake.disk',
          attachable: true,
          faults: {
            attach: [
              'transient',
              { delay: '1m30s' },
              { hang: true },
              { outcome: 'final', times: 3 },
              { outcome: 'uncertain', always: true },
            ],
          },
        },
      ],
      steps: [{ advance: '2m' }, { advance: '500ms' }],
    }),
  );
  assert.deepEqual(s.steps, [{ advance: 120_000 }, { advance: 500 }]);
  assert.deepEqual(s.plugins[0]!.faults!.attach, [
    { outcome: 'transient', delayMs: 0, times: 1 },
    { outcome: 'ok', delayMs: 90_000, times: 1 },
    { outcome: 'hang', delayMs: 0, times: 1 },
    { outcome: 'final', delayMs: 0, times: 3 },
    { outcome: 'uncertain', delayMs: 0, times: Infinity },
  ]);
  assert.throws(() => parseScenario('name: x\nbogus: 1\n'), /\(file\): unknown key\(s\) "bogus"/);
  assert.throws(
    () => parseScenario('name: x\nsteps: [{advance: 5 parsecs}]\n'),
    /steps\.0\.advance: bad duration "5 parsecs"/,
  );
  assert.throws(
    () => parseScenario('name: x\nplugins: [{name: p, attachable: "yes"}]\n'),
    /plugins\.0\.attachable/,
  );
});

test('scenario parser: a csi: plugin is a scripted CSI driver with RPC-named faults', () => {
  const s = parseScenario(
    'name: x\nplugins: [{name: d, csi: {stageUnstage: true, maxVolumesPerNode: 2},\n' +
      '  faults: {NodeStageVolume: [{grpc: DEADLINE_EXCEEDED}, {disconnect: true}, ok, {hang: true}]}}]\nsteps: [{advance: 1s}]\n',
  );
  const entry = s.plugins[0]!;
  assert.ok('csi' in entry);
  assert.deepEqual(entry.csi, { stageUnstage: true, maxVolumesPerNode: 2 });
  assert.deepEqual(entry.faults!.NodeStageVolume, [
    { outcome: 'grpc', code: 'DEADLINE_EXCEEDED', delayMs: 0, times: 1 },
    { outcome: 'disconnect', delayMs: 0, times: 1 },
    { outcome: 'ok', delayMs: 0, times: 1 },
    { outcome: 'hang', delayMs: 0, times: 1 },
  ]);
  assert.throws(
    () =>
      parseScenario(
        'name: x\nplugins: [{name: d, csi: {}, faults: {NodeStageVolume: [{grpc: NOPE}]}}]\nsteps: [{advance: 1s}]\n',
      ),
    /plugins\.0\.faults\.NodeStageVolume\.0/,
  );
  assert.throws(
    () =>
      parseScenario(
        'name: x\nplugins: [{name: d, csi: {}, faults: {setUp: [ok]}}]\nsteps: [{advance: 1s}]\n',
      ),
    /plugins\.0\.faults/,
  );
  assert.throws(
    () =>
      parseScenario(
        'name: x\nplugins: [{name: d, csi: {}, attachable: true}]\nsteps: [{advance: 1s}]\n',
      ),
    /plugins\.0: unknown key\(s\) "attachable"/,
  );
});

test('scenario parser: a pod without metadata.uid is refused, naming the field (not a crash)', () => {
  const text = [
    'name: x',
    'steps:',
    '  - addPod: {metadata: {name: a, namespace: default}, spec: {volumes: []}}',
  ].join('\n');
  assert.throws(
    () => parseScenario(text),
    (e: unknown) =>
      e instanceof ScenarioFormatError &&
      /steps\.0\.addPod\.metadata\.uid: metadata\.uid is required/.test(e.message),
  );
});
