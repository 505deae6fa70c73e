/**
 * `state.pvs` and the `pvs` expectation read the same in both modes: `vole simulate --json`
 * of a controller-mode scenario lists the PersistentVolumes as a node agent's does, and a
 * controller-mode `pvs` expectation holds or fails on them.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

const root = join(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'vole-pvs-modes-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A claim that binds the smaller of two PVs, in either mode, and a `pvs` expectation. */
function scenario(mode: 'controller' | 'kubelet', pvs: string): string {
  const head =
    mode === 'controller'
      ? 'mode: controller\nnodes: [node-1]\n'
      : 'controllerAttachDetach: false\n';
  return `name: PVs in ${mode} mode
${head}plugins:
  - {name: fake.disk, attachable: true}
objects:
  - {kind: PersistentVolume, metadata: {name: pv-big}, spec: {storageClassName: manual, capacity: {storage: 10Gi}, accessModes: [ReadWriteOnce], persistentVolumeReclaimPolicy: Delete, csi: {driver: fake.disk, volumeHandle: big}}}
  - {kind: PersistentVolume, metadata: {name: pv-fit}, spec: {storageClassName: manual, capacity: {storage: 4Gi}, accessModes: [ReadWriteOnce], csi: {driver: fake.disk, volumeHandle: fit}}}
  - {kind: PersistentVolumeClaim, metadata: {name: claim-1, namespace: default}, spec: {storageClassName: manual, accessModes: [ReadWriteOnce], resources: {requests: {storage: 3Gi}}}}
steps:
  - advance: 1s
  - expect: {bindings: {default/claim-1: pv-fit}, pvs: ${pvs}}
`;
}

function simulateJson(name: string, text: string) {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, text);
  const r = spawnSync(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', 'simulate', file, '--json'],
    { cwd: root, encoding: 'utf8' },
  );
  assert.ok(r.stdout.startsWith('{'), `vole simulate printed JSON: ${r.stderr}${r.stdout}`);
  return { status: r.status, result: JSON.parse(r.stdout) as SimulateJson };
}

interface SimulateJson {
  readonly ok: boolean;
  readonly failures: { key: string; expected: unknown; actual: unknown }[];
  readonly state: { pvs?: Record<string, unknown>[] };
}

const holds = '{pv-fit: {phase: Bound, claim: default/claim-1}, pv-big: Available, pv-none: null}';

test('vole simulate --json: controller mode has state.pvs, the same as kubelet mode', () => {
  const controller = simulateJson('controller', scenario('controller', holds));
  const kubelet = simulateJson('kubelet', scenario('kubelet', holds));
  assert.equal(kubelet.status, 0, JSON.stringify(kubelet.result.failures));
  assert.equal(controller.status, 0, JSON.stringify(controller.result.failures));
  assert.deepEqual(controller.result.state.pvs, [
    {
      name: 'pv-big',
      phase: 'Available',
      claim: null,
      volumeHandle: 'big',
      capacityBytes: 10 * 1024 ** 3,
      reclaimPolicy: 'Delete',
      zone: null,
    },
    {
      name: 'pv-fit',
      phase: 'Bound',
      claim: 'default/claim-1',
      volumeHandle: 'fit',
      capacityBytes: 4 * 1024 ** 3,
      reclaimPolicy: 'Retain',
      zone: null,
    },
  ]);
  assert.deepEqual(controller.result.state.pvs, kubelet.result.state.pvs);
});

test('vole simulate: a controller-mode pvs expectation that does not hold fails the run', () => {
  const wrong = '{pv-fit: Available, pv-big: {capacityBytes: 1}}';
  const { status, result } = simulateJson('controller-wrong', scenario('controller', wrong));
  assert.equal(status, 1);
  assert.equal(result.ok, false);
  assert.deepEqual(
    result.failures.map((f) => [f.key, f.expected, f.actual]),
    [
      ['pvs.pv-fit', 'Available', 'Bound'],
      ['pvs.pv-big.capacityBytes', 1, 10 * 1024 ** 3],
    ],
  );
});
