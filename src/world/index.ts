export * from './by-pod.js';
export * from './compiled-machine.js';
export * from './fold.js';
export * from './invariants.js';
export * from './pairs.js';
export * from './queries.js';
export * from './resolve.js';
export type * from './types.js';
export * from './fold-operator.js';
