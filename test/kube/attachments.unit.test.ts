import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import {
  confirmedAttachments,
  csiVolumeOf,
  volumeAttachmentName,
  type VolumeAttachmentView,
} from '../../src/kube/attachments.js';
import { contentRefsOf } from '../../src/kube/references.js';

test('kube: a VolumeAttachment is named csi- + sha256(handle + driver + node)', () => {
  const expected = createHash('sha256').update('vol-1hostpath.csi.k8s.ionode-a').digest('hex');
  assert.equal(volumeAttachmentName('vol-1', 'hostpath.csi.k8s.io', 'node-a'), `csi-${expected}`);
  assert.notEqual(
    volumeAttachmentName('vol-1', 'hostpath.csi.k8s.io', 'node-a'),
    volumeAttachmentName('vol-1', 'hostpath.csi.k8s.io', 'node-b'),
  );
});

test('kube: csiVolumeOf splits kubernetes.io/csi/<driver>^<handle>, refuses others', () => {
  assert.deepEqual(csiVolumeOf('kubernetes.io/csi/disk.csi.vole.dev^disk-1'), {
    driver: 'disk.csi.vole.dev',
    handle: 'disk-1',
  });
  assert.equal(csiVolumeOf('disk.vole.dev/disk-1'), undefined);
  assert.equal(csiVolumeOf('kubernetes.io/csi/no-caret'), undefined);
});

test('kube: a CSI volume counts once its VolumeAttachment is attached, with its metadata', () => {
  const volume = 'kubernetes.io/csi/d.example^h1';
  const name = volumeAttachmentName('h1', 'd.example', 'n1');
  const attachments = (attached: boolean) =>
    new Map<string, VolumeAttachmentView>([
      [name, { name, attached, attachmentMetadata: { devicePath: '/dev/x', b: '2' } }],
    ]);
  const given = {
    node: 'n1',
    volumesAttached: [{ name: volume }, { name: 'disk.vole.dev/d2', devicePath: '/dev/loop3' }],
  };
  // Refuses: listed by the controller but not yet attached by the external-attacher.
  assert.deepEqual(confirmedAttachments({ ...given, volumeAttachments: attachments(false) }), [
    { name: 'disk.vole.dev/d2', devicePath: '/dev/loop3' },
  ]);
  // Refuses: no VolumeAttachment at all.
  assert.deepEqual(confirmedAttachments({ ...given, volumeAttachments: new Map() }).length, 1);
  // Acts: the publish context is the attachment metadata, keys sorted.
  assert.deepEqual(confirmedAttachments({ ...given, volumeAttachments: attachments(true) }), [
    { name: volume, devicePath: '{"b":"2","devicePath":"/dev/x"}' },
    { name: 'disk.vole.dev/d2', devicePath: '/dev/loop3' },
  ]);
  // Quiet: an attachment to another node does not count for this one.
  assert.deepEqual(
    confirmedAttachments({ ...given, node: 'n2', volumeAttachments: attachments(true) }).map(
      (a) => a.name,
    ),
    ['disk.vole.dev/d2'],
  );
});

test('kube: a pod reads the ConfigMaps and Secrets of its volumes, each once', () => {
  const refs = contentRefsOf({
    metadata: { name: 'p', namespace: 'ns' },
    spec: {
      volumes: [
        { name: 'a', configMap: { name: 'cm' } },
        { name: 'b', secret: { secretName: 's' } },
        {
          name: 'c',
          projected: {
            sources: [
              { configMap: { name: 'cm' } },
              { secret: { name: 's2' } },
              { serviceAccountToken: { path: 't' } },
            ],
          },
        },
        { name: 'd', emptyDir: {} },
      ],
    },
  });
  assert.deepEqual(refs, [
    { kind: 'ConfigMap', namespace: 'ns', name: 'cm' },
    { kind: 'Secret', namespace: 'ns', name: 's' },
    { kind: 'Secret', namespace: 'ns', name: 's2' },
  ]);
});
