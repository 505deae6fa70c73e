/**
 * Dynamic provisioning beyond what a scenario's expectations say: every decision of every
 * provisioning scenario is re-planned by `vole verify`; a pod's wait and `vole why` name a
 * claim waiting for provisioning, its last error and next retry; a PV's node affinity
 * names the conflict; StorageClasses are validated as the API server does; the class
 * parameters lose the provisioner's own keys; static binding tries the fewest access
 * modes first.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { MemorySink } from '../../src/engine/sink.js';
import type {
  PersistentVolume,
  PersistentVolumeClaim,
  StorageClass,
} from '../../src/events/k8s.js';
import { verify, why, whyText } from '../../src/postmortem/index.js';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';
import { validate } from '../../src/sources/validate.js';
import { findVolumeForClaim } from '../../src/binding/claims.js';
import { foldAll } from '../../src/kubelet/index.js';
import { classParameters } from '../../src/binding/storage-class.js';

const dir = join(import.meta.dirname, '..', 'scenarios');
const provisioning = readdirSync(dir)
  .filter((f) => f.startsWith('provision-'))
  .sort();

async function run(text: string, name: string) {
  const sink = new MemorySink();
  const result = await simulate(parseScenario(text, name), {
    log: { sink, readAll: () => sink.events },
  });
  return { result, events: sink.events };
}

test('provisioning: the scenarios exist', () => {
  assert.ok(provisioning.length >= 12, provisioning.join(' '));
});

for (const file of provisioning) {
  test(`provisioning: vole verify re-plans every decision of ${file}`, async () => {
    const { result, events } = await run(readFileSync(join(dir, file), 'utf8'), file);
    assert.deepEqual(result.failures, []);
    const report = verify(events);
    assert.deepEqual(report.divergences, [], file);
    assert.ok(report.decisions > 0);
    assert.ok(
      events.some((e) => e.type === 'OperationStarted' && e.op === 'provision') ||
        file.includes('affinity'),
    );
  });
}

const waitingScenario = `
name: a pod waits for its claim's provisioning
controllerAttachDetach: false
plugins:
  - name: fake.csi.example.com
    csi: {createDelete: true}
    faults: {CreateVolume: [{grpc: RESOURCE_EXHAUSTED, always: true}]}
objects:
  - {kind: StorageClass, metadata: {name: fast}, provisioner: fake.csi.example.com}
  - {kind: PersistentVolumeClaim, metadata: {name: data, namespace: default, uid: c-1}, spec: {storageClassName: fast, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}
steps:
  - addPod: {metadata: {name: web, namespace: default, uid: uid-web}, spec: {volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]}}
  - advance: 1s
  - waitForPod: {pod: uid-web, timeout: 2s}
`;

test('provisioning: the pod waits, and vole why names the claim, its last error and next retry', async () => {
  const { result, events } = await run(
    waitingScenario.replace(
      '[{grpc: RESOURCE_EXHAUSTED, always: true}]',
      '[{grpc: RESOURCE_EXHAUSTED}, {grpc: RESOURCE_EXHAUSTED}, {grpc: RESOURCE_EXHAUSTED}]',
    ),
    'waiting',
  );
  const wait = result.waits[0]!;
  assert.equal(wait.ok, false);
  assert.match(
    wait.error ?? '',
    /waiting for a volume to be created by provisioner "fake\.csi\.example\.com" \(StorageClass "fast"\)/,
  );
  const world = foldAll(events.filter((e) => e.tsMs <= 1000));
  const answer = why(world, 'default/web');
  assert.ok(answer !== undefined);
  const entry = answer.volumes[0]!;
  assert.equal(entry.step, 'CreateVolume');
  assert.equal(entry.volume, 'kubernetes.io/csi/fake.csi.example.com^pvc-c-1');
  assert.match(entry.lastError?.message ?? '', /RESOURCE_EXHAUSTED/);
  assert.equal(entry.nextRetryAtMs, 1500); // failures at 0 and 0.5 s: the next after 1 s
  const text = whyText(answer);
  assert.match(text, /claim default\/data Provisioning/);
  assert.match(text, /next retry at \+1\.500s/);
  const byClaim = why(world, 'PersistentVolumeClaim/default/data');
  assert.equal(byClaim?.kind, 'claim');
  assert.equal(byClaim?.volumes[0]?.step, 'CreateVolume');
});

test('provisioning: a PV whose node affinity excludes the node names the conflict', async () => {
  const file = 'provision-node-affinity-conflict.yaml';
  const { result } = await run(readFileSync(join(dir, file), 'utf8'), file);
  assert.match(
    result.waits[0]?.error ?? '',
    /volume node affinity conflict: PersistentVolume "pv-z2" .*topology\.example\.com\/zone In \[z2\]/,
  );
});

const sc = (extra: object): StorageClass =>
  ({
    kind: 'StorageClass',
    metadata: { name: 'fast' },
    provisioner: 'd.example.com',
    ...extra,
  }) as StorageClass;

test('StorageClass: validated as the API server does', () => {
  const fields = (object: object) => validate(object).map((e) => e.field);
  assert.deepEqual(fields(sc({})), []);
  assert.deepEqual(fields({ ...sc({}), provisioner: undefined }), ['provisioner']);
  assert.deepEqual(fields(sc({ reclaimPolicy: 'Recycle' })), ['reclaimPolicy']);
  assert.deepEqual(fields(sc({ volumeBindingMode: 'Later' })), ['volumeBindingMode']);
  assert.deepEqual(fields(sc({ parameters: { a: 1 } })), ['parameters[a]']);
});

test("StorageClass: the provisioner's own keys are taken out; an unknown one is named", () => {
  const ok = classParameters(
    sc({
      parameters: {
        type: 'ssd',
        'csi.storage.k8s.io/fstype': 'xfs',
        'csi.storage.k8s.io/provisioner-secret-name': 's',
      },
    }),
  );
  assert.deepEqual(ok, { ok: true, parameters: { type: 'ssd' }, fsType: 'xfs' });
  const bad = classParameters(sc({ parameters: { 'csi.storage.k8s.io/fs-type': 'xfs' } }));
  assert.equal(bad.ok, false);
  assert.match(bad.ok ? '' : bad.error, /"csi\.storage\.k8s\.io\/fs-type"/);
});

test('binding: the PVs with the fewest access modes first, then the smallest (findByClaim)', () => {
  const pv = (name: string, modes: string[], storage: string): PersistentVolume => ({
    kind: 'PersistentVolume',
    metadata: { name },
    spec: { accessModes: modes, capacity: { storage }, hostPath: { path: `/${name}` } },
  });
  const objects = new Map([
    ['PersistentVolume//two-small', pv('two-small', ['ReadWriteOnce', 'ReadOnlyMany'], '1Gi')],
    ['PersistentVolume//one-big', pv('one-big', ['ReadWriteOnce'], '10Gi')],
    ['PersistentVolume//one-mid', pv('one-mid', ['ReadWriteOnce'], '5Gi')],
  ]);
  const claim: PersistentVolumeClaim = {
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'c', namespace: 'default' },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
  };
  const verdict = findVolumeForClaim(claim, objects, new Map());
  assert.equal(verdict.ok && verdict.pv.metadata.name, 'one-mid');
  const rox = { ...claim, spec: { ...claim.spec, accessModes: ['ReadOnlyMany'] } };
  const roxVerdict = findVolumeForClaim(rox, objects, new Map());
  assert.equal(roxVerdict.ok && roxVerdict.pv.metadata.name, 'two-small');
});

test('provisioning: vole verify re-plans claim decisions and names one it would not make', async () => {
  const file = 'provision-pvc-protection.yaml';
  const { events } = await run(readFileSync(join(dir, file), 'utf8'), file);
  const released = events.find((e) => e.type === 'ClaimFinalizerRemoved');
  assert.ok(released !== undefined);
  // Released one event too early: the pod still used the claim then.
  const early = events.map((e) => (e === released ? { ...e, cause: e.cause + 1 } : e));
  const report = verify(early);
  assert.equal(report.divergences[0]?.seq, released.seq);
  assert.match(
    report.divergences[0]?.message ?? '',
    /the log decided ClaimFinalizerRemoved default\/data cause \d+; this version would decide/,
  );
});
