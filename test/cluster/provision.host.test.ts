/**
 * The leading controller provisions in cluster mode: a 3-member etcd, one controller
 * replica, one node agent and `vole csi-driver` (the loop disk as disk.csi.vole.dev), each
 * a separate process. A WaitForFirstConsumer StorageClass, a claim without a uid (`vole
 * apply` gives it one) and a pod on node-1: the controller calls CreateVolume
 * `pvc-<claim uid>` with node-1's topology, writes the PV and the binding to etcd, publishes
 * the volume; the agent mounts it. The claim's request raised, the controller calls
 * ControllerExpandVolume and writes the PV's new capacity, and the agent grows the mounted
 * XFS with NodeExpandVolume and writes the claim's new status.capacity. The pod and the claim deleted, pvc-protection releases the
 * claim once the pod is gone, the volume is detached, DeleteVolume removes the image, and
 * the PV leaves etcd. Every process is ended by its PID.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, statfsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Etcd3 } from 'etcd3';
import { connect } from '../../src/cluster/client.js';
import { readLogEvents } from '../../src/cluster/etcd-log.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import type { VoleEvent } from '../../src/events/index.js';
import { listLoops } from '../../src/host/loop.js';
import { mountsUnder, readMountTable } from '../../src/host/mountinfo.js';
import { vole } from '../support/agent-process.js';
import { EtcdCluster, etcdSkipReason } from '../support/etcd-cluster.js';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';
import { eventually, VoleProcess } from '../support/vole-procs.js';

const skip = hostTestSkipReason() || etcdSkipReason();
const keys = new ClusterKeys('/vole/');
const { base } = skip === false ? hostSandbox('cluster-provision') : { base: '' };
const driverName = 'disk.csi.vole.dev';
const socket = () => join(base, 'csi.sock');
const images = () => join(base, 'state', 'images');
let etcd: EtcdCluster;
let client: Etcd3;
const procs: VoleProcess[] = [];

// XFS: it grows online without CAP_SYS_RESOURCE (ext4's online resize2fs is refused here).
function claimOf(size: string): string {
  return `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  storageClassName: local-disk
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: ${size}}}
`;
}
const storage = `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-disk}
provisioner: ${driverName}
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: true
parameters: {csi.storage.k8s.io/fstype: xfs}
---
${claimOf('300Mi')}`;
const pod = `apiVersion: v1
kind: Pod
metadata: {name: db, namespace: default, uid: uid-db}
spec:
  nodeName: node-1
  containers: [{name: c, volumeMounts: [{name: data, mountPath: /data}]}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
`;

const outputs = () => procs.map((p) => `--- ${p.name} (pid ${p.pid})\n${p.output}`).join('\n');

async function json(key: string): Promise<unknown> {
  return JSON.parse((await client.get(key).string()) ?? 'null');
}

/** The value at a dotted path of a JSON object (`spec.claimRef.uid`), or undefined. */
function at(value: unknown, path: string): unknown {
  return path
    .split('.')
    .reduce<unknown>((x, k) => (x as Record<string, unknown> | null | undefined)?.[k], value);
}

async function controllerLog(): Promise<VoleEvent[]> {
  const events: VoleEvent[] = [];
  await readLogEvents(new EtcdStore(client), keys, 1, (e) => events.push(e));
  return events;
}

function rpcsOf(events: readonly VoleEvent[]): string[] {
  return events.flatMap((e) => {
    const rpc = (e as { rpc?: { method: string } }).rpc;
    return rpc === undefined ? [] : [rpc.method.slice(rpc.method.lastIndexOf('/') + 1)];
  });
}

async function mounts(): Promise<string[]> {
  return mountsUnder(await readMountTable(), base).map((m) => m.mountPoint);
}

async function loopsUnder(): Promise<number> {
  return (await listLoops()).filter((l) => l.backFile.startsWith(images())).length;
}

