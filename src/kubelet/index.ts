export * from './by-pod.js';
export * from '../operations/compiled-machine.js';
export * from './fold.js';
export * from './invariants.js';
export * from './pairs.js';
export * from './queries.js';
export * from '../desired/resolve.js';
export type * from './types.js';
export * from '../operations/fold-operator.js';
