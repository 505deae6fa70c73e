export * from './explain.js';
export * from './history.js';
export * from './jsonl.js';
export * from './replay.js';
export * from './verify.js';
export * from './why.js';
export * from './log-world.js';
export * from './open.js';
