/**
 * The attach/detach controller's pure core: its world, fold and planner (the engine's core:
 * src/engine/cores.ts; its executor and attachment verifier: src/execute/).
 */
export * from './fold.js';
export { attachmentsOf } from './fold-pairs.js';
export * from './plan.js';
export * from './types.js';
