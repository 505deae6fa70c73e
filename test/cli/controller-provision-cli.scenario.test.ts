/**
 * The controller's log answers what a kubelet's log answers about provisioning (cluster
 * mode: the leading controller provisions): `vole why` names a claim waiting for
 * CreateVolume with its last error and next retry, `vole status` and `vole get pvs|pvcs`
 * show claims and the PV's phase, `vole history` the PV's phases, on a log a scenario wrote.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { VoleEvent } from '../../src/events/index.js';

const root = join(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'vole-ctl-provision-'));
const db = join(dir, 'controller.db');
const volume = 'kubernetes.io/csi/fake.csi.example.com^pvc-c-1';
after(() => rmSync(dir, { recursive: true, force: true }));

function vole(...args: string[]) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
    cwd: root,
    encoding: 'utf8',
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

let events: VoleEvent[] = [];
/** The seq of the n-th event (from 1) that passes `match`. */
function seqOf(match: (e: VoleEvent) => boolean, n = 1): string {
  const found = events.filter(match)[n - 1];
  assert.ok(found !== undefined, 'the scenario wrote the event looked for');
  return String(found.seq);
}
const failed = (call: string) => (e: VoleEvent) => e.type === 'CallFailed' && e.call === call;
/** The operation's end after the first failed `call`: the moment it is in backoff. */
function backoffAfter(call: string): string {
  const seq = Number(seqOf(failed(call)));
  assert.equal(events.find((e) => e.seq === seq + 1)?.type, 'OperationFinished');
  return String(seq + 1);
}

before(() => {
  const sim = vole('simulate', 'test/scenarios/controller-provision-failing.yaml', '--db', db);
  assert.equal(sim.status, 0, sim.stderr + sim.stdout);
  const exported = vole('export', '--db', db);
  assert.equal(exported.status, 0, exported.stderr);
  events = exported.stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as VoleEvent);
});

test('controller log: vole why names the claim waiting for CreateVolume, its error and retry', () => {
  const r = vole('why', 'default/data', '--db', db, '--at', backoffAfter('createVolume'));
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^claim default\/data at seq \d+/);
  assert.match(r.stdout, /waits on CreateVolume .* Provisioning: .*CreateVolume pvc-c-1/);
  assert.match(r.stdout, /last error at seq \d+ .*RESOURCE_EXHAUSTED/);
  assert.match(r.stdout, /next retry at \+0\.500s/);
  const bound = vole(
    'why',
    'data',
    '--db',
    db,
    '--at',
    seqOf((e) => e.type === 'ClaimBound'),
  );
  assert.match(bound.stdout, /claim default\/data Bound: bound to pvc-c-1/);
});

test('controller log: vole why tells the claims that wait for a consumer or a provisioner', () => {
  const late = vole('why', 'default/late', '--db', db);
  assert.match(late.stdout, /waits on firstConsumer .* WaitingForFirstConsumer/);
  const other = vole('why', 'default/other', '--db', db, '--json');
  const answer = JSON.parse(other.stdout);
  assert.equal(answer.kind, 'claim');
  assert.equal(answer.volumes[0].step, 'provisioner');
  assert.match(answer.volumes[0].detail, /CSI driver "other\.csi\.example\.com" absent/);
});

test('controller log: vole why on a provisioned volume tells DeleteVolume failing, retried', () => {
  const r = vole('why', volume, '--db', db, '--at', backoffAfter('deleteVolume'));
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /waits on deleteVolume .* Released \(reclaim Delete\)/);
  assert.match(r.stdout, /last error at seq \d+ .*DeleteVolume: UNAVAILABLE/);
  assert.match(r.stdout, /next retry at/);
  const gone = vole('why', volume, '--db', db);
  assert.equal(gone.status, 2, 'the PV and its volume are gone at the end');
});

test('controller log: status and get show the claims, the PV phase and CreateVolume in backoff', () => {
  const at = backoffAfter('createVolume');
  const status = vole('replay', '--db', db, '--at', at);
  assert.match(status.stdout, /backoffs\n {2}provision .*\^pvc-c-1 {2}retry at \+0\.5s/);
  assert.match(status.stdout, /default\/data {2}Provisioning .* next retry at \+0\.5s/);
  assert.match(status.stdout, /last error: .*RESOURCE_EXHAUSTED/);
  const released = vole('replay', '--db', db, '--at', backoffAfter('deleteVolume'), '--json');
  const view = JSON.parse(released.stdout);
  assert.deepEqual(
    view.pvs.map((pv: { name: string; phase: string }) => `${pv.name} ${pv.phase}`),
    ['pvc-c-1 Released'],
  );
  const pvcs = vole('get', 'pvcs', '--db', db, '--json');
  assert.deepEqual(
    JSON.parse(pvcs.stdout).map((c: { claim: string; status: string }) => `${c.claim} ${c.status}`),
    ['default/late WaitingForFirstConsumer', 'default/other WaitingForProvisioner'],
  );
});

test('controller log: vole history shows the provisioned PV made, Released, then deleted', () => {
  const r = vole('history', '--db', db);
  const lines = r.stdout.trim().split('\n');
  assert.equal(lines.length, 3, r.stdout);
  assert.match(lines[0]!, /PersistentVolume pvc-c-1 {2}none → Bound .* createVolume succeeded/);
  // The claim deleted goes through pvc-protection (the API server only marked it deleted).
  assert.match(lines[1]!, /Bound .* → Released .* claim default\/data released by pvc-protection/);
  assert.match(lines[2]!, /Released .* → none {2}deleteVolume succeeded/);
});

test('controller log: vole why on a pod names its claim being provisioned, then its attachment', () => {
  const life = join(dir, 'lifecycle.db');
  const sim = vole('simulate', 'test/scenarios/controller-provision-lifecycle.yaml', '--db', life);
  assert.equal(sim.status, 0, sim.stderr + sim.stdout);
  const head = vole('why', 'default/b', '--db', life);
  assert.match(head.stdout, /^pod default\/b \(uid-b\) at seq \d+: every volume attached/);
  assert.match(
    head.stdout,
    /data \(kubernetes\.io\/csi\/fake\.csi\.example\.com\^pvc-c-2\): attached to node-2/,
  );
  const creating = vole('export', '--db', life)
    .stdout.trim()
    .split('\n')
    .map((line) => JSON.parse(line) as VoleEvent)
    .filter((e) => e.type === 'CallStarted' && e.call === 'createVolume')[1]!;
  const during = vole('why', 'b', '--db', life, '--at', String(creating.seq));
  assert.match(during.stdout, /1 of 1 volume\(s\) not ready/);
  assert.match(during.stdout, /data .*: runs CreateVolume .* claim default\/late Provisioning/);
});
