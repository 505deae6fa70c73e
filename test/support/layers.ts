/** The layers of the source tree, which test/tidy.unit.test.ts enforces. */
/**
 * Layers from the bottom, one for every folder of src/ (and machines/, and each file
 * directly under src/); a file may import from its own layer or lower ones. A file entry
 * puts one file of a folder lower than its folder (the longest matching prefix wins).
 * docs/layout.md draws them (test/docs.unit.test.ts checks the picture against this table).
 */
export const layers: [string, number][] = [
  ['machines/', 0],
  ['src/ids.ts', 0],
  ['src/assert.ts', 0],
  ['src/constants.ts', 0],
  ['src/events/', 0],
  // The operation book, the call table, the pending operations and the compiled pair
  // machines both folds share, and the snapshot codec's port both cores' codecs are on.
  ['src/operations/', 1],
  // Binding and provisioning policy, which both cores' folds and planners ask (its room:
  // the tidy test fails on a provisioning decision elsewhere).
  ['src/binding/', 1],
  // The desired-state intake both folds share: objects, who reads them, claims, forgetting,
  // and pod resolution.
  ['src/desired/', 1],
  // The kubelet's core: its world and fold, its planner a layer above (as the controller's).
  ['src/kubelet/', 2],
  // The controller's core: its world and fold beside the node's, its planner beside plan/.
  ['src/controller/types.ts', 2],
  ['src/controller/fold.ts', 2],
  ['src/controller/fold-pairs.ts', 2],
  ['src/controller/invariants.ts', 2],
  ['src/controller/provisioning.ts', 2],
  ['src/controller/fold-external.ts', 2],
  ['src/controller/pod-record.ts', 2],
  ['src/controller/attachment-record.ts', 2],
  ['src/controller/claim-record.ts', 2],
  ['src/controller/shared-values.ts', 2],
  ['src/controller/memory.ts', 2],
  // Its snapshot codec beside its world (the kubelet's is in src/kubelet/, layer 2 too).
  ['src/controller/snapshot-codec.ts', 2],
  ['src/controller/', 3],
  ['src/kubelet/plan.ts', 3],
  ['src/kubelet/plan-provision.ts', 3],
  ['src/kubelet/plan-operator.ts', 3],
  ['src/kubelet/planner.ts', 3],
  ['src/sources/', 3],
  ['src/host/', 3],
  ['src/clock.ts', 3],
  ['src/plugins/', 4],
  // The engine (Engine, Core, the cores by mode) sits on the cores and the plugins.
  ['src/engine/', 5],
  ['src/execute/', 6],
  ['src/log/', 6],
  ['src/csi/', 6],
  ['src/postmortem/', 7],
  ['src/metrics/', 7],
  ['src/agent/', 8],
  ['src/cluster/', 9],
  ['src/kube/', 9],
  ['src/sim/', 10],
  ['src/cli/', 11],
  ['src/inspect/', 11],
  ['src/index.ts', 11],
  // The package's sub-path entries (vole/csi, vole/testing, vole/core, vole/metrics).
  ['src/entry/', 11],
];
/** The top of the pure core: operations, the kubelet's and the controller's cores, their planners. */
export const coreLayerMax = 3;

/** The layer of a path: its longest matching entry's (undefined: in no layer). */
export function layerOf(path: string): number | undefined {
  let best: [string, number] | undefined;
  for (const entry of layers) {
    if (path.startsWith(entry[0]) && entry[0].length > (best?.[0].length ?? -1)) best = entry;
  }
  return best?.[1];
}

/** The name the picture of docs/layout.md gives an entry: its folder, or a file of src/. */
export function shownName(prefix: string): string {
  const path = prefix.replace(/^src\//, '');
  return path.includes('/') ? `${path.slice(0, path.indexOf('/'))}/` : path;
}
