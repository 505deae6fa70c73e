/**
 * `vole import --audit-log F --kubelet-log NODE=F... --controller-log F`: a real cluster's
 * audit log, two hollow kubelets' logs and the kube-controller-manager's (test/fixtures/klog)
 * merged into one recorded log in time order; `vole why POD` and `vole history` then show
 * the node's own operations beside what the API showed. Broken lines are counted and named.
 */
import assert from 'node:assert/strict';
import { appendFileSync, copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { NodeOperation, Transition } from '../../src/postmortem/index.js';
import { openReadonly } from '../../src/postmortem/open.js';
import { vole } from '../support/agent-process.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-import-klog-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const fixture = (name: string) => join('test/fixtures/klog', name);
const uidB = '99c554eb-673f-4d88-a338-499d11e2f6be';
const csiB = 'kubernetes.io/csi/hollow.csi.example^vol-2';

function importAll(db: string, ...more: string[]) {
  return vole(
    'import',
    '--audit-log',
    fixture('audit.log'),
    '--kubelet-log',
    `node-a=${fixture('kubelet-node-a.log')}`,
    '--kubelet-log',
    `node-b=${fixture('kubelet-node-b.log')}`,
    '--controller-log',
    fixture('kube-controller-manager.log'),
    '--db',
    db,
    ...more,
  );
}

test('the audit log and the klog files become one log in time order', () => {
  const db = join(dir, 'all.db');
  const result = importAll(db);
  assert.equal(result.status, 0, result.stderr);
  assert.match(result.stderr, /klog lines carry no year: read as 2026 \(from the audit log\)/);
  assert.match(
    result.stderr,
    /from 3 klog file\(s\), 94 line\(s\): 56 volume operation\(s\) used, 38 about something else, 0 unreadable/,
  );
  const store = openReadonly(db);
  try {
    const events = [...store.read({})];
    assert.equal(events[0]?.type, 'EngineStarted');
    const ops = events.filter((e) => e.type === 'NodeOperationObserved');
    assert.equal(ops.length, 56);
    assert.ok(events.some((e) => e.type === 'PodUpserted'));
    // Time order across the sources: the tsMs never step back past a change of the API.
    for (let i = 1; i < events.length; i++)
      assert.ok(events[i]!.tsMs >= events[i - 1]!.tsMs - 1000, `seq ${events[i]!.seq} in order`);
    // The controller's attach lands after the VolumeAttachment it waited on was created.
    const vaCreated = events.findIndex(
      (e) => e.type === 'ObjectUpserted' && e.object.kind === 'VolumeAttachment',
    );
    const attached = events.findIndex(
      (e) =>
        e.type === 'NodeOperationObserved' &&
        e.operation === 'AttachVolume.Attach' &&
        e.outcome === 'succeeded',
    );
    assert.ok(vaCreated > 0 && attached > vaCreated, `${vaCreated} < ${attached}`);
  } finally {
    store.close();
  }
});

test("vole why POD names the node's operations on its volumes, the controller's attach among them", () => {
  const db = join(dir, 'why.db');
  assert.equal(importAll(db).status, 0);
  const words = vole('why', 'default/web-2', '--db', db);
  assert.equal(words.status, 0, words.stderr);
  assert.match(words.stdout, /^default\/web-2 on node-b: waited from /m);
  assert.match(words.stdout, /what the nodes' logs say of its volumes \(29 operation\(s\)\):/);
  assert.match(
    words.stdout,
    /kube-controller-manager on node-b: AttachVolume\.Attach succeeded for kubernetes\.io\/csi\/hollow\.csi\.example\^vol-2 \(pv-b\) \[test\/fixtures\/klog\/kube-controller-manager\.log:14\]/,
  );
  assert.match(
    words.stdout,
    /kubelet on node-b: MountVolume\.SetUp succeeded for kubernetes\.io\/configmap\/99c554eb-673f-4d88-a338-499d11e2f6be-config \(config\) pod default\/web-2/,
  );
  const json = JSON.parse(vole('why', uidB, '--db', db, '--json').stdout) as {
    nodeOperations: NodeOperation[];
  };
  // Only web-2's volumes on node-b: nothing of web-1 on node-a.
  assert.ok(json.nodeOperations.every((op) => op.node === 'node-b'));
  assert.deepEqual(
    json.nodeOperations
      .filter((op) => op.component === 'kube-controller-manager')
      .map((op) => `${op.operation} ${op.outcome}`),
    [
      'attacherDetacher.AttachVolume started',
      'AttachVolume.Attach succeeded',
      'attacherDetacher.DetachVolume started',
      'DetachVolume.Detach succeeded',
    ],
  );
});

test("vole history: the node's pairs move as its logs say", () => {
  const db = join(dir, 'history.db');
  assert.equal(importAll(db).status, 0);
  const lines = vole('history', '--db', db, '--pod', uidB, '--json')
    .stdout.trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Transition);
  const config = lines.filter((t) => t.volume.endsWith(`${uidB}-config`));
  assert.deepEqual(
    config.map((t) => `${t.from} → ${t.to}`),
    [
      'unmounted → mounting',
      'mounting → mounted',
      'mounted → unmounting',
      'unmounting → unmounted',
    ],
  );
  assert.ok(config.every((t) => t.pair === 'mount' && t.node === 'node-b'));
  const attach = vole('history', '--db', db, '--volume', csiB, '--json')
    .stdout.trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Transition)
    .filter((t) => t.because.startsWith('kube-controller-manager'));
  assert.deepEqual(
    attach.map((t) => `${t.from} → ${t.to}`),
    [
      'detached → attaching',
      'attaching → attached',
      'attached → detaching',
      'detaching → detached',
    ],
  );
  // The kubelet's own attempts (this kubelet attaches nothing itself) fail with the reason.
  const failed = vole('history', '--db', db, '--volume', csiB).stdout;
  assert.match(
    failed,
    /attaching → detached {2}kubelet on node-b: AttachVolume\.Attach failed for .*: attaching volumes from the kubelet is not supported/,
  );
});

