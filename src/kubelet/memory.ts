/**
 * How the kubelet's world is held in memory, in one place: the fold and the planner speak
 * of the desired state of world, attachments and mounts, as the kubelet's volume manager
 * does (desired_state_of_world.go, actual_state_of_world.go), and this module says how
 * those are kept.
 *
 * - One record per volume (volumes.ts): its desired-state entry, its attachment, its
 *   mounts and its cause under one entry of `world.volumes`, read as the `dsw`,
 *   `attachments`, `mounts` and `causes` maps.
 * - A volume's pods and mounts held bare for one pod, a Map only from two (by-pod.ts).
 * - A resolved spec's traits one shared, frozen object of its kind
 *   (src/operations/volume-traits.ts), and the strings the world keeps flat
 *   (src/desired/flat.ts).
 *
 * The budget: under `kubeletHeapBytesPerPairMax` bytes of heap a pair (a volume on the
 * node, or a volume in a pod), the whole world counted, at 100,000 pairs;
 * scripts/bench/planner.ts measures it ("heap per pair").
 */
export * from './by-pod.js';
export * from './volumes.js';

/** The heap the kubelet's whole world may take a pair, in bytes (see above). */
export const kubeletHeapBytesPerPairMax = 1024;
