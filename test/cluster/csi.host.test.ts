/**
 * A real CSI driver under the controller in etcd: a 3-member etcd, one controller replica,
 * one node agent and `vole csi-driver` (the loop disk as disk.csi.vole.dev), each a separate
 * process. The controller binds the claim and calls ControllerPublishVolume /
 * ControllerUnpublishVolume itself; the node agent calls NodeStage/NodePublish and their
 * inverses. The pod's writes reach the disk image; once the pod is deleted nothing stays
 * mounted, attached, or on a loop device. Every process is ended by its PID.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Etcd3 } from 'etcd3';
import { connect } from '../../src/cluster/client.js';
import { readLogEvents } from '../../src/cluster/etcd-log.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import { readVolumesAttached } from '../../src/cluster/status.js';
import type { VoleEvent } from '../../src/events/index.js';
import { listLoops } from '../../src/host/loop.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { openReadonly } from '../../src/postmortem/open.js';
import { vole } from '../support/agent-process.js';
import { EtcdCluster, etcdSkipReason } from '../support/etcd-cluster.js';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';
import { eventually, VoleProcess } from '../support/vole-procs.js';

const skip = hostTestSkipReason() || etcdSkipReason();
const keys = new ClusterKeys('/vole/');
const { base } = skip === false ? hostSandbox('cluster-csi') : { base: '' };
const driverName = 'disk.csi.vole.dev';
const volume = `kubernetes.io/csi/${driverName}^data`;
const socket = () => join(base, 'csi.sock');
const image = () => join(base, 'state', 'images', 'data.img');
const agentDb = () => join(base, 'node-1.db');
const target = () =>
  join(base, 'node-1', 'pods', 'uid-db', 'volumes', 'kubernetes.io~csi', 'data', 'mount');
let etcd: EtcdCluster;
let client: Etcd3;
const procs: VoleProcess[] = [];

const storage = `apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-data}
spec:
  capacity: {storage: 64Mi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ${driverName}, volumeHandle: data, fsType: ext4, volumeAttributes: {size: 64Mi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 64Mi}}
`;
const pod = `apiVersion: v1
kind: Pod
metadata: {name: db, namespace: default, uid: uid-db}
spec:
  nodeName: node-1
  containers: [{name: c, volumeMounts: [{name: data, mountPath: /data}]}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
`;

function outputs(): string {
  let tail: string[] = [];
  try {
    tail = existsSync(agentDb())
      ? agentLog()
          .slice(-12)
          .map((e) => `  #${e.seq} ${JSON.stringify(e).slice(0, 400)}`)
      : [];
  } catch (error) {
    tail = [`  (the agent's log cannot be read yet: ${(error as Error).message})`];
  }
  return [
    ...procs.map((p) => `--- ${p.name} (pid ${p.pid})\n${p.output}`),
    '--- agent log tail:',
    ...tail,
  ].join('\n');
}

async function attachedOnNode1(): Promise<string[]> {
  const reports = await readVolumesAttached(new EtcdStore(client), keys);
  return reports.find((r) => r.node === 'node-1')?.volumes.map((v) => v.name) ?? [];
}

async function mounts(): Promise<string[]> {
  return mountsUnder(await readMountTable(), base).map((m) => m.mountPoint);
}

async function loopOverImage(): Promise<boolean> {
  return (await listLoops()).some((l) => l.backFile === image());
}

/** The RPC methods a log's calls made (`/csi.v1.Controller/ControllerPublishVolume` → the name). */
function rpcsOf(events: readonly VoleEvent[]): string[] {
  return events.flatMap((e) => {
    const rpc = (e as { rpc?: { method: string } }).rpc;
    return rpc === undefined ? [] : [rpc.method.slice(rpc.method.lastIndexOf('/') + 1)];
  });
}

async function controllerLog(): Promise<VoleEvent[]> {
  const events: VoleEvent[] = [];
  await readLogEvents(new EtcdStore(client), keys, 1, (e) => events.push(e));
  return events;
}

function agentLog(): VoleEvent[] {
  const store = openReadonly(agentDb());
  try {
    return [...store.read()];
  } finally {
    store.close();
  }
}

/** Mounts the image read-only elsewhere and reads one file from it. */
function readFromImage(file: string): string {
  const dir = mkdtempSync(join(base, 'image-'));
  const loop = spawnSync('losetup', ['--find', '--show', '--read-only', image()], {
    encoding: 'utf8',
  }).stdout.trim();
  try {
    assert.equal(spawnSync('mount', ['-t', 'ext4', '-o', 'ro', loop, dir]).status, 0);
    try {
      return readFileSync(join(dir, file), 'utf8');
    } finally {
      spawnSync('umount', [dir]);
    }
  } finally {
    spawnSync('losetup', ['-d', loop]);
    rmSync(dir, { recursive: true, force: true });
  }
}