before(async () => {
  if (skip !== false) return;
  etcd = await EtcdCluster.start();
  client = connect(etcd.urls);
  mkdirSync(join(base, 'state'), { recursive: true });
  const csi = `${driverName}=unix://${socket()}`;
  const driverArgs = ['--endpoint', `unix://${socket()}`, '--node-id', 'node-1'];
  procs.push(
    new VoleProcess(
      'driver',
      ['csi-driver', ...driverArgs, '--state-dir', join(base, 'state'), '--capacity', '1Gi'],
      false,
    ),
  );
  await eventually(() => existsSync(socket()), 'the CSI driver socket', 20_000, outputs);
  const common = ['--etcd', etcd.urls, '--csi', csi];
  procs.push(
    new VoleProcess(
      'c1',
      ['controller', ...common, '--root', join(base, 'c1'), '--identity', 'c1', '--lease-ttl', '3'],
      true,
    ),
    new VoleProcess(
      'node-1',
      ['run', ...common, '--node', 'node-1', '--root', join(base, 'node-1')].concat([
        '--db',
        join(base, 'node-1.db'),
        '--heartbeat-ttl',
        '2',
      ]),
      false,
    ),
  );
  writeFileSync(join(base, 'storage.yaml'), storage);
  writeFileSync(join(base, 'pod.yaml'), pod);
  const applied = vole('apply', '--etcd', etcd.urls, '-f', join(base, 'storage.yaml'));
  assert.equal(applied.status, 0, applied.stderr);
});

after(async () => {
  for (const proc of procs.reverse()) await proc.stop(8_000).catch(() => undefined);
  client?.close();
  await etcd?.stop();
  setTimeout(() => process.exit(process.exitCode ?? 0), 3_000).unref();
});

test(
  'cluster provisioning: WaitForFirstConsumer waits for the pod, then the controller ' +
    'creates, writes and binds the PV on its node',
  { skip, timeout: 120_000 },
  async () => {
    const claim = await json(keys.object('PersistentVolumeClaim', 'data', 'default'));
    const uid = at(claim, 'metadata.uid') as string;
    assert.match(uid ?? '', /^[0-9a-f-]{36}$/, 'vole apply gave the claim a fresh uid');
    const pvName = `pvc-${uid}`;
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    assert.deepEqual(rpcsOf(await controllerLog()), [], 'nothing is created before a consumer');
    const applied = vole('apply', '--etcd', etcd.urls, '-f', join(base, 'pod.yaml'));
    assert.equal(applied.status, 0, applied.stderr);
    const target = join(base, 'node-1', 'pods', 'uid-db', 'volumes', 'kubernetes.io~csi', 'data');
    await eventually(
      async () => (await mounts()).includes(join(target, 'mount')),
      'the provisioned volume mounted on node-1',
      60_000,
      outputs,
    );
    const pv = await json(keys.object('PersistentVolume', pvName));
    assert.equal(at(pv, 'status.phase'), 'Bound');
    assert.equal(at(pv, 'spec.claimRef.uid'), uid);
    const annotations = at(pv, 'metadata.annotations') as Record<string, string> | undefined;
    assert.equal(annotations?.['pv.kubernetes.io/provisioned-by'], driverName);
    assert.deepEqual(
      at(pv, 'spec.nodeAffinity.required.nodeSelectorTerms.0.matchExpressions.0.values'),
      ['node-1'],
    );
    const bound = await json(keys.object('PersistentVolumeClaim', 'data', 'default'));
    assert.equal(at(bound, 'spec.volumeName'), pvName);
    assert.equal(at(bound, 'status.phase'), 'Bound');
    assert.ok(existsSync(join(images(), `${pvName}.img`)), 'the loop disk image was created');
    const started = (await controllerLog()).find(
      (e) => e.type === 'OperationStarted' && e.op === 'provision',
    );
    assert.ok(started?.type === 'OperationStarted');
    assert.deepEqual(started.provision?.requisite, [
      { 'topology.disk.csi.vole.dev/node': 'node-1' },
    ]);
    writeFileSync(join(target, 'mount', 'hello.txt'), 'on a volume the controller made\n');
  },
);