test('broken klog lines are counted and named; a bad NODE=FILE or a missing file is refused', () => {
  const broken = join(dir, 'broken.log');
  copyFileSync(fixture('kubelet-node-a.log'), broken);
  appendFileSync(broken, 'I1207 23:11:50.000000   1 x.go:1] "MountVolume.SetUp succeeded for\n');
  appendFileSync(broken, 'not a klog line at all\n\u0000\u0000\n');
  const db = join(dir, 'broken.db');
  const result = vole(
    'import',
    '--audit-log',
    fixture('audit.log'),
    '--kubelet-log',
    `node-a=${broken}`,
    '--db',
    db,
  );
  assert.equal(result.status, 0, result.stderr);
  assert.match(
    result.stderr,
    /42 line\(s\): 27 volume operation\(s\) used, 12 about something else, 3 unreadable/,
  );
  assert.match(result.stderr, /unreadable: .*broken\.log:41: not a klog line at all/);

  const noNode = vole(
    'import',
    '--audit-log',
    fixture('audit.log'),
    '--kubelet-log',
    broken,
    '--db',
    join(dir, 'x.db'),
  );
  assert.equal(noNode.status, 2);
  assert.match(noNode.stderr, /give the node and its kubelet's log as NODE=FILE/);
  const missing = vole(
    'import',
    '--audit-log',
    fixture('audit.log'),
    '--controller-log',
    join(dir, 'none.log'),
    '--db',
    join(dir, 'y.db'),
  );
  assert.equal(missing.status, 2);
  assert.match(missing.stderr, /--controller-log .*none\.log: ENOENT/);
  const alone = vole('import', '--controller-log', broken, '--db', join(dir, 'z.db'));
  assert.equal(alone.status, 2);
  assert.match(alone.stderr, /give --audit-log FILE too/);
  const year = importAll(join(dir, 'year.db'), '--klog-year', '2025');
  assert.equal(year.status, 0, year.stderr);
  assert.match(year.stderr, /read as 2025 \(from --klog-year\)/);
});