before(async () => {
  if (skip !== false) return;
  etcd = await EtcdCluster.start();
  client = connect(etcd.urls);
  mkdirSync(join(base, 'state'), { recursive: true });
  const csi = `${driverName}=unix://${socket()}`;
  procs.push(
    new VoleProcess(
      'driver',
      [
        'csi-driver',
        '--endpoint',
        `unix://${socket()}`,
        '--node-id',
        'node-1',
        '--state-dir',
        join(base, 'state'),
      ],
      false,
    ),
  );
  await eventually(() => existsSync(socket()), 'the CSI driver socket', 20_000, outputs);
  procs.push(
    new VoleProcess(
      'c1',
      [
        'controller',
        '--etcd',
        etcd.urls,
        '--root',
        join(base, 'c1'),
        '--identity',
        'c1',
        '--lease-ttl',
        '3',
        '--csi',
        csi,
      ],
      true,
    ),
    new VoleProcess(
      'node-1',
      [
        'run',
        '--etcd',
        etcd.urls,
        '--node',
        'node-1',
        '--root',
        join(base, 'node-1'),
        '--db',
        agentDb(),
        '--heartbeat-ttl',
        '2',
        '--csi',
        csi,
      ],
      false,
    ),
  );
  writeFileSync(join(base, 'storage.yaml'), storage);
  writeFileSync(join(base, 'pod.yaml'), pod);
  const applied = vole(
    'apply',
    '--etcd',
    etcd.urls,
    '-f',
    join(base, 'storage.yaml'),
    '-f',
    join(base, 'pod.yaml'),
  );
  assert.equal(applied.status, 0, applied.stderr);
});

after(async () => {
  for (const proc of procs.reverse()) await proc.stop(8_000).catch(() => undefined);
  client?.close();
  await etcd?.stop();
  setTimeout(() => process.exit(process.exitCode ?? 0), 3_000).unref();
});

test(
  'cluster + CSI: the controller publishes the volume to node-1 through the driver; the agent stages and publishes it; writes reach the image',
  { skip, timeout: 90_000 },
  async () => {
    await eventually(
      async () => (await mounts()).includes(target()),
      'the pod volume mounted on node-1',
      60_000,
      outputs,
    );
    assert.deepEqual(await attachedOnNode1(), [volume]);
    assert.ok(await loopOverImage(), 'ControllerPublishVolume attached the image to a loop device');
    writeFileSync(join(target(), 'hello.txt'), 'written under the etcd controller\n');

    // The agent published its driver's node_id and topology; the controller has them on the
    // Node it logged (the annotation, and the labels the kubelet would set).
    assert.deepEqual(JSON.parse((await client.get(keys.csiNodeIds('node-1')).string()) ?? 'null'), {
      csiNodeIds: { [driverName]: 'node-1' },
      topology: { 'topology.disk.csi.vole.dev/node': 'node-1' },
    });
    const nodes = (await controllerLog()).flatMap((e) =>
      e.type === 'ObjectUpserted' && e.object.kind === 'Node' ? [e.object] : [],
    );
    assert.equal(
      nodes.at(-1)?.metadata.annotations?.['csi.volume.kubernetes.io/nodeid'],
      JSON.stringify({ [driverName]: 'node-1' }),
    );
    assert.equal(nodes.at(-1)?.metadata.labels?.['topology.disk.csi.vole.dev/node'], 'node-1');
    const controllerRpcs = rpcsOf(await controllerLog());
    assert.deepEqual(
      controllerRpcs,
      ['ControllerPublishVolume'],
      'the controller makes the controller calls, and only those',
    );
    const agentRpcs = rpcsOf(agentLog());
    assert.deepEqual(
      agentRpcs,
      ['NodeStageVolume', 'NodePublishVolume'],
      'the agent makes the node calls, and only those',
    );
  },
);

test(
  'cluster + CSI: the pod deleted, the agent unpublishes and unstages, the controller unpublishes; nothing is left',
  { skip, timeout: 90_000 },
  async () => {
    const deleted = vole('delete', '--etcd', etcd.urls, '-f', join(base, 'pod.yaml'));
    assert.equal(deleted.status, 0, deleted.stderr);
    await eventually(
      async () =>
        (await attachedOnNode1()).length === 0 &&
        !(await loopOverImage()) &&
        (await mounts()).length === 0,
      'the volume unmounted, detached and off its loop device',
      60_000,
      outputs,
    );
    // The loop device goes with the RPC; its answer is in the log a commit later.
    const expected = ['ControllerPublishVolume', 'ControllerUnpublishVolume'];
    let seen: VoleEvent[] = [];
    const logTail = () =>
      seen
        .slice(-15)
        .map((e) => `\n  #${e.seq} ${JSON.stringify(e).slice(0, 300)}`)
        .join('');
    await eventually(
      async () => rpcsOf((seen = await controllerLog())).length >= 2,
      'ControllerUnpublishVolume in the controller log',
      20_000,
      () => `${outputs()}\n--- controller log tail:${logTail()}`,
    );
    assert.deepEqual(rpcsOf(await controllerLog()), expected);
    for (const proc of procs.slice().reverse()) await proc.stop();
    assert.deepEqual(rpcsOf(agentLog()), [
      'NodeStageVolume',
      'NodePublishVolume',
      'NodeUnpublishVolume',
      'NodeUnstageVolume',
    ]);
    const verified = vole('verify', '--db', agentDb());
    assert.equal(verified.status, 0, verified.stdout + verified.stderr);
    assert.equal(readFromImage('hello.txt'), 'written under the etcd controller\n');
    assert.deepEqual(await mounts(), []);
    assert.equal(await loopOverImage(), false);
  },
);
