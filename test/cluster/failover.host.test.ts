/**
 * Cluster mode for real: a 3-member etcd started here, two controller replicas and two
 * node agents as vole processes, a real loop disk (one machine plays both nodes: the disk
 * images under the shared root are the "SAN"). Faults: SIGKILL of the leading controller
 * in the middle of an attach, SIGKILL of the etcd leader member, a node agent stopped
 * longer than maxWaitForUnmount. Throughout: a ReadWriteOnce volume is never published
 * attached to two nodes; at the end the controller log (folded again, invariants after
 * every event) has no detach of a volume its node reported in use unless forced with a
 * reason, the agents' logs verify, and nothing is left mounted or attached.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Etcd3, Watcher } from 'etcd3';
import { connect } from '../../src/cluster/client.js';
import { readLogEvents, SegmentDecoder } from '../../src/cluster/etcd-log.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import { checkControllerVolume } from '../../src/controller/invariants.js';
import { controllerCore } from '../../src/engine/cores.js';
import type { VoleEvent } from '../../src/events/index.js';
import { listLoops } from '../../src/host/loop.js';
import { readMountTable } from '../../src/host/mountinfo.js';
import { EtcdCluster, etcdSkipReason } from '../support/etcd-cluster.js';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';
import { eventually, VoleProcess } from '../support/vole-procs.js';
import { vole } from '../support/agent-process.js';

const skip = hostTestSkipReason() || etcdSkipReason();
const repo = join(import.meta.dirname, '../..');
const keys = new ClusterKeys('/vole/');
const volume = 'disk.vole.dev/data';
const maxWaitForUnmount = '4s';

let etcd: EtcdCluster;
let client: Etcd3;
// Registered first: removes mounts and loop devices a failed run leaves, after everything else.
const { base } = skip === false ? hostSandbox('cluster') : { base: '' };
/** Each process has its own root; the disk images live under one shared root (the "SAN"). */
const rootOf = (name: string) => join(base, name);
const san = join(base, 'san');
const procs = new Map<string, VoleProcess>();
const published = new Map<string, string[]>();
const violations: string[] = [];
const logEvents: VoleEvent[] = [];
let watchers: Watcher[] = [];
/** Called on every committed log event as soon as the watch delivers it (for timed kills). */
let onLogEvent: ((event: VoleEvent) => void) | null = null;

function storage(): string {
  return `apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-data}
spec:
  capacity: {storage: 16Mi}
  accessModes: [ReadWriteOnce]
  csi: {driver: disk.vole.dev, volumeHandle: data, fsType: ext4}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  volumeName: pv-data
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 16Mi}}
`;
}

/** The pod `db` with this UID on this node: a pod that moves is a new pod (a new UID). */
function applyPod(uid: string, node: string): void {
  const file = join(base, 'manifests', 'pod.yaml');
  writeFileSync(
    file,
    `apiVersion: v1
kind: Pod
metadata: {name: db, namespace: default, uid: ${uid}}
spec:
  nodeName: ${node}
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
`,
  );
  const result = vole('apply', '--etcd', etcd.urls, '-f', file);
  assert.equal(result.status, 0, result.stderr);
}

async function podMounted(uid: string): Promise<boolean> {
  const table = await readMountTable();
  return table.some(
    (m) => m.mountPoint.startsWith(base) && m.mountPoint.includes(`/pods/${uid}/volumes/`),
  );
}

function attachedTo(): string[] {
  return [...published]
    .filter(([, volumes]) => volumes.includes(volume))
    .map(([node]) => node)
    .sort();
}

async function loopAttached(): Promise<boolean> {
  return (await listLoops()).some((l) => l.backFile === join(san, 'disks', 'data.img'));
}

function outputs(): string {
  const tail = logEvents.slice(-25).map((e) => {
    const { seq, type, ...rest } = e as unknown as Record<string, unknown>;
    const brief = ['op', 'node', 'call', 'forced', 'outcome', 'error', 'uid'].filter(
      (k) => rest[k] !== undefined,
    );
    return `  #${String(seq)} ${String(type)} ${brief.map((k) => `${k}=${JSON.stringify(rest[k])}`).join(' ')}`;
  });
  return [
    ...[...procs.values()].map((p) => `--- ${p.name} (pid ${p.pid})\n${p.output}`),
    `--- published volumesAttached: ${JSON.stringify([...published])}`,
    '--- controller log tail:',
    ...tail,
  ].join('\n');
}

/** Converged on `uid` at `node`: published attached there only, mounted in the pod. */
async function convergedOn(uid: string, node: string, timeoutMs = 40_000): Promise<number> {
  return eventually(
    async () => attachedTo().join() === node && (await podMounted(uid)),
    `pod ${uid} mounted on ${node} with ${volume} attached to ${node} only`,
    timeoutMs,
    outputs,
  );
}

