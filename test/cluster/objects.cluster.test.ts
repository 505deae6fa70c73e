/** `vole apply|get|delete --etcd` against a real 3-member etcd, checked with etcdctl. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { RealClock } from '../../src/clock.js';
import { connect } from '../../src/cluster/client.js';
import { EtcdStore } from '../../src/cluster/store-etcd.js';
import { listPrefix, PrefixInformer } from '../../src/cluster/informer.js';
import { EtcdCluster, etcdSkipReason } from '../support/etcd-cluster.js';
import { vole } from '../support/agent-process.js';

const skip = etcdSkipReason();
const repo = join(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'vole-objects-'));
let etcd: EtcdCluster;
before(async () => {
  if (skip === false) etcd = await EtcdCluster.start();
});
after(async () => {
  await etcd?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test(
  'vole apply writes validated objects whose resourceVersion is the etcd mod revision; get and delete read and remove them',
  { skip },
  () => {
    const manifests = join(repo, 'examples/controller/cluster.yaml');
    const applied = vole('apply', '--etcd', etcd.urls, '-f', manifests);
    assert.equal(applied.status, 0, applied.stderr);
    assert.match(applied.stdout, /pod\/default\/api created/);
    assert.match(applied.stdout, /persistentvolume\/pv-shared-data created/);
    const again = vole('apply', '--etcd', etcd.urls, '-f', manifests);
    assert.match(again.stdout, /pod\/default\/api unchanged/);
    // What etcdctl sees: the pod under its node, without a resourceVersion.
    const raw = etcd.etcdctl('get', '/vole/pods/node-1/default/api', '-w', 'json');
    const kv = (JSON.parse(raw) as { kvs: { mod_revision: number; value: string }[] }).kvs[0]!;
    const stored = JSON.parse(Buffer.from(kv.value, 'base64').toString()) as {
      metadata: { uid: string };
    };
    assert.equal(stored.metadata.uid, '2b7f-api');
    const pods = vole('get', 'pods', '--etcd', etcd.urls, '--json');
    assert.equal(pods.status, 0, pods.stderr);
    const listed = JSON.parse(pods.stdout) as {
      name: string;
      node: string;
      resourceVersion: string;
    }[];
    assert.deepEqual(listed, [
      {
        namespace: 'default',
        name: 'api',
        node: 'node-1',
        uid: '2b7f-api',
        resourceVersion: String(kv.mod_revision),
      },
    ]);
    assert.match(vole('get', 'nodes', '--etcd', etcd.urls).stdout, /node-1[\s\S]*node-2/);

    const deleted = vole('delete', '--etcd', etcd.urls, '-f', manifests);
    assert.equal(deleted.status, 0, deleted.stderr);
    assert.match(deleted.stdout, /pod\/default\/api deleted/);
    // The claim has the pvc-protection finalizer (admission): deleted, it is only marked,
    // and no controller runs here to remove the finalizer; it is removed by hand.
    const claimKey = '/vole/objects/PersistentVolumeClaim/default/shared-data';
    assert.equal(etcd.etcdctl('get', '--prefix', '/vole/', '--keys-only').trim(), claimKey);
    const claim = JSON.parse(etcd.etcdctl('get', claimKey, '--print-value-only')) as {
      metadata: { deletionTimestamp?: string; finalizers?: string[] };
    };
    assert.match(claim.metadata.deletionTimestamp ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.deepEqual(claim.metadata.finalizers, ['kubernetes.io/pvc-protection']);
    etcd.etcdctl('del', claimKey);
  },
);

test(
  'vole apply refuses an invalid manifest, writing nothing, and says which field',
  { skip },
  () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(
      bad,
      'apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv-x}\nspec: {capacity: 12}\n',
    );
    const result = vole('apply', '--etcd', etcd.urls, '-f', bad);
    assert.equal(result.status, 2);
    assert.match(result.stderr, /nothing applied; fix these manifests first:[\s\S]*bad\.yaml/);
    assert.equal(etcd.etcdctl('get', '--prefix', '/vole/', '--keys-only').trim(), '');
    const unreachable = vole('get', 'pods', '--etcd', 'not-a-url');
    assert.equal(unreachable.status, 2);
    assert.match(unreachable.stderr, /is not a client URL/);
  },
);

test(
  'an informer lists, watches, and lists again after its revision is compacted away',
  { skip },
  async () => {
    const client = connect(etcd.urls);
    const seen = new Map<string, string>();
    let resets = 0;
    const informer = new PrefixInformer(
      new EtcdStore(client),
      '/inf/',
      {
        reset: (kvs) => {
          resets++;
          seen.clear();
          for (const kv of kvs) seen.set(kv.key.toString(), kv.value.toString());
        },
        put: (kv) => seen.set(kv.key.toString(), kv.value.toString()),
        delete: (key) => seen.delete(key),
      },
      new RealClock(),
    );
    try {
      await client.put('/inf/a').value('1');
      await informer.start();
      assert.deepEqual([...seen], [['/inf/a', '1']]);
      await client.put('/inf/b').value('2');
      await client.delete().key('/inf/a');
      const wait = async (ok: () => boolean) => {
        for (let i = 0; i < 100 && !ok(); i++) await new Promise((r) => setTimeout(r, 50));
        assert.ok(ok());
      };
      await wait(() => seen.size === 1 && seen.get('/inf/b') === '2');
      assert.equal(resets, 1);
      // Stop the watch behind etcd's back: changes happen, then their revisions are compacted.
      await (informer as unknown as { watcher: { cancel(): Promise<void> } }).watcher.cancel();
      await client.put('/inf/c').value('3');
      const rev = Number((await client.put('/inf/d').value('4')).header.revision);
      await client.delete().key('/inf/b');
      etcd.etcdctl('compact', String(rev + 1));
      // The informer resumes from its old revision, finds it compacted and lists again.
      (informer as unknown as { restart(why: string): void }).restart('test: stream ended');
      await wait(() => seen.size === 2 && seen.get('/inf/c') === '3' && seen.get('/inf/d') === '4');
      assert.equal(resets, 2, 'a second list after the compaction');
    } finally {
      await informer.stop();
      client.close();
    }
  },
);

test(
  'listPrefix reads every key once, in order, at one revision, through pages over guessed bounded ranges',
  { skip },
  async () => {
    const client = connect(etcd.urls);
    try {
      // Irregular key space: unpadded numbers, names of several lengths, a sparse stretch and a dense one.
      const names: string[] = [];
      for (let i = 0; i < 1_500; i++) names.push(`pods/node-${i % 7}/default/pod-${i}`);
      for (let i = 0; i < 40; i++) names.push(`pods/a${'x'.repeat(i)}/ns/p`);
      for (let i = 0; i < 600; i++)
        names.push(`pods/zz/ns/${String.fromCharCode(97 + (i % 26))}${i}`);
      for (let i = 0; i < names.length; i += 100)
        await client
          .if('/lst/pods/', 'Mod', '>', -1)
          .then(...names.slice(i, i + 100).map((n) => client.put(`/lst/${n}`).value(n)))
          .commit();
      const { revision } = await listPrefix(new EtcdStore(client), '/lst/', { pageKeys: 40 });
      await client.put('/lst/pods/node-0/default/later').value('after the list');
      const { kvs } = await listPrefix(new EtcdStore(client), '/lst/', { revision, pageKeys: 40 });
      const want = [...names]
        .map((n) => `/lst/${n}`)
        .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
      assert.deepEqual(
        kvs.map((kv) => kv.key.toString()),
        want,
      );
      const now = await listPrefix(new EtcdStore(client), '/lst/', { pageKeys: 7 });
      assert.equal(now.kvs.length, names.length + 1);
    } finally {
      client.close();
    }
  },
);

test(
  'vole apply: a pod without metadata.uid keeps its stored UID when applied again; deleted and applied again, a new one',
  { skip },
  () => {
    const file = join(dir, 'no-uid.yaml');
    writeFileSync(
      file,
      'apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default}\n' +
        'spec: {nodeName: node-1, volumes: [{name: s, emptyDir: {}}]}\n',
    );
    const uidNow = () => {
      const raw = etcd.etcdctl('get', '/vole/pods/node-1/default/web', '--print-value-only');
      return (JSON.parse(raw) as { metadata: { uid: string } }).metadata.uid;
    };
    assert.match(
      vole('apply', '--etcd', etcd.urls, '-f', file).stdout,
      /pod\/default\/web created/,
    );
    const first = uidNow();
    assert.match(first, /^[0-9a-f-]{36}$/);
    assert.match(
      vole('apply', '--etcd', etcd.urls, '-f', file).stdout,
      /pod\/default\/web unchanged/,
    );
    assert.equal(uidNow(), first, 'an update keeps the UID, as the API server does');
    assert.equal(vole('delete', '--etcd', etcd.urls, '-f', file).status, 0);
    assert.match(
      vole('apply', '--etcd', etcd.urls, '-f', file).stdout,
      /pod\/default\/web created/,
    );
    assert.notEqual(uidNow(), first, 'created again: a new pod');
    assert.equal(vole('delete', '--etcd', etcd.urls, '-f', file).status, 0);
  },
);

test(
  'vole apply: a claim without metadata.uid keeps its stored UID when applied again; ' +
    'deleted and applied again, a new one',
  { skip },
  () => {
    const file = join(dir, 'claim-no-uid.yaml');
    writeFileSync(
      file,
      'apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: default}\n' +
        'spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n',
    );
    const key = '/vole/objects/PersistentVolumeClaim/default/data';
    const uidNow = () =>
      (JSON.parse(etcd.etcdctl('get', key, '--print-value-only')) as { metadata: { uid: string } })
        .metadata.uid;
    assert.match(
      vole('apply', '--etcd', etcd.urls, '-f', file).stdout,
      /persistentvolumeclaim\/default\/data created/,
    );
    const first = uidNow();
    assert.match(first, /^[0-9a-f-]{36}$/);
    assert.match(
      vole('apply', '--etcd', etcd.urls, '-f', file).stdout,
      /persistentvolumeclaim\/default\/data unchanged/,
    );
    assert.equal(uidNow(), first, 'an update keeps the UID (its volume stays pvc-<uid>)');
    assert.equal(vole('delete', '--etcd', etcd.urls, '-f', file).status, 0);
    // Only marked (pvc-protection); applied again while being deleted, it is the same claim.
    vole('apply', '--etcd', etcd.urls, '-f', file);
    assert.equal(uidNow(), first, 'still being deleted: the same claim');
    etcd.etcdctl('del', key); // the finalizer's removal (no controller runs here)
    vole('apply', '--etcd', etcd.urls, '-f', file);
    assert.notEqual(uidNow(), first, 'created again: a new claim, a new volume');
    assert.equal(vole('delete', '--etcd', etcd.urls, '-f', file).status, 0);
    etcd.etcdctl('del', key);
  },
);
