import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { diffManifests, identitiesOf, readManifestDir } from '../../src/sources/manifests.js';

function dirWith(files: Record<string, string | Buffer>): string {
  const dir = mkdtempSync(join(tmpdir(), 'vole-manifests-'));
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  return dir;
}

const podYaml = (name: string, extra = '') => `apiVersion: v1
kind: Pod
metadata: {name: ${name}, namespace: default${extra}}
spec:
  volumes: [{name: scratch, emptyDir: {}}]
`;

test('sources: manifests: pods, PVs and claims from multi-document files', () => {
  const dir = dirWith({
    'a.yaml': `${podYaml('web')}---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv-1}\nspec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], csi: {driver: disk.vole.dev, volumeHandle: d1}}\n`,
    'b.json': JSON.stringify({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'c', namespace: 'default' },
      spec: {
        volumeName: 'pv-1',
        accessModes: ['ReadWriteOnce'],
        resources: { requests: { storage: '1Gi' } },
      },
    }),
    'ignored.txt': 'not a manifest',
  });
  try {
    const set = readManifestDir(dir);
    assert.deepEqual(set.problems, []);
    const [uid] = [...set.pods.keys()];
    assert.match(uid ?? '', /^[0-9a-f-]{36}$/, 'a pod without metadata.uid gets a fresh UUID');
    assert.equal(set.pods.get(uid!)?.metadata.uid, uid);
    assert.deepEqual([...set.objects.keys()].sort(), [
      'PersistentVolume//pv-1',
      'PersistentVolumeClaim/default/c',
    ]);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test('sources: manifests: a bad file is reported by name and field, the others are used', () => {
  const dir = dirWith({
    'good.yaml': podYaml('ok'),
    'broken.yaml': 'kind: Pod\nmetadata: {name: [unclosed\n',
    'nokind.yaml': 'metadata: {name: x}\n',
    'badfield.yaml':
      'apiVersion: v1\nkind: Pod\nmetadata: {name: y}\nspec: {volumes: [{name: 42}]}\n',
    'hostile.yaml': podYaml('evil', ', uid: "../../etc"'),
    'dup.yaml': `${podYaml('d1', ', uid: same')}---\n${podYaml('d2', ', uid: same')}`,
    'latin1.yaml': Buffer.from([0x6b, 0x69, 0x6e, 0x64, 0x3a, 0x20, 0xff, 0xfe, 0x0a]),
  });
  try {
    const set = readManifestDir(dir);
    const byFile = (name: string) =>
      set.problems
        .filter((p) => p.file.includes(name))
        .map((p) => p.message)
        .join(' | ');
    assert.match(byFile('broken.yaml'), /not valid YAML/);
    assert.match(byFile('nokind.yaml'), /without a kind/);
    assert.match(byFile('badfield.yaml'), /Pod "default\/y" is invalid: spec\.volumes\[0\]\.name/);
    assert.match(byFile('hostile.yaml'), /metadata\.uid "\.\.\/\.\.\/etc" must be/);
    assert.match(byFile('dup.yaml'), /pod UID same is used twice/);
    assert.match(byFile('latin1.yaml'), /not valid UTF-8/);
    assert.deepEqual([...set.pods.values()].map((p) => p.metadata.name).sort(), ['d1', 'ok']);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

const pvYaml = (name: string, size: string) => `apiVersion: v1
kind: PersistentVolume
metadata: {name: ${name}}
spec: {capacity: {storage: ${size}}, accessModes: [ReadWriteOnce], csi: {driver: disk.vole.dev, volumeHandle: ${name}}}
`;

test('sources: manifests: diff reports pods and objects added, changed and removed', () => {
  const before = readManifestDir(
    dirWith({
      'a.yaml': podYaml('a'),
      'b.yaml': podYaml('b'),
      'pv-1.yaml': pvYaml('pv-1', '1Gi'),
      'pv-2.yaml': pvYaml('pv-2', '1Gi'),
    }),
  );
  const after = readManifestDir(
    dirWith({
      'a.yaml': podYaml('a'),
      'b.yaml': podYaml('b', ', labels: {v: "2"}'),
      'c.yaml': podYaml('c'),
      'pv-1.yaml': pvYaml('pv-1', '2Gi'),
      'pv-3.yaml': pvYaml('pv-3', '1Gi'),
    }),
    identitiesOf(before),
  );
  const changes = diffManifests(before, after);
  assert.deepEqual(changes.upsertPods.map((p) => p.metadata.name).sort(), ['b', 'c']);
  assert.deepEqual(changes.removePods, []);
  // Objects come in lists of their own: the sources apply them before the pods.
  assert.deepEqual(changes.upsertObjects.map((o) => o.metadata.name).sort(), ['pv-1', 'pv-3']);
  assert.deepEqual(changes.removeObjects, [{ kind: 'PersistentVolume', name: 'pv-2' }]);
  const gone = diffManifests(
    after,
    readManifestDir(dirWith({ 'a.yaml': podYaml('a') }), identitiesOf(after)),
  );
  const uidOf = (name: string) =>
    [...after.pods].find(([, p]) => p.metadata.name === name)?.[0] ?? '';
  assert.deepEqual(gone.removePods.sort(), [uidOf('b'), uidOf('c')].sort());
  assert.deepEqual(gone.removeObjects.map((o) => o.name).sort(), ['pv-1', 'pv-3']);
  assert.deepEqual(diffManifests(after, after).upsertObjects, [], 'nothing changed, nothing sent');
});

test('sources: manifests: a pod without a UID gets a fresh one, kept while it exists', () => {
  // As the API server: the UID is given when the object is created; an update keeps it; a
  // pod deleted and created again is a new pod (its emptyDir must not outlive the old one).
  const dir = dirWith({ 'web.yaml': podYaml('web') });
  try {
    const first = readManifestDir(dir);
    const [uid] = [...first.pods.keys()];
    const again = readManifestDir(dir, identitiesOf(first));
    assert.deepEqual([...again.pods.keys()], [uid], 'the same pod keeps its UID');
    assert.deepEqual(diffManifests(first, again).upsertPods, [], 'nothing changed');
    rmSync(join(dir, 'web.yaml'));
    const gone = readManifestDir(dir, identitiesOf(again));
    assert.deepEqual(diffManifests(again, gone).removePods, [uid]);
    writeFileSync(join(dir, 'web.yaml'), podYaml('web'));
    const back = readManifestDir(dir, identitiesOf(gone));
    const [newUid] = [...back.pods.keys()];
    assert.notEqual(newUid, uid, 'created again: a new pod with a new UID');
    assert.deepEqual(
      diffManifests(gone, back).upsertPods.map((p) => p.metadata.uid),
      [newUid],
    );
    writeFileSync(join(dir, 'twin.yaml'), podYaml('web'));
    const twice = readManifestDir(dir, identitiesOf(back));
    assert.match(twice.problems.map((p) => p.message).join(), /pod default\/web is defined twice/);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

const claimYaml = (name: string) => `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ${name}, namespace: default}
spec: {storageClassName: fast, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`;

test('sources: manifests: a claim without a UID gets a fresh one, kept while it exists', () => {
  // The API server gives every object its UID when it first appears; a claim deleted and
  // created again is a new claim, so its provisioned volume pvc-<uid> is a new volume.
  const dir = dirWith({ 'data.yaml': claimYaml('data') });
  const claimUid = (set: ReturnType<typeof readManifestDir>) =>
    set.objects.get('PersistentVolumeClaim/default/data')?.metadata.uid;
  try {
    const first = readManifestDir(dir);
    const uid = claimUid(first);
    assert.match(uid ?? '', /^[0-9a-f-]{36}$/, 'a fresh random UID');
    assert.ok(
      first.assignedUids?.has(uid!),
      'recorded as assigned, so vole apply keeps a stored one',
    );
    assert.notEqual(claimUid(readManifestDir(dir)), uid, 'never derived from the name');
    const again = readManifestDir(dir, identitiesOf(first));
    assert.equal(claimUid(again), uid, 'the same claim keeps its UID');
    assert.deepEqual(diffManifests(first, again).upsertObjects, [], 'nothing changed');
    rmSync(join(dir, 'data.yaml'));
    const gone = readManifestDir(dir, identitiesOf(again));
    writeFileSync(join(dir, 'data.yaml'), claimYaml('data'));
    const back = readManifestDir(dir, identitiesOf(gone));
    assert.notEqual(claimUid(back), uid, 'created again: a new claim with a new UID');
    assert.deepEqual(
      diffManifests(gone, back).upsertObjects.map((o) => o.metadata.uid),
      [claimUid(back)],
    );
    writeFileSync(
      join(dir, 'given.yaml'),
      claimYaml('given').replace('namespace: default', 'namespace: default, uid: c-7'),
    );
    const given = readManifestDir(dir, identitiesOf(back));
    assert.equal(given.objects.get('PersistentVolumeClaim/default/given')?.metadata.uid, 'c-7');
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test('sources: manifests: any text in a file gives problems or pods, never an exception', () => {
  fc.assert(
    fc.property(fc.string({ maxLength: 300 }), (text) => {
      const dir = dirWith({ 'fuzz.yaml': text });
      try {
        const set = readManifestDir(dir);
        assert.ok(set.problems.length + set.pods.size + set.objects.size >= 0);
      } finally {
        rmSync(dir, { recursive: true });
      }
    }),
    { numRuns: 200 },
  );
});
