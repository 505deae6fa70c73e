/**
 * etcd out of space (a small --quota-backend-bytes, filled): the leader's log commits wait
 * and no plugin call starts on a decision that is not durable; `vole apply` says what to
 * do; after compaction, defragmentation and `alarm disarm` the controller goes on where
 * it stopped, nothing in its log lost. A real 3-member etcd; the controller and a node
 * agent in this process, on fake plugins (no host).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import pino from 'pino';
import type { Etcd3 } from 'etcd3';
import { ClusterAgent } from '../../src/cluster/agent.js';
import { connect, isNoSpace } from '../../src/cluster/client.js';
import { ClusterController } from '../../src/cluster/controller.js';
import { readLogEvents } from '../../src/cluster/etcd-log.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import { applyManifestSet, readManifestPaths } from '../../src/cluster/objects.js';
import type { VoleEvent } from '../../src/events/index.js';
import { RealClock } from '../../src/clock.js';
import { type FakeCallRecord, FakePlugin } from '../../src/plugins/fake.js';
import { caps } from '../../src/plugins/types.js';
import { EtcdCluster, etcdSkipReason } from '../support/etcd-cluster.js';
import { eventually } from '../support/vole-procs.js';

const skip = etcdSkipReason();
const repo = join(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'vole-quota-'));
const keys = new ClusterKeys('/vole/');
const quotaBytes = 8 * 1024 * 1024;
let etcd: EtcdCluster;
let client: Etcd3;
/** The test's own client: etcd3 opens a circuit breaker per client after failed calls. */
let operator: Etcd3;
/** The agent's, as in its own process (watchers it cancels share no stream with the controller's). */
let agentClient: Etcd3;
const stop = new AbortController();
const said: string[] = [];
let controller: ClusterController;
let agent: ClusterAgent;
let leading: Promise<unknown>;
const journal: FakeCallRecord[] = [];

function fakeDisk(): FakePlugin {
  return new FakePlugin({
    caps: caps('fake.disk', { attachable: true, deviceMountable: true }),
    clock: new RealClock(),
    journal,
  });
}

const manifests = `apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-q}
spec:
  capacity: {storage: 1Mi}
  accessModes: [ReadWriteOnce]
  csi: {driver: fake.disk, volumeHandle: q}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: q, namespace: default}
spec:
  volumeName: pv-q
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: q, namespace: default, uid: q-1}
spec:
  nodeName: node-1
  volumes: [{name: data, persistentVolumeClaim: {claimName: q}}]
`;

before(async () => {
  if (skip !== false) return;
  etcd = await EtcdCluster.start({ quotaBackendBytes: quotaBytes });
  client = connect(etcd.urls);
  operator = connect(etcd.urls);
  agentClient = connect(etcd.urls);
  const logger = pino({ level: 'silent' });
  controller = new ClusterController({
    client: new EtcdStore(client),
    keys,
    identity: 'q1',
    plugins: [fakeDisk()],
    logger,
    // Long: filling etcd with 512 KiB puts can hold a keepalive back for seconds on a loaded machine.
    leaseTtlS: 15,
    maxWaitForUnmountMs: 1000,
    say: (line) => said.push(line),
  });
  leading = controller.run(stop.signal);
  agent = new ClusterAgent({
    client: new EtcdStore(agentClient),
    clock: new RealClock(),
    keys,
    node: 'node-1',
    db: join(dir, 'node-1.db'),
    plugins: [fakeDisk()],
    logger,
    heartbeatTtlS: 5,
  });
  await agent.start();
});

after(async () => {
  stop.abort();
  await Promise.race([leading, new Promise((r) => setTimeout(r, 5_000))]);
  await Promise.race([
    agent?.stop().catch(() => undefined),
    new Promise((r) => setTimeout(r, 5_000).unref()),
  ]);
  client?.close();
  operator?.close();
  agentClient?.close();
  await etcd?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function fill(): Promise<number> {
  const junk = Buffer.alloc(512 * 1024, 1);
  for (let i = 0; i < 200; i++) {
    try {
      await operator.put(`/junk/${i}`).value(junk);
    } catch (error) {
      if (isNoSpace(error)) return i;
      throw error;
    }
  }
  throw new Error('etcd never ran out of space');
}

/**
 * `vole apply` as a child process, waited for without blocking this one: the controller
 * runs here, and a spawnSync as long as its lease TTL (a loaded machine) would lose it.
 */
function voleApply(file: string): Promise<{ status: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [
      '--import',
      'tsx',
      join(repo, 'src/cli/main.ts'),
      'apply',
      '--etcd',
      etcd.urls,
      '-f',
      file,
    ]);
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.stdout.resume();
    child.on('close', (status) => resolve({ status, stderr }));
  });
}

