/**
 * Claims are bound by the control plane, not by node agents: on a real 3-member etcd, two
 * pods' claims are applied unbound; a node agent alone binds nothing (its log has no
 * ClaimBound, etcd's claims stay Pending, nothing is mounted); once a controller replica
 * leads, it binds each claim by the persistent-volume controller's rules (the smallest
 * match, a PV's claimRef honoured), records ClaimBound in its log in etcd and writes the
 * bound claim and PV to etcd, fenced; the agent reads the bindings and mounts.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Etcd3 } from 'etcd3';
import { connect } from '../../src/cluster/client.js';
import { readLogEvents } from '../../src/cluster/etcd-log.js';
import { ClusterKeys } from '../../src/cluster/keys.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import type { VoleEvent } from '../../src/events/index.js';
import { readMountTable } from '../../src/host/mountinfo.js';
import { openReadonly } from '../../src/postmortem/open.js';
import { EtcdCluster, etcdSkipReason } from '../support/etcd-cluster.js';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';
import { vole } from '../support/agent-process.js';
import { eventually, VoleProcess } from '../support/vole-procs.js';

const skip = hostTestSkipReason() || etcdSkipReason();
const keys = new ClusterKeys('/vole/');
const { base } = skip === false ? hostSandbox('binding') : { base: '' };
const db = () => join(base, 'node-1', 'vole.db');
let etcd: EtcdCluster;
let client: Etcd3;
const procs: VoleProcess[] = [];

/** Three hostPath PVs: 16Mi, 32Mi, and a 64Mi one reserved (claimRef) for claim b. */
function manifests(): string {
  const pv = (name: string, size: string, extra = '') => `apiVersion: v1
kind: PersistentVolume
metadata: {name: ${name}}
spec:
  capacity: {storage: ${size}}
  accessModes: [ReadWriteOnce]
  hostPath: {path: ${join(base, 'hp', name)}, type: DirectoryOrCreate}${extra}
---
`;
  const claim = (name: string, size: string) => `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ${name}, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: ${size}}}
---
`;
  const pod = (name: string, claimName: string) => `apiVersion: v1
kind: Pod
metadata: {name: ${name}, namespace: default, uid: uid-${name}}
spec:
  nodeName: node-1
  volumes: [{name: data, persistentVolumeClaim: {claimName: ${claimName}}}]
---
`;
  return [
    pv('pv-small', '16Mi'),
    pv('pv-medium', '32Mi'),
    pv('pv-reserved', '64Mi', '\n  claimRef: {namespace: default, name: b}'),
    claim('a', '20Mi'),
    claim('b', '10Mi'),
    pod('pod-a', 'a'),
    pod('pod-b', 'b'),
  ].join('');
}

async function stored<T>(key: string): Promise<T> {
  return JSON.parse((await client.get(key).string()) ?? 'null') as T;
}

interface Claim {
  spec: { volumeName?: string };
  status?: { phase?: string; capacity?: { storage?: string } };
}
interface Volume {
  spec: { claimRef?: { name?: string; namespace?: string } };
  status?: { phase?: string };
}

const claimKey = (name: string) => keys.object('PersistentVolumeClaim', name, 'default');
const volumeKey = (name: string) => keys.object('PersistentVolume', name);

function agentEvents(): VoleEvent[] {
  if (!existsSync(db())) return [];
  const store = openReadonly(db());
  try {
    return [...store.read()];
  } finally {
    store.close();
  }
}

async function mountedPods(): Promise<string[]> {
  const table = await readMountTable();
  const pods = ['pod-a', 'pod-b'].filter((p) =>
    table.some((m) => m.mountPoint.includes(`/pods/uid-${p}/volumes/`)),
  );
  return pods;
}

const outputs = () => procs.map((p) => `--- ${p.name}\n${p.output}`).join('\n');

before(async () => {
  if (skip !== false) return;
  etcd = await EtcdCluster.start();
  client = connect(etcd.urls);
  mkdirSync(join(base, 'node-1'), { recursive: true });
  writeFileSync(join(base, 'cluster.yaml'), manifests());
  const applied = vole('apply', '--etcd', etcd.urls, '-f', join(base, 'cluster.yaml'));
  assert.equal(applied.status, 0, applied.stderr);
});

after(async () => {
  for (const proc of procs) await proc.stop(8_000).catch(() => undefined);
  client?.close();
  await etcd?.stop();
  setTimeout(() => process.exit(process.exitCode ?? 0), 3_000).unref();
});

