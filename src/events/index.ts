export * from './k8s.js';
export * from './types.js';