const calls = (call: string) => journal.filter((c) => c.call === call).length;

test(
  'etcd out of space: nothing acts on a decision that is not durable; after compact, defrag and disarm the controller resumes and nothing is lost',
  { skip, timeout: 60_000 },
  async () => {
    const file = join(dir, 'q.yaml');
    writeFileSync(file, manifests);
    const set = readManifestPaths([file]);
    await applyManifestSet(new EtcdStore(operator), keys, set);
    await eventually(
      () => agent.vm.status.getMountedVolumesForPod('q-1').size === 1,
      'the pod mounted',
      20_000,
      () => said.join('\n'),
    );
    const attaches = calls('attach');
    assert.equal(attaches, 1);

    // The node goes away (its heartbeat with it) still reporting the volume in use: once
    // maxWaitForUnmount passes, the controller decides a forced detach on its own.
    await agent.stop();
    const puts = await fill();
    assert.ok(puts > 0, `filled after ${puts} puts`);
    const applied = await voleApply(file);
    // Unchanged objects need no write; a changed one is refused with what to do.
    writeFileSync(file, manifests.replace('uid: q-1', 'uid: q-2'));
    const refused = await voleApply(file);
    assert.equal(applied.status, 0, applied.stderr);
    assert.equal(refused.status, 2);
    assert.match(refused.stderr, /out of space .*compact and defragment/);

    // Deletes are allowed under NOSPACE: the pod goes. The controller decides to detach
    // (forced: the node is gone), but its decisions cannot become durable: no call starts.
    const deleted = await operator.delete().key(keys.pod('node-1', 'default', 'q'));
    assert.equal(deleted.deleted, '1', 'a delete goes through under NOSPACE');
    await eventually(
      () => said.some((l) => /NOSPACE/.test(l)),
      'the controller to say its log waits for space',
      20_000,
      () =>
        `${said.join('\n')}\nseq ${controller.world?.seq} stats ${JSON.stringify(controller.logStats)} nodes ${JSON.stringify([...controller.world!.nodes.values()].map((n) => [n.name, n.ready, [...n.volumesInUse]]))}`,
    );
    await new Promise((r) => setTimeout(r, 2500));
    const decided = controller.world!.running.size;
    assert.equal(decided, 1, 'the forced detach is decided (in memory)');
    assert.equal(calls('detach'), 0, 'no detach while its decision is not durable');
    assert.equal(controller.term !== undefined && !stop.signal.aborted, true);

    // The operator's way out: free space, compact, defragment every member, disarm.
    await operator.delete().prefix('/junk/');
    const revision = (await operator.get('/vole/controller/log/head').exec()).header.revision;
    etcd.etcdctl('compact', revision);
    etcd.etcdctl('defrag');
    etcd.etcdctl('alarm', 'disarm');
    await eventually(
      () => calls('detach') === 1,
      'the detach once the log is durable again',
      30_000,
      () => said.join('\n'),
    );

    const events: VoleEvent[] = [];
    await readLogEvents(new EtcdStore(operator), keys, 1, (e) => events.push(e));
    assert.deepEqual(
      events.map((e) => e.seq),
      events.map((_, i) => i + 1),
      'contiguous',
    );
    const removed = events.findIndex((e) => e.type === 'PodRemoved');
    const detach = events.findIndex(
      (e) => e.type === 'OperationStarted' && e.op === 'detach' && e.forced === 'timeout',
    );
    assert.ok(
      removed > 0 && detach > removed,
      'the pod removal and the detach decision are both in the log, in order',
    );
    assert.ok(controller.logStats!.retries > 0, 'commits were retried while etcd had no space');
  },
);
