/**
 * docs/csi.md error classes at the gRPC boundary: a scripted driver answers each status code
 * (and a broken connection) to each RPC, and the pair is left in the state docs/csi.md gives —
 * uncertain for the five "may still be in progress" codes and a disconnect, as it was for
 * every other code — then the retry succeeds.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';

const driver = 'fake.csi.example.com';
const volume = `kubernetes.io/csi/${driver}^disk-1`;
const inProgress = [
  'CANCELLED',
  'DEADLINE_EXCEEDED',
  'UNAVAILABLE',
  'RESOURCE_EXHAUSTED',
  'ABORTED',
];
const didNotHappen = [
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'FAILED_PRECONDITION',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'DATA_LOSS',
  'UNAUTHENTICATED',
];

type Fault = { grpc: string } | { disconnect: true };

function scenario(rpc: string, fault: Fault, expectNow: Record<string, unknown>): string {
  return JSON.stringify({
    name: `${rpc} answers ${JSON.stringify(fault)}`,
    controllerAttachDetach: false,
    plugins: [
      {
        name: driver,
        csi: { publishUnpublish: true, stageUnstage: true },
        faults: { [rpc]: [fault] },
      },
    ],
    objects: [
      {
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        metadata: { name: 'pv-1' },
        spec: { accessModes: ['ReadWriteOnce'], csi: { driver, volumeHandle: 'disk-1' } },
      },
      {
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        metadata: { name: 'claim-1', namespace: 'default' },
        spec: { volumeName: 'pv-1' },
      },
    ],
    steps: [
      {
        addPod: {
          metadata: { name: 'a', namespace: 'default', uid: 'uid-a' },
          spec: { volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'claim-1' } }] },
        },
      },
      { expect: expectNow },
      { advance: '2s' },
      { expect: { podReady: 'uid-a', counts: { [driver]: { [rpc]: 2 } } } },
    ],
  });
}

async function run(text: string): Promise<void> {
  const result = await simulate(parseScenario(text));
  assert.deepEqual(result.failures, [], text);
}

const faults: { fault: Fault; uncertain: boolean }[] = [
  ...inProgress.map((code) => ({ fault: { grpc: code }, uncertain: true })),
  ...didNotHappen.map((code) => ({ fault: { grpc: code }, uncertain: false })),
  { fault: { disconnect: true }, uncertain: true },
];

test('ControllerPublishVolume: in progress → attachUncertain; did not happen → detached', async () => {
  for (const { fault, uncertain } of faults) {
    const state = uncertain ? 'attachUncertain' : 'detached';
    await run(scenario('ControllerPublishVolume', fault, { attachments: { [volume]: state } }));
  }
});

test('NodeStageVolume: in progress → deviceUncertain; did not happen → deviceUnmounted', async () => {
  for (const { fault, uncertain } of faults) {
    const state = uncertain ? 'attached.deviceUncertain' : 'attached.deviceUnmounted';
    await run(scenario('NodeStageVolume', fault, { attachments: { [volume]: state } }));
  }
});

test('NodePublishVolume: in progress → mountUncertain; did not happen → unmounted', async () => {
  for (const { fault, uncertain } of faults) {
    const state = uncertain ? 'mountUncertain' : 'unmounted';
    await run(scenario('NodePublishVolume', fault, { mounts: { 'uid-a/data': state } }));
  }
});

test('an RPC the capabilities rule out is never called', async () => {
  const text = scenario('NodePublishVolume', { grpc: 'INTERNAL' }, {}).replace(
    '"publishUnpublish":true,"stageUnstage":true',
    '"publishUnpublish":false,"stageUnstage":false',
  );
  const result = await simulate(parseScenario(text));
  assert.deepEqual(Object.keys(result.counts[driver] ?? {}), ['NodePublishVolume']);
  assert.deepEqual(result.failures, []);
});
