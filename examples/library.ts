/**
 * The library example of docs/library.md: an agent that imports vole, registers one plugin of its
 * own, and waits for a pod's volumes. Run it: `npx tsx examples/library.ts`.
 */
// #region library
import { caps, VolumeManager, type VolumePlugin } from 'vole';

// A plugin is a name, what it can do, and the calls it answers. This one only records
// what it was asked; vole's built-in plugins mount real filesystems.
const mounted = new Set<string>();
const scratch: VolumePlugin = {
  name: 'scratch.example.com',
  caps: caps('scratch.example.com'),
  pod: {
    podVolumePath: (spec, podUid) => `/tmp/example/${podUid}/${spec.innerVolumeSpecName}`,
    setUp: async (spec, _opts, target) =>
      void mounted.add(`${target.pod}/${spec.outerVolumeSpecName}`),
    tearDown: async (spec, target) =>
      void mounted.delete(`${target.pod}/${spec.outerVolumeSpecName}`),
  },
};

const vm = VolumeManager.create({ node: 'node-1', plugins: [scratch] });
vm.start();
vm.inputs.addPod({
  metadata: { name: 'web', namespace: 'default', uid: 'uid-web' },
  spec: { volumes: [{ name: 'cache', csi: { driver: 'scratch.example.com' } }] },
});
vm.inputs.markSourcesReady(); // every pod is known: unmounts and detaches may start from now on

await vm.waitForAttachAndMount('uid-web');
console.log('mounted:', [...vm.status.getMountedVolumesForPod('uid-web').keys()]); // [ 'cache' ]

vm.inputs.removePod('uid-web');
await vm.waitForUnmount('uid-web');
console.log('still mounted:', [...mounted]); // []
await vm.drainAndStop();
// #endregion
