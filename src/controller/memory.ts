/**
 * How the attach/detach controller's world is held in memory, in one place: its fold and
 * planner speak of pods, desired and actual attachments of (volume, node) pairs and the
 * nodes' volumes in use, as the controller does (desired_state_of_world.go,
 * actual_state_of_world.go), and this module says how those are kept.
 *
 * - A pod kept as the fields its resolution and readers need (pod-record.ts), a claim as
 *   the fields binding reads (claim-record.ts).
 * - A pair's desire and its attachment in one record, their starting values one shared
 *   object (attachment-record.ts).
 * - Small values that many records hold equal, held once (shared-values.ts); the traits of
 *   a resolved spec one shared object of its kind (src/operations/volume-traits.ts).
 *
 * The budget: under `controllerHeapBytesPerPodMax` bytes of heap a pod for the whole
 * process, at 150,000 pods over 5,000 nodes; scripts/bench/cluster.ts measures it
 * ("controller heap a pod after the load").
 */
export * from './attachment-record.js';
export * from './claim-record.js';
export * from './pod-record.js';
export * from './shared-values.js';

/** The heap the controller's process may take a pod, in bytes (see above). */
export const controllerHeapBytesPerPodMax = 2048;
