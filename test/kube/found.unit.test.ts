/**
 * What a new leader finds attached on the API server (another leader's work) and how its
 * world takes it before acting: a Node's volumesAttached is a confirmed attachment, a
 * VolumeAttachment not yet attached an uncertain one; a confirmed one blocks a
 * ReadWriteOnce volume's attach elsewhere (Multi-Attach), an unwanted one is detached, and a
 * CSI attachment the API server no longer shows is dropped.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ControllerManager } from '../../src/agent/controller-manager.js';
import { VirtualClock } from '../../src/clock.js';
import { managedAnnotation } from '../../src/controller/index.js';
import { csiPluginCaps } from '../../src/csi/plugin.js';
import type { Node, PersistentVolume } from '../../src/events/k8s.js';
import { attachmentsFound } from '../../src/kube/found.js';
import type { ApiObject } from '../../src/kube/informer.js';
import { FakePlugin, type FakeCallRecord } from '../../src/plugins/fake.js';
import { claim, pod } from '../support/builders.js';
import { allDesired } from '../../src/controller/types.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-found-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const driver = 'fake.csi';
const unique = (handle: string) => `kubernetes.io/csi/${driver}^${handle}`;

const pv = (handle: string): PersistentVolume => ({
  apiVersion: 'v1',
  kind: 'PersistentVolume',
  metadata: { name: `pv-${handle}` },
  spec: { accessModes: ['ReadWriteOnce'], csi: { driver, volumeHandle: handle } },
});
const pvObject = (handle: string): ApiObject => ({ ...pv(handle), apiVersion: 'v1' });

const va = (handle: string, node: string, attached: boolean, deleting = false): ApiObject => ({
  apiVersion: 'storage.k8s.io/v1',
  kind: 'VolumeAttachment',
  metadata: { name: `va-${handle}-${node}`, ...(deleting ? { deletionTimestamp: 'x' } : {}) },
  spec: { attacher: driver, nodeName: node, source: { persistentVolumeName: `pv-${handle}` } },
  status: { attached },
});

function node(name: string, volumesAttached: string[] = []): Node {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, annotations: { [managedAnnotation]: 'true' } },
    status: {
      conditions: [{ type: 'Ready', status: 'True' }],
      volumesInUse: [],
      volumesAttached: volumesAttached.map((name) => ({ name, devicePath: '' })),
    },
  };
}

test('found: volumesAttached confirms, a VolumeAttachment says as its status, one entry per pair', () => {
  const found = attachmentsFound(
    [node('n1', [unique('d1'), 'kubernetes.io/csi/other^x']) as unknown as ApiObject],
    [pvObject('d1'), pvObject('d2'), pvObject('d3')],
    [va('d1', 'n1', false), va('d2', 'n2', false), va('d3', 'n1', true, true)],
  );
  assert.deepEqual(found, [
    { volume: unique('d1'), node: 'n1', pv: 'pv-d1', attached: true },
    { volume: unique('d2'), node: 'n2', pv: 'pv-d2', attached: false },
    // Being deleted: a detach not finished, not a confirmed attachment.
    { volume: unique('d3'), node: 'n1', pv: 'pv-d3', attached: false },
  ]);
});

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
async function settle() {
  for (let i = 0; i < 30; i++) await turn();
}

test('a new leader adopts what it found before acting on its pods', async () => {
  const journal: FakeCallRecord[] = [];
  const clock = new VirtualClock(0);
  const caps = csiPluginCaps(driver, {
    publishUnpublish: true,
    stageUnstage: false,
    expand: false,
    singleNodeMultiWriter: false,
    maxVolumesPerNode: 0,
  });
  const cm = ControllerManager.open({
    db: join(dir, 'a.db'),
    plugins: [new FakePlugin({ caps, clock, journal })],
    clock,
    durability: 'normal',
    verifyAttachments: false,
  });
  cm.start();
  cm.upsertObject(node('n1', [unique('d1')]));
  cm.upsertObject(node('n2'));
  for (const handle of ['d1', 'd2']) {
    cm.upsertObject(pv(handle));
    cm.upsertObject({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: `claim-${handle}`, namespace: 'default' },
      spec: { volumeName: `pv-${handle}` },
      status: { phase: 'Bound' },
    });
  }
  cm.attachmentsFound([
    { volume: unique('d1'), node: 'n1', pv: 'pv-d1', attached: true },
    { volume: unique('d2'), node: 'n1', pv: 'pv-d2', attached: false },
  ]);
  // Pods: d1 wanted on n1 (where it is) and on n2 (refused); d2 wanted nowhere.
  const on = (uid: string, handle: string, nodeName: string) => {
    const p = pod(uid, [claim(handle)]);
    return { ...p, spec: { ...p.spec, nodeName } };
  };
  cm.upsertPod(on('uid-a', 'd1', 'n1'));
  cm.upsertPod(on('uid-b', 'd1', 'n2'));
  await settle();
  assert.deepEqual(
    journal.map((c) => `${c.call} ${c.volume} ${c.node}`),
    [`detach ${unique('d2')} n1`],
    'no attach of d1 anywhere (confirmed on n1); the uncertain, unwanted d2 is detached',
  );
  assert.deepEqual(
    cm.volumesAttached('n1').map((v) => v.name),
    [unique('d1')],
  );
  assert.deepEqual(cm.volumesAttached('n2'), []);
  const refused = [...allDesired(cm.world)].find((d) => d.node === 'n2');
  assert.equal(refused?.multiAttachErrorReported, true, 'the Multi-Attach error is reported');

  // Found again without d1 (a VolumeAttachment gone under it): dropped, then attached to
  // n2 once n1's pod is gone.
  cm.removePod('uid-a');
  cm.attachmentsFound([]);
  await settle();
  assert.deepEqual(cm.volumesAttached('n1'), []);
  assert.equal(journal.at(-1)?.call, 'attach');
  assert.equal(journal.at(-1)?.node, 'n2');
  await cm.drainAndStop();
});
