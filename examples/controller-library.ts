/**
 * The controller example of docs/library.md: the attach/detach controller as a library, with an
 * attachable plugin of its own. Run it: `npx tsx examples/controller-library.ts`.
 */
// #region controller-library
import { caps, ControllerManager, type VolumePlugin } from 'vole';

// An attachable plugin: attach and detach are the controller's; this one records them.
const attachedTo = new Map<string, string>(); // volume → node
const disks: VolumePlugin = {
  name: 'example.com/disk',
  caps: caps('example.com/disk', { attachable: true, deviceMountable: false }),
  attacher: {
    attach: async (spec, target) => {
      attachedTo.set(spec.volume, target.node);
      return `/dev/disk/by-id/${spec.innerVolumeSpecName}`;
    },
    waitForAttach: async (_spec, devicePath) => devicePath,
    volumesAreAttached: async (specs, target) =>
      new Map(specs.map((s) => [s.volume, attachedTo.get(s.volume) === target.node])),
    detach: async (spec) => void attachedTo.delete(spec.volume),
  },
  pod: {
    podVolumePath: (spec, podUid) => `/tmp/example/${podUid}/${spec.innerVolumeSpecName}`,
    setUp: async () => {},
    tearDown: async () => {},
  },
};

const node = (volumesInUse: string[]) => ({
  apiVersion: 'v1',
  kind: 'Node' as const,
  metadata: {
    name: 'node-1',
    annotations: { 'volumes.kubernetes.io/controller-managed-attach-detach': 'true' },
  },
  status: { conditions: [{ type: 'Ready', status: 'True' }], volumesInUse },
});

const cm = ControllerManager.create({ plugins: [disks] }); // .open({ db, plugins }) keeps a log
cm.start();
cm.inputs.upsertObject(node([]));
cm.inputs.upsertObject({
  kind: 'PersistentVolume',
  metadata: { name: 'pv-1' },
  spec: {
    accessModes: ['ReadWriteOnce'],
    csi: { driver: 'example.com/disk', volumeHandle: 'disk-1' },
  },
});
cm.inputs.upsertObject({
  kind: 'PersistentVolumeClaim',
  metadata: { name: 'data', namespace: 'default' },
  spec: { volumeName: 'pv-1' },
});
cm.inputs.addPod({
  metadata: { name: 'web', namespace: 'default', uid: 'uid-web' },
  spec: {
    nodeName: 'node-1',
    volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }],
  },
});
await cm.waitUntilSettled();
// volumesAttached: [ { name: 'example.com/disk/disk-1', devicePath: '/dev/disk/by-id/pv-1' } ]
console.log('volumesAttached:', cm.status.volumesAttached('node-1'));

cm.inputs.removePod('uid-web');
cm.inputs.upsertObject(node([])); // the node reports the volume no longer in use: it may detach
await cm.waitUntilSettled();
console.log('attached:', [...attachedTo]); // []
await cm.drainAndStop();
// #endregion