async function leaderProcess(): Promise<VoleProcess> {
  const identity = (await client.get(keys.leader).string()) ?? '';
  const proc = procs.get(identity);
  assert.ok(proc !== undefined, `a leader among the replicas (leader key: "${identity}")`);
  return proc;
}

async function watchEtcd(): Promise<void> {
  const status = await client.watch().prefix(keys.status).create();
  status.on('put', (kv) => {
    const [node, field] = ClusterKeys.rest(kv.key.toString(), keys.status).split('/');
    if (field !== 'volumesAttached') return;
    published.set(
      node!,
      (
        JSON.parse(kv.value.toString()) as { volumesAttached: { name: string }[] }
      ).volumesAttached.map((v) => v.name),
    );
    const nodes = attachedTo();
    if (nodes.length > 1)
      violations.push(
        `${volume} published attached to ${nodes.join(' and ')} at revision ${kv.mod_revision}`,
      );
  });
  const log = await client.watch().prefix(keys.log.segments).create();
  const segments = new SegmentDecoder(keys);
  log.on('put', (kv) => {
    for (const event of segments.take(kv.key.toString(), kv.value.toString())) {
      logEvents.push(event);
      onLogEvent?.(event);
    }
  });
  watchers = [status, log];
}

before(async () => {
  if (skip !== false) return;
  etcd = await EtcdCluster.start();
  client = connect(etcd.urls);
  mkdirSync(join(base, 'manifests'), { recursive: true });
  await watchEtcd();
  for (const id of ['c1', 'c2']) {
    const args = [
      'controller',
      '--etcd',
      etcd.urls,
      '--root',
      rootOf('controllers'),
      '--disks-root',
      san,
      '--identity',
      id,
      '--lease-ttl',
      '3',
      '--max-wait-for-unmount',
      maxWaitForUnmount,
    ];
    procs.set(id, new VoleProcess(id, args, true));
  }
  for (const node of ['node-1', 'node-2']) {
    const args = [
      'run',
      '--etcd',
      etcd.urls,
      '--node',
      node,
      '--root',
      rootOf(node),
      '--disks-root',
      san,
      '--db',
      join(base, `${node}.db`),
      '--heartbeat-ttl',
      '2',
    ];
    procs.set(node, new VoleProcess(node, args, false));
  }
  writeFileSync(join(base, 'manifests', 'storage.yaml'), storage());
  const applied = vole('apply', '--etcd', etcd.urls, '-f', join(base, 'manifests', 'storage.yaml'));
  assert.equal(applied.status, 0, applied.stderr);
});

/** Teardown never hangs the run: each step gets a few seconds (processes end by PID anyway). */
const bounded = (promise: Promise<unknown>, ms = 5_000) =>
  Promise.race([promise.catch(() => undefined), new Promise((r) => setTimeout(r, ms).unref())]);

after(async () => {
  for (const w of watchers) await bounded(w.cancel());
  for (const proc of procs.values()) await bounded(proc.stop(), 8_000);
  client?.close();
  await etcd?.stop();
  // etcd3's reconnect timers may outlive a closed client: they must not keep this file alive.
  setTimeout(() => process.exit(process.exitCode ?? 0), 3_000).unref();
});

test(
  'cluster: a pod scheduled to node-1 gets its disk attached by the leader and mounted by node-1',
  { skip, timeout: 60_000 },
  async () => {
    applyPod('db-1', 'node-1');
    await convergedOn('db-1', 'node-1');
    assert.ok(await loopAttached());
  },
);

test(
  'cluster: the leading controller SIGKILLed in the middle of an attach; the standby resumes the log and attaches',
  { skip, timeout: 60_000 },
  async (t) => {
    const leader = await leaderProcess();
    const from = logEvents.length;
    applyPod('db-2', 'node-2');
    // The moment the leader's attach to node-2 is durable (the call starts right after), it dies.
    const pid = leader.pid;
    onLogEvent = (e) => {
      if (e.type !== 'CallStarted' || e.call !== 'attach') return;
      onLogEvent = null;
      process.kill(pid, 'SIGKILL');
    };
    await eventually(
      () => logEvents.slice(from).some((e) => e.type === 'CallStarted' && e.call === 'attach'),
      'the leader to start the attach to node-2',
      40_000,
      outputs,
    );
    const killedAtMs = Date.now();
    const killed = leader.name;
    await leader.kill();
    const tookMs = await convergedOn('db-2', 'node-2');
    await eventually(
      async () => ((await client.get(keys.leader).string()) ?? killed) !== killed,
      'the other replica to lead',
      15_000,
      outputs,
    );
    leader.start(); // back, as a standby
    assert.ok(!(await podMounted('db-1')), 'node-1 unmounted the old pod');
    // The new leader's log: EngineStarted; if the old leader's attach was cut off (no
    // outcome before it), the new leader made it uncertain and attached again.
    const engineStarted = () =>
      logEvents.findIndex((e, i) => i > from && e.type === 'EngineStarted');
    await eventually(
      () => engineStarted() > from,
      'the new leader to start its engine on the log',
      10_000,
      outputs,
    );
    const restarted = engineStarted();
    const before = logEvents.slice(from, restarted);
    const cutOff = !before.some((e) => e.type === 'CallSucceeded' && e.call === 'attach');
    t.diagnostic(
      cutOff ? 'the attach was cut off by the kill' : 'the attach finished just before the kill',
    );
    if (cutOff) {
      const afterStart = logEvents.slice(restarted);
      assert.ok(
        afterStart.some((e) => e.type === 'CallSucceeded' && e.call === 'attach'),
        'the new leader attaches again',
      );
    }
    assert.ok(Date.now() - killedAtMs < 30_000, `converged ${tookMs} ms after the kill`);
    assert.deepEqual(violations, []);
  },
);

