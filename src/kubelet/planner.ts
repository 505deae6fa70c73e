export * from './operations.js';
export * from './plan.js';
