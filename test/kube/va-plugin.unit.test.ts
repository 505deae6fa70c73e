/**
 * The controller's CSI plugin on the API: attach creates the VolumeAttachment Kubernetes'
 * CSI attacher would (name and shape) and waits for status.attached; an attachError fails
 * it, uncertain; detach deletes and waits until it is gone; nothing is written once the
 * fence refuses; attachRequired false makes a plugin with no attacher.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RealClock } from '../../src/clock.js';
import { UniqueVolumeName } from '../../src/ids.js';
import { volumeAttachmentName } from '../../src/kube/attachments.js';
import { type JsonObject, KubeApiError } from '../../src/kube/http.js';
import { vaPlugin, VolumeAttachmentCache } from '../../src/kube/va-plugin.js';
import { PluginError } from '../../src/plugins/types.js';
import type { ResolvedVolume } from '../../src/operations/volume-spec.js';
import { volumeTraits } from '../../src/operations/volume-traits.js';

const spec: ResolvedVolume = {
  outerVolumeSpecName: 'data',
  innerVolumeSpecName: 'data-pv',
  volume: UniqueVolumeName('kubernetes.io/csi/d.csi^vol-1'),
  traits: volumeTraits({
    pluginName: 'd.csi',
    attachable: true,
    deviceMountable: true,
    requiresRemount: false,
    multiAttachAllowed: false,
    volumeMode: 'Filesystem',
    sizeBytes: 0,
    claimSizeBytes: 0,
    volumeGidValue: '',
    readOnly: false,
    accessModes: ['ReadWriteOnce'],
  }),
  source: { kind: 'csi', driver: 'd.csi', volumeHandle: 'vol-1', fsType: '', inline: false },
};
const name = volumeAttachmentName('vol-1', 'd.csi', 'node-1');
const target = () => ({ node: 'node-1', pod: null, signal: new AbortController().signal });

function setup(fence: () => Promise<void> = () => Promise.resolve()) {
  const cache = new VolumeAttachmentCache(new RealClock());
  const calls: { method: string; path: string; body?: JsonObject }[] = [];
  const http = {
    post: (path: string, body: unknown) => {
      calls.push({ method: 'POST', path, body: body as JsonObject });
      return Promise.resolve(body as JsonObject);
    },
    delete: (path: string) => {
      calls.push({ method: 'DELETE', path });
      return Promise.resolve({});
    },
  };
  const plugin = vaPlugin('d.csi', true, { http, cache, fence, timeoutMs: 2000 });
  const va = (status: object) => ({
    kind: 'VolumeAttachment',
    apiVersion: 'storage.k8s.io/v1',
    metadata: { name },
    status,
  });
  return { cache, calls, attacher: plugin.attacher!, va };
}

test('attach: the VolumeAttachment as Kubernetes makes it, done when attached', async () => {
  const { cache, calls, attacher, va } = setup();
  const attached = attacher.attach(spec, target());
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(calls, [
    {
      method: 'POST',
      path: '/apis/storage.k8s.io/v1/volumeattachments',
      body: {
        apiVersion: 'storage.k8s.io/v1',
        kind: 'VolumeAttachment',
        metadata: { name },
        spec: {
          attacher: 'd.csi',
          nodeName: 'node-1',
          source: { persistentVolumeName: 'data-pv' },
        },
      },
    },
  ]);
  cache.set(va({ attached: false }));
  cache.set(va({ attached: true }));
  assert.equal(await attached, '', 'devicePath empty, as Kubernetes returns it for CSI');
  const answer = await attacher.volumesAreAttached([spec], target());
  assert.equal(answer.get(spec.volume), true);
});

test('attach: an attachError from the external-attacher fails it, uncertain', async () => {
  const { cache, attacher, va } = setup();
  const attached = attacher.attach(spec, target());
  cache.set(va({ attached: false, attachError: { message: 'no such disk' } }));
  await assert.rejects(
    attached,
    (e: unknown) =>
      e instanceof PluginError && e.kind === 'uncertain' && /no such disk/.test(e.message),
  );
});

test('attach: an existing VolumeAttachment (409) is waited for, not an error', async () => {
  const { cache, va } = setup();
  const http409 = vaPlugin('d.csi', true, {
    http: {
      post: () => Promise.reject(new KubeApiError(409, 'AlreadyExists', 'exists')),
      delete: () => Promise.resolve({}),
    },
    cache,
    fence: () => Promise.resolve(),
  });
  cache.set(va({ attached: true }));
  assert.equal(await http409.attacher!.attach(spec, target()), '');
});

test('detach: deleted, done once the object is gone', async () => {
  const { cache, calls, attacher, va } = setup();
  cache.set(va({ attached: true }));
  let done = false;
  const detached = attacher.detach(spec, target()).then(() => (done = true));
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.deepEqual(calls, [
    { method: 'DELETE', path: `/apis/storage.k8s.io/v1/volumeattachments/${name}` },
  ]);
  assert.equal(done, false, 'not before the external-attacher lets it go');
  cache.remove(name);
  await detached;
});

test('fenced: no write once the Lease is lost', async () => {
  const { calls, attacher } = setup(() => Promise.reject(new Error('leadership lost')));
  await assert.rejects(attacher.attach(spec, target()), /leadership lost/);
  await assert.rejects(attacher.detach(spec, target()), /leadership lost/);
  assert.deepEqual(calls, []);
});

test('attachRequired false: no attacher at all', () => {
  const { cache } = setup();
  const plugin = vaPlugin('d.csi', false, {
    http: { post: () => Promise.reject(new Error()), delete: () => Promise.reject(new Error()) },
    cache,
    fence: () => Promise.resolve(),
  });
  assert.equal(plugin.attacher, undefined);
  assert.equal(plugin.caps.attachable, false);
});