test(
  'cluster: a node agent alone binds no claim; its pods wait for the controller',
  { skip, timeout: 60_000 },
  async () => {
    const agent = new VoleProcess(
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
        db(),
        '--heartbeat-ttl',
        '2',
      ],
      false,
    );
    procs.push(agent);
    // Once the agent's log holds both claims and both pods, its planner has looked at them.
    await eventually(
      () => {
        let events: VoleEvent[];
        try {
          events = agentEvents();
        } catch {
          return false; // the agent is still creating its log
        }
        const claims = events.filter(
          (e) => e.type === 'ObjectUpserted' && e.object.kind === 'PersistentVolumeClaim',
        );
        return claims.length >= 2 && events.filter((e) => e.type === 'PodUpserted').length >= 2;
      },
      'the agent to take in both claims and both pods',
      30_000,
      outputs,
    );
    await new Promise((r) => setTimeout(r, 500));
    const events = agentEvents();
    assert.equal(
      events.find((e) => e.type === 'EngineStarted' && e.bindClaims === false)?.type,
      'EngineStarted',
    );
    assert.deepEqual(
      events.filter((e) => e.type === 'ClaimBound'),
      [],
    );
    for (const name of ['a', 'b']) {
      const claim = await stored<Claim>(claimKey(name));
      assert.equal(claim.spec.volumeName, undefined);
      assert.equal(claim.status, undefined);
    }
    assert.deepEqual(await mountedPods(), []);
  },
);

test(
  'cluster: the leading controller binds both claims (smallest match, claimRef honoured), writes them to etcd, and the agent mounts',
  { skip, timeout: 60_000 },
  async () => {
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
        ],
        true,
      ),
    );
    await eventually(
      async () => (await mountedPods()).length === 2,
      'both pods mounted on node-1',
      40_000,
      outputs,
    );

    const a = await stored<Claim>(claimKey('a'));
    assert.equal(a.spec.volumeName, 'pv-medium', 'the smallest PV that satisfies 20Mi');
    assert.equal(a.status?.phase, 'Bound');
    assert.equal(a.status?.capacity?.storage, '32Mi');
    const b = await stored<Claim>(claimKey('b'));
    assert.equal(
      b.spec.volumeName,
      'pv-reserved',
      'the PV whose claimRef names b, not the smaller pv-small',
    );
    assert.equal(b.status?.phase, 'Bound');
    const medium = await stored<Volume>(volumeKey('pv-medium'));
    assert.deepEqual(
      [medium.spec.claimRef?.namespace, medium.spec.claimRef?.name, medium.status?.phase],
      ['default', 'a', 'Bound'],
    );
    const small = await stored<Volume>(volumeKey('pv-small'));
    assert.equal(small.spec.claimRef, undefined);
    assert.equal(small.status, undefined);

    const pvcs = vole('get', 'pvcs', '--etcd', etcd.urls);
    assert.match(pvcs.stdout, /^NAMESPACE\s+NAME\s+STATUS\s+VOLUME\s+RESOURCEVERSION$/m);
    assert.match(pvcs.stdout, /^default\s+a\s+Bound\s+pv-medium\s+\d+$/m);
    assert.match(vole('get', 'pvs', '--etcd', etcd.urls).stdout, /^pv-small\s+Available\s+\d+$/m);

    // The decisions are the controller's, in its log in etcd; the agent's log has none.
    const controllerLog: VoleEvent[] = [];
    await readLogEvents(new EtcdStore(client), keys, 1, (e) => controllerLog.push(e));
    const bound = controllerLog.flatMap((e) =>
      e.type === 'ClaimBound' ? [`${e.claim}=${e.volume}`] : [],
    );
    assert.deepEqual(bound.sort(), ['a=pv-medium', 'b=pv-reserved']);
    assert.deepEqual(
      agentEvents().filter((e) => e.type === 'ClaimBound'),
      [],
    );
    // A file written through pod-a's mount lands in pv-medium's directory.
    const target = join(
      base,
      'node-1',
      'pods',
      'uid-pod-a',
      'volumes',
      'kubernetes.io~host-path',
      'pv-medium',
      'hello',
    );
    writeFileSync(target, 'through the binding');
    assert.equal(
      readFileSync(join(base, 'hp', 'pv-medium', 'hello'), 'utf8'),
      'through the binding',
    );
  },
);

test(
  'cluster: the original manifests applied again keep the bindings; pods deleted, nothing stays mounted',
  { skip, timeout: 60_000 },
  async () => {
    const again = vole('apply', '--etcd', etcd.urls, '-f', join(base, 'cluster.yaml'));
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stdout, /persistentvolumeclaim\/default\/a unchanged/);
    assert.match(again.stdout, /persistentvolume\/pv-medium unchanged/);
    assert.equal((await stored<Claim>(claimKey('a'))).spec.volumeName, 'pv-medium');

    writeFileSync(
      join(base, 'pods.yaml'),
      manifests()
        .split('---\n')
        .filter((d) => d.includes('kind: Pod'))
        .join('---\n'),
    );
    const deleted = vole('delete', '--etcd', etcd.urls, '-f', join(base, 'pods.yaml'));
    assert.equal(deleted.status, 0, deleted.stderr);
    await eventually(
      async () => (await mountedPods()).length === 0,
      'both pods unmounted',
      30_000,
      outputs,
    );
    for (const proc of procs) await proc.stop();
    const verified = vole('verify', '--db', db());
    assert.equal(verified.status, 0, verified.stdout + verified.stderr);
  },
);