test(
  'cluster expansion: the claim grown, the controller expands the volume and the PV, ' +
    'the agent grows the mounted filesystem',
  { skip, timeout: 120_000 },
  async () => {
    const claim = await json(keys.object('PersistentVolumeClaim', 'data', 'default'));
    const pvName = `pvc-${at(claim, 'metadata.uid') as string}`;
    const target = join(base, 'node-1', 'pods', 'uid-db', 'volumes', 'kubernetes.io~csi', 'data');
    const sizeBytes = () => {
      const fs = statfsSync(join(target, 'mount'));
      return fs.blocks * fs.bsize;
    };
    const before = sizeBytes();
    writeFileSync(join(base, 'grown.yaml'), claimOf('600Mi'));
    const applied = vole('apply', '--etcd', etcd.urls, '-f', join(base, 'grown.yaml'));
    assert.equal(applied.status, 0, applied.stderr);
    await eventually(
      () => sizeBytes() > before + 200 * 2 ** 20,
      'the mounted filesystem grown on node-1',
      60_000,
      outputs,
    );
    const pv = await json(keys.object('PersistentVolume', pvName));
    assert.equal(at(pv, 'spec.capacity.storage'), '600Mi');
    const expanded = (await controllerLog()).filter(
      (e) => e.type === 'CallSucceeded' && e.call === 'controllerExpand',
    );
    assert.equal(expanded.length, 1);
    // The agent records the claim's new capacity once NodeExpandVolume is done (the kubelet's
    // updatePVCStatusCapacity).
    const claimKey = keys.object('PersistentVolumeClaim', 'data', 'default');
    await eventually(
      async () => at(await json(claimKey), 'status.capacity.storage') === '600Mi',
      "the claim's status.capacity at the new size",
      20_000,
      outputs,
    );
    const grown = await json(claimKey);
    assert.equal(at(grown, 'spec.volumeName'), pvName, 'the binding stays');
    assert.equal(at(grown, 'status.phase'), 'Bound');
  },
);

test(
  'cluster provisioning: the pod and the claim deleted, the volume is detached, ' +
    'then DeleteVolume and the PV goes',
  { skip, timeout: 120_000 },
  async () => {
    const claim = await json(keys.object('PersistentVolumeClaim', 'data', 'default'));
    const pvName = `pvc-${at(claim, 'metadata.uid') as string}`;
    for (const file of ['pod.yaml', 'storage.yaml']) {
      const deleted = vole('delete', '--etcd', etcd.urls, '-f', join(base, file));
      assert.equal(deleted.status, 0, deleted.stderr);
    }
    await eventually(
      async () =>
        !existsSync(join(images(), `${pvName}.img`)) &&
        (await json(keys.object('PersistentVolume', pvName))) === null,
      'the image deleted and the PV gone from etcd',
      60_000,
      outputs,
    );
    assert.deepEqual(await mounts(), []);
    assert.equal(await loopsUnder(), 0);
    let rpcs: string[] = [];
    await eventually(
      async () => (rpcs = rpcsOf(await controllerLog())).includes('DeleteVolume'),
      'DeleteVolume in the controller log',
      20_000,
      () => rpcs.join(' '),
    );
    assert.deepEqual(rpcs, [
      'CreateVolume',
      'ControllerPublishVolume',
      'ControllerExpandVolume',
      'ControllerUnpublishVolume',
      'DeleteVolume',
    ]);
    const log = await controllerLog();
    const released = log.findIndex((e) => e.type === 'ClaimFinalizerRemoved');
    const podGone = log.findIndex((e) => e.type === 'PodRemoved');
    assert.ok(podGone > 0 && released > podGone, 'pvc-protection released the claim after the pod');
    assert.equal(await json(keys.object('PersistentVolumeClaim', 'data', 'default')), null);
  },
);