test(
  'cluster: the etcd leader member SIGKILLed; controllers and agents go on and converge',
  { skip, timeout: 60_000 },
  async () => {
    const member = await etcd.leader();
    assert.ok(member >= 0);
    await etcd.kill(member);
    applyPod('db-3', 'node-1');
    await convergedOn('db-3', 'node-1', 45_000);
    assert.ok(!(await podMounted('db-2')));
    await etcd.restart(member);
    assert.deepEqual(violations, []);
  },
);

test(
  'cluster: a node agent stopped longer than maxWaitForUnmount; the volume is force-detached with the reason recorded',
  { skip, timeout: 60_000 },
  async () => {
    const node1 = procs.get('node-1')!;
    const from = logEvents.length;
    node1.pause();
    try {
      applyPod('db-4', 'node-2');
      await eventually(
        () =>
          logEvents
            .slice(from)
            .some(
              (e) => e.type === 'OperationStarted' && e.op === 'detach' && e.forced === 'timeout',
            ),
        'a forced detach from node-1 after maxWaitForUnmount',
        30_000,
        outputs,
      );
    } finally {
      node1.resume();
    }
    await convergedOn('db-4', 'node-2');
    await eventually(
      async () => !(await podMounted('db-3')),
      'node-1 to unmount the old pod once it runs again',
      20_000,
      outputs,
    );
    assert.deepEqual(violations, []);
  },
);

test(
  'cluster: every pod deleted, nothing is left mounted or attached; the logs hold every decision',
  { skip, timeout: 60_000 },
  async () => {
    const result = vole('delete', '--etcd', etcd.urls, '-f', join(base, 'manifests', 'pod.yaml'));
    assert.equal(result.status, 0, result.stderr);
    await eventually(
      async () => attachedTo().length === 0 && !(await loopAttached()),
      'the disk detached everywhere',
      30_000,
      outputs,
    );
    const table = await readMountTable();
    assert.deepEqual(
      table.filter((m) => m.mountPoint.startsWith(base)).map((m) => m.mountPoint),
      [],
    );

    // The controller log in etcd, folded again: contiguous, invariants after every event,
    // and no detach of a volume its node reported in use unless forced.
    const events: VoleEvent[] = [];
    await readLogEvents(new EtcdStore(client), keys, 1, (e) => events.push(e));
    const world = controllerCore.initialWorld();
    const problems: string[] = [];
    let starts = 0;
    for (const event of events) {
      if (event.type === 'OperationStarted' && event.op === 'detach') {
        const inUse = world.nodes.get(event.node as never)?.volumesInUse.has(event.volume) === true;
        if (inUse && event.forced === undefined)
          problems.push(
            `seq ${event.seq}: detach of ${event.volume} from ${event.node} while in use, not forced`,
          );
      }
      if (event.type === 'EngineStarted') starts++;
      controllerCore.fold(world, event);
      for (const v of world.dirty)
        problems.push(...checkControllerVolume(world, v).map((x) => x.message));
      world.dirty.clear();
    }
    assert.deepEqual(problems, []);
    assert.ok(starts >= 2, 'at least two leaders wrote the log');
    assert.ok(
      events.some((e) => e.type === 'OperationStarted' && e.forced === 'timeout'),
      'the forced detach is in the log with its reason',
    );
    // Nothing lost: what the test saw committed is exactly what the log holds.
    assert.deepEqual(
      logEvents.map((e) => e.seq),
      events.map((e) => e.seq),
    );

    for (const node of ['node-1', 'node-2']) {
      await procs.get(node)!.stop();
      const verified = vole('verify', '--db', join(base, `${node}.db`));
      assert.equal(verified.status, 0, verified.stdout + verified.stderr);
    }
    const exported = vole('export', '--etcd', etcd.urls, '--out', join(base, 'controller.jsonl'));
    assert.equal(exported.status, 0, exported.stderr);
    const imported = vole(
      'import',
      join(base, 'controller.jsonl'),
      '--db',
      join(base, 'controller.db'),
    );
    assert.equal(imported.status, 0, imported.stderr);
    const history = vole('history', '--db', join(base, 'controller.db'), '--volume', volume);
    assert.equal(history.status, 0, history.stderr);
    assert.match(history.stdout, /attach/);
  },
);
